#!/usr/bin/env bash
# Model-checks the lease protocol (internal/model/lease.pml) and the backfill's interleaving of
# chunks and live changes (internal/model/backfill.pml) with spin, exhaustively: the safety
# properties, the LTL mutex, and liveness under fairness. Then runs the negative controls, each
# of which spin must refute with a trail that breaks the property named for it. Prints one table
# row per run (spin's own counts) and, for each control, the trail's narrative (spin -t -p,
# the model's "@" lines). Exits 0 only when every property holds and every control is refuted
# for the expected reason. See internal/model/README.md.
#
# Environment:
#   JOBS=n      runs at once (default 2)
#   MAXF=n      faults per run in the liveness check (default 3; 4 takes about 3 times as long)
#   TRAILS=dir  also keep each control's full trail (spin -t -p) as dir/<run>.txt
#   VERBOSE=1   print pan's whole output for every run
#   ONLY=regexp only the runs whose names match (grep -E), e.g. ONLY=bf- for the backfill's
#   EXTRA=1     also check larger configurations (TTL 6 with margin 2, 3 batches, 5 faults;
#               backfills of 4 writes, chunks of 1 key)
set -euo pipefail
cd "$(dirname "$0")"
dir=$(pwd)
command -v spin >/dev/null || { echo "check.sh: spin is not installed (Debian: apt-get install spin)" >&2; exit 2; }
command -v gcc >/dev/null || { echo "check.sh: gcc is not installed" >&2; exit 2; }
jobs=${JOBS:-2}
if [ -n "${TRAILS:-}" ]; then mkdir -p "$TRAILS"; TRAILS=$(cd "$TRAILS" && pwd); fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
t0=$EPOCHREALTIME

# name | how | expected (hold, or the property a control must break) | spin -D options
#   how: safety (assertions, deadlocks; DFS), ltl:NAME (never claim, -a), live:NAME (-a -f),
#        bfs or bfs:NAME (a control: breadth-first, so that its trail is a shortest one)
# A run whose name starts with "bf-" or "ctl-bf-" checks backfill.pml; the others lease.pml.
runs=(
  "safety|safety|hold|"
  "ltl-mutex|ltl:mutex|hold|-DLTL_MUTEX -DNO_MUTEX_ASSERT"
  "liveness|live:live|hold|-DLIVE -DMAXF=${MAXF:-3}"
  "ctl-no-cas|bfs|token|-DNO_CAS"
  "ctl-owner-cas|bfs|token|-DOWNER_CAS"
  "ctl-preempt|bfs|mutex|-DPREEMPT"
  "ctl-preempt-ltl|bfs:mutex|mutex|-DPREEMPT -DLTL_MUTEX -DNO_MUTEX_ASSERT"
  "ctl-owner-settle|bfs|mutex|-DOWNER_SETTLE"
  "ctl-no-margin|bfs|mutex|-DNO_MARGIN"
  "ctl-drift-2|bfs|mutex|-DDRIFT=2"
  "ctl-no-cas-cp|bfs|checkpoint|-DNO_CAS -DNO_TOKEN_ASSERT -DNO_MUTEX_ASSERT -DDRIFT=0"
  "ctl-slow-forever|live:live|live|-DLIVE -DSLOW_FOREVER"
  "bf-logical|safety|hold|"
  "bf-keyset|safety|hold|-DKEYSET"
  "bf-ct|safety|hold|-DKEYSET -DCT"
  "bf-lag-cp|safety|hold|-DLAG_CP"
  "bf-no-ahead-no-compare|safety|hold|-DKEYSET -DNO_AHEAD -DNO_COMPARE"
  "ctl-bf-no-window|bfs|stale-read|-DNO_WINDOW"
  "ctl-bf-select-first|bfs|stale-read|-DSELECT_FIRST"
  "ctl-bf-early-after|bfs|skip|-DEARLY_AFTER -DNW=1"
  "ctl-bf-no-compare|bfs|stale-read|-DKEYSET -DNO_COMPARE"
  "ctl-bf-batch-between|bfs|stale-read|-DKEYSET -DBATCH_BETWEEN"
  "ctl-bf-early-after-ks|bfs|skip|-DKEYSET -DEARLY_AFTER -DNW=1"
  "ctl-bf-keyset-owed|bfs|skip|-DKEYSET -DSTRICT_END"
  "ctl-bf-replay|bfs|stale-read|-DSTRICT_ORDER -DNW=2"
)
if [ -n "${EXTRA:-}" ]; then  # larger configurations; about 4 minutes more
  runs+=(
    "safety-ttl6|safety|hold|-DTTL=6 -DM=2 -DDRIFT=3"
    "safety-rows3|safety|hold|-DROWS=3"
    "safety-skew|safety|hold|-DDRIFT=0 -DSKEW=1"
    "ctl-skew-drift|bfs|mutex|-DDRIFT=1 -DSKEW=1"
    "liveness-f5|live:live|hold|-DLIVE -DMAXF=5"
    "ctl-ttl6-drift4|bfs|mutex|-DTTL=6 -DM=2 -DDRIFT=4"
    "bf-logical-c1|safety|hold|-DC=1"
    "bf-logical-w4|safety|hold|-DNW=4"
    "bf-keyset-w4|safety|hold|-DKEYSET -DNW=4"
    "bf-ct-w4|safety|hold|-DKEYSET -DCT -DNW=4"
    "bf-keyset-cmp-ahead|safety|hold|-DKEYSET -DCMP_AHEAD"
    "ctl-bf-no-compare-ct|bfs|stale-read|-DKEYSET -DCT -DNO_COMPARE"
  )
fi

if [ -n "${ONLY:-}" ]; then
  kept=()
  for r in "${runs[@]}"; do if grep -qE -- "$ONLY" <<<"${r%%|*}"; then kept+=("$r"); fi; done
  [ ${#kept[@]} -gt 0 ] || { echo "check.sh: no run matches ONLY=$ONLY" >&2; exit 2; }
  runs=("${kept[@]}")
fi

# model NAME: the file a run checks
model() { case $1 in bf-*|ctl-bf-*) echo backfill.pml ;; *) echo lease.pml ;; esac; }

# one NAME HOW DEFINES: compile and run pan in its own directory; leaves pan.out, wall, trail.txt
one() {
  local name=$1 how=$2 defs=$3 d="$work/$1" start cflags=(-O1 -w) args=(-m500000) pml
  pml=$(model "$name")
  mkdir -p "$d" && cd "$d" && cp "$dir/$pml" . || return 1
  start=$EPOCHREALTIME
  case $how in
    safety) cflags+=(-DSAFETY) ;;
    ltl:*) args+=(-a -N "${how#ltl:}") ;;
    live:*) args+=(-a -f -N "${how#live:}") ;;
    bfs) cflags+=(-DBFS -DSAFETY); args=() ;;
    bfs:*) cflags+=(-DBFS -DSAFETY); args=(-N "${how#bfs:}") ;;
  esac
  # shellcheck disable=SC2086  # defs is a list of -D options
  if spin $defs -a "$pml" >spin.out 2>&1 && gcc "${cflags[@]}" -o pan pan.c >gcc.out 2>&1; then
    ./pan "${args[@]}" >pan.out 2>&1 || true
  else
    echo "check.sh: spin -a or gcc failed" >pan.out; cat spin.out gcc.out >>pan.out
  fi
  if [ -e "$pml.trail" ]; then
    # shellcheck disable=SC2086
    spin -T -t -p $defs "$pml" >trail.txt 2>&1 || true
    if [ -n "${TRAILS:-}" ]; then cp trail.txt "$TRAILS/$name.txt"; fi
  fi
  echo "$EPOCHREALTIME - $start" | awk '{split($0, a, " - "); printf "%.1f", a[1] - a[2]}' >wall
}

# Run them, at most $jobs at once.
for r in "${runs[@]}"; do
  IFS='|' read -r name how expect defs <<<"$r"
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  ( one "$name" "$how" "$defs" ) &
done
wait

# property NAME: what pan's output says was violated
property() {
  local out="$work/$1/pan.out"
  if grep -q "acceptance cycle" "$out"; then echo live
  elif grep -q "assertion violated" "$out"; then
    case $(grep -m1 "assertion violated" "$out") in
      *seen*|*lastread*) echo stale-read ;;
      *thr*) echo skip ;;
      *rpres*) echo converge ;;
      *trust*) echo mutex ;;
      *tokcur*) echo token ;;
      *cp*) echo checkpoint ;;
      *) echo "other" ;;
    esac
  elif grep -qE "invalid end state|claim violated" "$out"; then echo "other"
  else echo "-"
  fi
}

field() { awk "$2" "$work/$1/pan.out" | head -1; }

status=0
def() { awk -v k="$2" '$1 == "#define" && $2 == k {print $3; exit}' "$dir/$1"; }
printf 'spin %s; lease.pml: %s workers (two share an owner id), TTL %s, margin %s, drift %s, %s batches;\n' \
  "$(spin -V | awk '{print $3}')" "$(def lease.pml W)" "$(def lease.pml TTL)" "$(def lease.pml M)" \
  "$(def lease.pml DRIFT)" "$(def lease.pml ROWS)"
printf 'backfill.pml: %s keys, chunks of %s, %s writes, crashes and takeovers unbounded\n\n' \
  "$(def backfill.pml K)" "$(def backfill.pml C)" "$(def backfill.pml NW)"
printf '%-22s %-9s %-16s %-11s %9s %9s %11s %6s %7s %6s\n' \
  run checks expect result stored matched transitions depth search wall
for r in "${runs[@]}"; do
  IFS='|' read -r name how expect defs <<<"$r"
  out="$work/$name/pan.out"
  errors=$(field "$name" '/errors:/ {print $NF}')
  stored=$(field "$name" '/states, stored/ {print $1}')
  matched=$(field "$name" '/states, matched/ {print $1}')
  trans=$(field "$name" '/transitions \(=/ {print $1}')
  depth=$(field "$name" '/depth reached/ {sub(",", "", $(NF-2)); print $(NF-2)}')
  search=$(field "$name" '/elapsed time/ {print $(NF-1)}')
  broken=$(property "$name")
  case $how in
    safety|bfs) checks="asserts" ;;
    ltl:*|live:*|bfs:*) checks="ltl ${how#*:}" ;;
  esac
  if [ "$expect" = hold ]; then
    if [ "$errors" = 0 ] && ! grep -qE "Search not completed|max search depth too small" "$out"; then
      result=PASS
    else
      result=FAIL; status=1
    fi
  else
    if [ "${errors:-0}" != 0 ] && [ "$broken" = "$expect" ] && [ -s "$work/$name/trail.txt" ]; then
      result=REFUTED
    else
      result="NOT-REFUTED"; status=1
    fi
  fi
  printf '%-22s %-9s %-16s %-11s %9s %9s %11s %6s %6ss %5ss\n' "$name" "$checks" \
    "$( [ "$expect" = hold ] && echo hold || echo "break $expect")" "$result" \
    "${stored:--}" "${matched:--}" "${trans:--}" "${depth:--}" "${search:--}" "$(cat "$work/$name/wall")"
  if [ "$result" = FAIL ] || [ "$result" = NOT-REFUTED ] || [ -n "${VERBOSE:-}" ]; then
    sed 's/^/    | /' "$out" | grep -vE '^\s*\|\s*$' | head -40
  fi
done

# The controls' trails: the narrative lines, the violation, and for a cycle where it starts.
for r in "${runs[@]}"; do
  IFS='|' read -r name how expect defs <<<"$r"
  [ "$expect" = hold ] && continue
  trail="$work/$name/trail.txt"
  [ -s "$trail" ] || continue
  steps=$(grep -m1 -oE 'trail ends after [0-9]+ steps' "$trail" | awk '{print $4}')
  echo
  echo "$name ($defs): breaks $(property "$name"); trail of ${steps:-?} steps (spin -t -p, narrated):"
  if [ "$expect" = live ]; then
    # the stem's last lines and the cycle's first lines
    awk '/^@/ {n++; line[n] = $0} /START OF CYCLE/ {c = n}
         END {for (i = (c > 3 ? c - 3 : 1); i <= c; i++) print "  " line[i];
              print "  <<< the cycle starts here and repeats forever >>>";
              for (i = c + 1; i <= n && i <= c + 16; i++) print "  " line[i];
              if (n > c + 16) print "  ..."}' "$trail"
    grep -m1 -E '^pan:1:' "$work/$name/pan.out" | sed 's/^pan:1:/  VIOLATED:/' 
  else
    { grep -E '^@' "$trail"; grep -m1 -E '^pan:1:' "$work/$name/pan.out" | sed 's/^pan:1:/VIOLATED:/'; } |
      sed 's/^/  /' | awk '{l[NR] = $0} END {if (NR <= 40) {for (i = 1; i <= NR; i++) print l[i]}
           else {for (i = 1; i <= 8; i++) print l[i]; print "  ..."; for (i = NR - 30; i <= NR; i++) print l[i]}}'
  fi
done

echo
printf 'total wall time %.1fs\n' "$(echo "$EPOCHREALTIME - $t0" | awk '{split($0, a, " - "); print a[1] - a[2]}')"
if [ "$status" = 0 ]; then
  echo "check.sh: the models hold (lease: safety, ltl mutex, liveness; backfill: no-stale-read, no-skip, converge) and every negative control is refuted"
else
  echo "check.sh: FAILED (see the rows above)" >&2
fi
exit "$status"
