#!/usr/bin/env bash
# Benchmarks against a local Azurite, PostgreSQL and MariaDB it starts and stops. Prints the raw
# go test -bench output and summaries as ratios against baselines measured in the same run
# (absolute times drift on a shared machine; ratios travel), with the absolute rows/s and MB/s
# beside them. MB/s is rows/s times the size of a row's JSON as a batch encodes it (the array of
# one object per row a webhook or a queue message carries), in millions of bytes a second.
#   lease   each lease operation's p50 against a bare blob GET / conditional PUT, with the blob
#           requests each costs;
#   source  rows/s of the source reading 1,000,000 rows in batches of 1,000 against a
#           hand-written keyset loop over the same table (PostgreSQL, SQLite, MySQL/MariaDB);
#   tick    a poller catching up on 1,000,000 PostgreSQL rows (batches of 1,000, no-op handler,
#           state on Azurite) against the hand-written loop, with blob requests per tick;
#   sink    a poller sending 10,000 PostgreSQL rows to Azurite's storage queue and to a local
#           webhook (unsigned, and signed as Standard Webhooks says) against a hand-written loop
#           making the same call per row (SINK_ROWS); and 2,000 (SINK_REMOTE_ROWS) to the same
#           sinks behind a proxy adding SINK_LATENCY_MS (20) each way, against what their
#           concurrency allows (concurrency / round trip);
#   handler the handler binary's start to first answered GET / and its idle RSS;
#   logical the logical cursor: catch-up of LOGICAL_ROWS (50,000) rows in transactions of
#           LOGICAL_TX_ROWS (5) through the tick against a bare pg_logical_slot_peek_binary_changes
#           decoded with pglogrepl.Parse and against the xid cursor's tick on the same table; an
#           idle tick's blob requests and SQL round trips against an idle xid poller's; and
#           commit-to-delivery time on a 1 s schedule (LATENCY_ROWS=30 rows), both cursors;
#   backfill a timestamp+pk poller, caught up, backfilling BACKFILL_ROWS (1,000,000) PostgreSQL
#           rows in chunks of 1,000 (no-op handler, state on Azurite) against a hand-written read of
#           the same table by primary key; and an xid poller's commit-to-delivery p50/p95 on a 1 s
#           schedule (LATENCY_ROWS=30 rows) while a backfill of BACKFILL_LIVE_ROWS (200,000) rows
#           runs beside it, against the same without one;
#   e2e     the handler binary (scripts/build.sh) with the example poller orders and its default
#           settings catching up on E2E_ROWS (1,000,000) PostgreSQL rows, state on Azurite,
#           invoked as the host invokes it, against a raw database/sql keyset scan; its peak RSS
#           and blob requests;
#   scale   a cost that grows linearly: the handler binary catching up on SCALE_SMALL (1,000,000)
#           and SCALE_LARGE (10,000,000) PostgreSQL rows with the example poller orders, and on
#           SCALE_LOGICAL_SMALL (100,000) and SCALE_LOGICAL_LARGE (1,000,000) changes with a
#           declared logical poller (in transactions of SCALE_LOGICAL_TX_ROWS, 5): rows/s and peak
#           RSS of each size and large/small of both; and an app of SCALE_POLLERS (50) declared
#           pollers on one table of SCALE_POLLER_ROWS (10,000) rows invoked at once against one
#           poller alone: peak RSS, tick p50/p95 and the PostgreSQL connections held at once.
#   outbox  pgbench (OUTBOX_CLIENTS, 8) writing OUTBOX_RATE (5,000) transactions a second, each an
#           order and its event, into docs/outbox.md's PostgreSQL outbox (xid, cleanup "delete"),
#           and a poller ticking every OUTBOX_PERIOD_MS (1,000; budget OUTBOX_TICK_BUDGET_MS, 800)
#           to a local webhook (OUTBOX_CONCURRENCY, 16), OUTBOX_SECONDS (60) measured after
#           OUTBOX_WARMUP_SECONDS (10), once for each of OUTBOX_MODES ("batch row": the sink's
#           mode batch, many events to a POST as CloudEvents, then a POST per event): events/s
#           written and delivered, rows waiting and the table's rows at most, commit-to-delivery
#           p50/p95/p99, blob writes a minute, where a tick's time goes (OUTBOX_CLEANUP=off:
#           without the cleanup, what it costs); the summary's rows are the first mode's.
#   latency commit-to-delivery p50/p95/p99 of the logical, xid and timestamp+pk cursors, follow
#           mode on ({P}_FOLLOW 59.5 s on a 60 s timer, for LATENCY_FOLLOW_SECONDS, 130) and off (a
#           1 s timer, for LATENCY_SECONDS, 20), at LATENCY_RATES ("1000 10000") changes a second
#           written by 4 pgbench-style clients: keep-up, blob writes a minute, and a following tick's rows/s on a burst against a
#           catch-up tick's (BenchmarkFollowLatency's comment has the knobs);
#   instructions  instructions a row, counted by valgrind's callgrind (the same for the same binary
#           and input whatever else the machine does): the logical decode (against pglogrepl
#           parsing the same messages) and the sinks' rendering (against encoding/json rendering
#           the same rows), the tick's machinery a batch (BenchmarkTickMachinery: from two runs'
#           counts) and MySQL's keyset read (against a database/sql loop), each against its count
#           in docs/performance.md's "Instructions per row": the script fails when one rose more
#           than 3%.
# At the end, a summary of the paths that ran: rows/s, MB/s, the measured ratio (or figure), the
# goal and whether it is met, and REGRESSION when it is more than 10% worse than the figure
# recorded in docs/performance.md (its "Recorded figures" table holds the goals and records).
#
#   scripts/bench.sh [lease|source|tick|status|sink|handler|logical|backfill|e2e|scale|outbox|latency|instructions|all]     COUNT=3 repetitions; BENCH_ROWS=1000000
#   scripts/bench.sh goals     prints each summary path's goal and recorded figure as read from the doc
set -euo pipefail
source "$(dirname "$0")/lib/services.sh"
cd "$ROOT"
export GOFLAGS=${GOFLAGS:--buildvcs=false}
COUNT=${COUNT:-3}
what=${1:-all}
case "$what" in
lease | source | tick | status | sink | handler | logical | backfill | e2e | scale | outbox | latency | instructions | all | goals) ;;
*) die "unknown section $what: give one of lease, source, tick, status, sink, handler, logical, backfill, e2e, scale, outbox, latency, instructions, all (or goals)" ;;
esac
# The handler binary runs with a GC target of 400 (cmd/handler); the in-process benchmarks use
# the same, for the code under test and its baseline alike.
export GOGC=${GOGC:-400}

# gotest FILE ARGS... runs go test ARGS in a process group of its own (run_child: a signal stops
# it and the benchmark binaries at once, not when they finish), its output shown and appended to
# FILE.
gotest() {
  local out=$1
  shift
  run_child bash -c 'set -o pipefail; go test "$@" | tee -a "$0"' "$out" "$@"
}
median_of() { # median of the numbers on stdin
  sort -g | awk '{a[NR] = $1} END {if (NR) print a[int((NR + 1) / 2)]}'
}
metric() { # metric FILE BENCH-PREFIX UNIT: one value per run
  awk -v b="$2" -v u="$3" 'index($1, b) == 1 {for (i = 3; i <= NF; i++) if ($i == u) print $(i - 1)}' "$1"
}
med() { # med FILE BENCH-PREFIX UNIT: the median over the runs ("-" when the benchmark gave none)
  local v
  v=$(metric "$@" | median_of)
  echo "${v:--}"
}
num() { # num FORMAT VALUE: VALUE in FORMAT, or "-" when it is not a number
  case "$2" in '' | -) echo - ;; *) printf "$1" "$2" ;; esac
}

# The summary: summary_row PATH ROWS/S MB/S MEASURED adds a line, print_summary prints them at
# the end with each path's goal and recorded figure from PERF_DOC's table.
PERF_DOC=${PERF_DOC:-$ROOT/docs/performance.md}
# The paths the summary can name: each has a row in PERF_DOC's table (a docs test checks both ways
# through scripts/bench.sh goals).
SUMMARY_PATHS="tick/checkpoint-every-2s source/postgres source/sqlite source/mysql logical/peek backfill backfill/live-p95 sink/webhook sink/storagequeue sink/remote-webhook sink/remote-storagequeue e2e
  handler/start-ms handler/idle-rss-MB idle-tick/timestamp-pk/blob-reads idle-tick/timestamp-pk/blob-writes
  idle-tick/logical/blob-reads idle-tick/logical/blob-writes idle-tick/xid/blob-reads idle-tick/xid/blob-writes
  scale/rows/rate scale/rows/peak-rss scale/logical/rate scale/logical/peak-rss scale/pollers/pg-connections
  outbox/keep-up outbox/table-rows outbox/p95 instructions/logical-decode instructions/sink-render instructions/tick instructions/mysql-keyset
  latency/logical/p50-ms latency/logical/p99-ms latency/xid/p50-ms latency/follow/blob-writes-min latency/follow/throughput"
_summary=()
instr_failed=() # the instructions section's paths that rose more than 3%
summary_row() {
  case " $(echo $SUMMARY_PATHS) " in *" $1 "*) ;; *) die "summary_row: $1 is not in SUMMARY_PATHS" ;; esac
  _summary+=("$1|$2|$3|$4")
}
# recorded PATH prints "GOAL|RECORDED" from the table that follows the "## Recorded figures"
# heading (| path | goal | recorded | what |), or nothing when the path has no row.
recorded() {
  awk -F'|' -v p="$1" '
    /^## / { inside = ($0 ~ /^## Recorded figures/); next }
    inside && /^\|/ {
      k = $2; gsub(/[ `]/, "", k)
      if (k == p) { g = $3; r = $4; gsub(/^ +| +$/, "", g); gsub(/^ +| +$|`/, "", r); print g "|" r; exit }
    }' "$PERF_DOC"
}
# goals prints each summary path with its goal and recorded figure as read from PERF_DOC, and
# fails naming the paths that have no row there.
goals() {
  local p gr missing=()
  for p in $SUMMARY_PATHS; do
    gr=$(recorded "$p")
    if [ -z "$gr" ]; then
      missing+=("$p")
      continue
    fi
    printf '%s|%s\n' "$p" "$gr"
  done
  [ ${#missing[@]} -eq 0 ] || die "no row in ${PERF_DOC#"$ROOT"/}'s Recorded figures table for: ${missing[*]}"
}
print_summary() {
  [ ${#_summary[@]} -gt 0 ] || return 0
  local row path rows mbs m gr goal rec verdict note
  echo "Summary (median over $COUNT runs; goals and recorded figures from ${PERF_DOC#"$ROOT"/}):"
  printf '%-36s %12s %9s %9s %8s %-8s %9s  %s\n' path rows/s MB/s measured goal verdict recorded note
  for row in "${_summary[@]}"; do
    IFS='|' read -r path rows mbs m <<<"$row"
    gr=$(recorded "$path")
    goal=${gr%%|*} rec=${gr#*|}
    [ -n "$gr" ] || { goal=- rec=-; }
    verdict=$(awk -v m="$m" -v g="$goal" 'BEGIN {
      if (m == "-" || m == "") { print "no figure"; exit }
      n = split(g, a, " "); if (n != 2) { print "no goal"; exit }
      v = m + 0; t = a[2] + 0
      ok = (a[1] == ">=" && v >= t) || (a[1] == ">" && v > t) || (a[1] == "<" && v < t) || (a[1] == "<=" && v <= t) || (a[1] == "=" && v == t)
      print ok ? "met" : "NOT met" }')
    note=$(awk -v m="$m" -v g="$goal" -v r="$rec" 'BEGIN {
      if (m == "-" || m == "" || r == "-" || r == "" || r !~ /^[0-9.]+$/) exit
      split(g, a, " "); v = m + 0; x = r + 0
      if ((a[1] == ">=" || a[1] == ">") && v < x * 0.9) printf "REGRESSION: %.2f < recorded %.2f - 10%%", v, x
      if ((a[1] == "<" || a[1] == "<=") && v > x * 1.1) printf "REGRESSION: %.2f > recorded %.2f + 10%%", v, x }')
    printf '%-36s %12s %9s %9s %8s %-8s %9s  %s' "$path" "$(num %.0f "$rows")" "$(num %.2f "$mbs")" "$(num %.3g "$m")" \
      "$goal" "$verdict" "$rec" "$note" | sed 's/ *$//'
    echo
  done
  echo
}

# build_handler builds bin/handler (scripts/build.sh) once a run, for the sections that run it.
_built=
build_handler() {
  [ -z "$_built" ] || return 0
  log "scripts/build.sh (bin/handler)"
  run_child "$ROOT/scripts/build.sh"
  _built=1
}

if [ "$what" = goals ]; then
  goals
  exit 0
fi

if [ "$what" = lease ] || [ "$what" = all ]; then
  [ -n "${AZURITE_CONNECTION_STRING:-}" ] || start_azurite
  out="$RUN_DIR/bench-lease.txt"
  log "go test -run '^\$' -bench BenchmarkLeaseCycle -benchtime 300x -count $COUNT ./internal/lease/"
  : >"$out"
  gotest "$out" -run '^$' -bench BenchmarkLeaseCycle -benchtime 300x -count "$COUNT" ./internal/lease/
  echo
  echo "Lease protocol on Azurite (median over $COUNT runs of each run's p50):"
  get=$(metric "$out" BenchmarkLeaseCycle baseline-get-p50-ms | median_of)
  put=$(metric "$out" BenchmarkLeaseCycle baseline-put-p50-ms | median_of)
  printf '%-16s %9s %20s %6s %6s\n' operation "p50 ms" ratio GETs PUTs
  printf '%-16s %9.3f %20s %6s %6s\n' "bare GET" "$get" "1.00 x GET" 1 0
  printf '%-16s %9.3f %20s %6s %6s\n' "bare cond. PUT" "$put" "1.00 x PUT" 0 1
  for op in acquire commit heartbeat commit+release; do
    p=$(metric "$out" BenchmarkLeaseCycle "$op-p50-ms" | median_of)
    g=$(metric "$out" BenchmarkLeaseCycle "$op-gets" | median_of)
    u=$(metric "$out" BenchmarkLeaseCycle "$op-puts" | median_of)
    if [ "$op" = acquire ]; then
      r=$(awk -v p="$p" -v a="$get" -v b="$put" 'BEGIN {printf "%.2f x (GET+PUT)", p / (a + b)}')
    else
      r=$(awk -v p="$p" -v b="$put" 'BEGIN {printf "%.2f x PUT", p / b}')
    fi
    printf '%-16s %9.3f %20s %6s %6s\n' "$op" "$p" "$r" "$g" "$u"
  done
  echo
fi

if [ "$what" = source ] || [ "$what" = all ]; then
  [ -n "${PG_TEST_DSN:-}" ] || start_postgres
  [ -n "${MYSQL_TEST_DSN:-}" ] || start_mariadb
  export BENCH_DIR="$RUN_DIR/bench"
  mkdir -p "$BENCH_DIR"
  out="$RUN_DIR/bench-source.txt"
  log "go test -run '^\$' -bench BenchmarkKeysetScan -benchtime 3x -count $COUNT ./internal/source/ (creates ${BENCH_ROWS:-1000000} rows first)"
  : >"$out"
  gotest "$out" -run '^$' -bench BenchmarkKeysetScan -benchtime 3x -count "$COUNT" -timeout 60m ./internal/source/
  echo
  echo "Source keyset scan, ${BENCH_ROWS:-1000000} rows in batches of 1,000 (median over $COUNT runs; goals in the summary):"
  printf '%-10s %14s %10s %18s %14s %18s %16s\n' driver source-rows/s source-MB/s handwritten-rows/s handwritten-MB/s source/handwritten source/pgx-native
  for d in postgres sqlite mysql; do
    s=$(med "$out" "BenchmarkKeysetScan/$d" source-rows/s)
    sm=$(med "$out" "BenchmarkKeysetScan/$d" source-MB/s)
    r=$(med "$out" "BenchmarkKeysetScan/$d" source/handwritten)
    printf '%-10s %14s %10s %18s %14s %18s %16s\n' "$d" "$(num %.0f "$s")" "$(num %.1f "$sm")" \
      "$(num %.0f "$(med "$out" "BenchmarkKeysetScan/$d" handwritten-rows/s)")" "$(num %.1f "$(med "$out" "BenchmarkKeysetScan/$d" handwritten-MB/s)")" \
      "$(num %.3f "$r")" "$(med "$out" "BenchmarkKeysetScan/$d" source/pgx-native)"
    summary_row "source/$d" "$s" "$sm" "$r"
  done
  echo
fi

if [ "$what" = tick ] || [ "$what" = all ]; then
  [ -n "${AZURITE_CONNECTION_STRING:-}" ] || start_azurite
  [ -n "${PG_TEST_DSN:-}" ] || start_postgres
  out="$RUN_DIR/bench-tick.txt"
  log "go test -run '^\$' -bench BenchmarkCatchUp -benchtime 3x -count $COUNT ./internal/tick/"
  : >"$out"
  gotest "$out" -run '^$' -bench BenchmarkCatchUp -benchtime 3x -count "$COUNT" -timeout 60m ./internal/tick/
  echo
  echo "Catch-up of ${CATCHUP_ROWS:-1000000} PostgreSQL rows, batches of 1,000, no-op handler (median over $COUNT runs; goals in the summary):"
  printf '%-24s %11s %8s %18s %14s %16s %12s %16s %10s %10s %11s\n' mode tick-rows/s tick-MB/s handwritten-rows/s handwritten-MB/s \
    tick/handwritten batches/tick blob-writes/tick blob-reads idle-reads idle-writes
  for m in checkpoint-every-2s checkpoint-every-batch; do
    t=$(med "$out" "BenchmarkCatchUp/$m" tick-rows/s)
    tm=$(med "$out" "BenchmarkCatchUp/$m" tick-MB/s)
    r=$(med "$out" "BenchmarkCatchUp/$m" tick/handwritten)
    ir=$(med "$out" "BenchmarkCatchUp/$m" idle-blob-reads)
    iw=$(med "$out" "BenchmarkCatchUp/$m" idle-blob-writes)
    printf '%-24s %11s %8s %18s %14s %16s %12s %16s %10s %10s %11s\n' "$m" "$(num %.0f "$t")" "$(num %.1f "$tm")" \
      "$(num %.0f "$(med "$out" "BenchmarkCatchUp/$m" handwritten-rows/s)")" "$(num %.1f "$(med "$out" "BenchmarkCatchUp/$m" handwritten-MB/s)")" \
      "$(num %.3f "$r")" "$(med "$out" "BenchmarkCatchUp/$m" batches/tick)" "$(med "$out" "BenchmarkCatchUp/$m" blob-writes/tick)" \
      "$(med "$out" "BenchmarkCatchUp/$m" blob-reads/tick)" "$ir" "$iw"
    if [ "$m" = checkpoint-every-2s ]; then
      summary_row "tick/$m" "$t" "$tm" "$r"
      summary_row idle-tick/timestamp-pk/blob-reads - - "$ir"
      summary_row idle-tick/timestamp-pk/blob-writes - - "$iw"
    fi
  done
  echo
fi

if [ "$what" = status ] || [ "$what" = all ]; then
  [ -n "${AZURITE_CONNECTION_STRING:-}" ] || start_azurite
  out="$RUN_DIR/bench-status.txt"
  log "go test -run '^\$' -bench BenchmarkStatus20Pollers -benchtime 30x -count $COUNT ./handler/"
  : >"$out"
  gotest "$out" -run '^$' -bench BenchmarkStatus20Pollers -benchtime 30x -count "$COUNT" ./handler/
  echo
  echo "The status function, 20 pollers on SQLite sources, one failing, state on Azurite (median over $COUNT runs):"
  sp=$(metric "$out" BenchmarkStatus20Pollers/state-only p50-ms | median_of)
  pp=$(metric "$out" BenchmarkStatus20Pollers/with-probes p50-ms | median_of)
  printf '%-34s %8s ms p50\n' "state only (the baseline)" "$sp" "with the live probe of every source" "$pp"
  awk -v a="$pp" -v b="$sp" 'BEGIN { printf "with probes / state only: %.2f\n", a / b }'
  echo
fi

if [ "$what" = sink ] || [ "$what" = all ]; then
  [ -n "${AZURITE_CONNECTION_STRING:-}" ] || start_azurite
  [ -n "${PG_TEST_DSN:-}" ] || start_postgres
  out="$RUN_DIR/bench-sink.txt"
  log "SINK_ROWS=${SINK_ROWS:-10000} SINK_REMOTE_ROWS=${SINK_REMOTE_ROWS:-2000} SINK_LATENCY_MS=${SINK_LATENCY_MS:-20} go test -run '^\$' -bench BenchmarkSinkCatchUp -benchtime 3x -count $COUNT ./sink/"
  : >"$out"
  SINK_ROWS=${SINK_ROWS:-10000} SINK_REMOTE_ROWS=${SINK_REMOTE_ROWS:-2000} SINK_LATENCY_MS=${SINK_LATENCY_MS:-20} \
    gotest "$out" -run '^$' -bench BenchmarkSinkCatchUp -benchtime 3x -count "$COUNT" ./sink/
  echo
  echo "Sinks: PostgreSQL rows through a poller's tick against a hand-written keyset loop making the same"
  echo "call per row at the same concurrency (median over $COUNT runs; goals in the summary; blob writes <= batches + 1):"
  printf '%-14s %12s %9s %14s %9s %12s %9s %12s\n' sink "tick rows/s" "tick MB/s" "hand rows/s" "hand MB/s" "tick/hand" batches "blob writes"
  for s in storagequeue webhook signedwebhook; do # signedwebhook: the webhook with signing_secret, against webhook: what signing costs
    t=$(med "$out" "BenchmarkSinkCatchUp/$s" tick-rows/s)
    tm=$(med "$out" "BenchmarkSinkCatchUp/$s" tick-MB/s)
    r=$(med "$out" "BenchmarkSinkCatchUp/$s" tick/handwritten)
    printf '%-14s %12s %9s %14s %9s %12s %9s %12s\n' "$s" "$(num %.0f "$t")" "$(num %.2f "$tm")" \
      "$(num %.0f "$(med "$out" "BenchmarkSinkCatchUp/$s" handwritten-rows/s)")" "$(num %.2f "$(med "$out" "BenchmarkSinkCatchUp/$s" handwritten-MB/s)")" \
      "$(num %.2f "$r")" "$(med "$out" "BenchmarkSinkCatchUp/$s" batches/tick)" "$(med "$out" "BenchmarkSinkCatchUp/$s" blob-writes/tick)"
    [ "$s" = signedwebhook ] || summary_row "sink/$s" "$t" "$tm" "$r"
  done
  echo
  echo "Sinks at the network's pace: ${SINK_REMOTE_ROWS:-2000} rows to the same sinks behind a proxy adding ${SINK_LATENCY_MS:-20} ms each way,"
  echo "against what their concurrency allows: concurrency / round trip, a lone call's, measured through the proxy (goal >= 0.9):"
  printf '%-20s %12s %14s %13s %12s %14s %12s\n' sink "tick rows/s" "round trip ms" "bound rows/s" "tick/bound" "hand rows/s" "tick/hand"
  for s in storagequeue webhook; do
    b="BenchmarkSinkCatchUp/remote$s"
    t=$(med "$out" "$b" tick-rows/s)
    r=$(med "$out" "$b" tick/bound)
    printf '%-20s %12s %14s %13s %12s %14s %12s\n' "remote$s" "$(num %.0f "$t")" "$(num %.1f "$(med "$out" "$b" round-trip-ms)")" \
      "$(num %.0f "$(med "$out" "$b" bound-rows/s)")" "$(num %.2f "$r")" \
      "$(num %.0f "$(med "$out" "$b" handwritten-rows/s)")" "$(num %.2f "$(med "$out" "$b" tick/handwritten)")"
    summary_row "sink/remote-$s" "$t" - "$r"
  done
  echo
fi

if [ "$what" = handler ] || [ "$what" = all ]; then
  [ -n "${AZURITE_CONNECTION_STRING:-}" ] || start_azurite
  out="$RUN_DIR/bench-handler.txt"
  log "go test -run '^\$' -bench BenchmarkHandlerStartup -benchtime 1x -count $COUNT ./e2e/"
  : >"$out"
  gotest "$out" -run '^$' -bench BenchmarkHandlerStartup -benchtime 1x -count "$COUNT" ./e2e/
  echo
  echo "Handler process (median over $COUNT runs of 20 starts; goals in the summary):"
  st=$(med "$out" BenchmarkHandlerStartup start-to-ready-p50-ms)
  rss=$(med "$out" BenchmarkHandlerStartup idle-rss-MB)
  echo "start to first answered GET /: $st ms"
  echo "idle RSS after 5 idle ticks:   $rss MB"
  echo
  summary_row handler/start-ms - - "$st"
  summary_row handler/idle-rss-MB - - "$rss"
fi

if [ "$what" = logical ] || [ "$what" = all ]; then
  [ -n "${AZURITE_CONNECTION_STRING:-}" ] || start_azurite
  [ -n "${PG_TEST_DSN:-}" ] || start_postgres
  out="$RUN_DIR/bench-logical.txt"
  log "go test -run '^\$' -bench 'BenchmarkLogical(CatchUp|IdleTick|Latency)' (3x, 10x, 1x) -count $COUNT ./internal/tick/"
  : >"$out"
  gotest "$out" -run '^$' -bench BenchmarkLogicalCatchUp -benchtime 3x -count "$COUNT" -timeout 60m ./internal/tick/
  gotest "$out" -run '^$' -bench BenchmarkLogicalIdleTick -benchtime 10x -count "$COUNT" ./internal/tick/
  gotest "$out" -run '^$' -bench BenchmarkLogicalLatency -benchtime 1x -count "$COUNT" ./internal/tick/
  echo
  m() { med "$out" "$1" "$2"; }
  rows=${LOGICAL_ROWS:-50000}
  echo "Logical cursor catch-up: $rows rows inserted in transactions of ${LOGICAL_TX_ROWS:-5}, batches of 500, no-op handler,"
  echo "default checkpoint interval, state on Azurite (median over $COUNT runs; target logical/peek >= 0.80):"
  printf '%-34s %12s %8s %14s %16s %16s\n' reader rows/s MB/s "logical/reader" "blob writes/tick" "SQL trips/tick"
  printf '%-34s %12s %8s %14s %16s %16s\n' "logical tick" "$(num %.0f "$(m BenchmarkLogicalCatchUp logical-rows/s)")" \
    "$(num %.1f "$(m BenchmarkLogicalCatchUp logical-MB/s)")" 1.000 \
    "$(m BenchmarkLogicalCatchUp logical-blob-writes/tick)" "$(m BenchmarkLogicalCatchUp logical-sql-trips/tick)"
  printf '%-34s %12s %8s %14s %16s %16s\n' "bare peek + pglogrepl.Parse" "$(num %.0f "$(m BenchmarkLogicalCatchUp peek-rows/s)")" \
    "$(num %.1f "$(m BenchmarkLogicalCatchUp peek-MB/s)")" "$(num %.3f "$(m BenchmarkLogicalCatchUp logical/peek)")" - 1
  printf '%-34s %12s %8s %14s %16s %16s\n' "xid keyset tick" "$(num %.0f "$(m BenchmarkLogicalCatchUp xid-rows/s)")" \
    "$(num %.1f "$(m BenchmarkLogicalCatchUp xid-MB/s)")" "$(num %.3f "$(m BenchmarkLogicalCatchUp logical/xid)")" \
    "$(m BenchmarkLogicalCatchUp xid-blob-writes/tick)" "$(m BenchmarkLogicalCatchUp xid-sql-trips/tick)"
  summary_row logical/peek "$(m BenchmarkLogicalCatchUp logical-rows/s)" "$(m BenchmarkLogicalCatchUp logical-MB/s)" "$(m BenchmarkLogicalCatchUp logical/peek)"
  echo "pgoutput messages the logical tick read per row delivered: $(m BenchmarkLogicalCatchUp logical-msgs-read/row)" \
    "(a bare peek: $(awk -v t="${LOGICAL_TX_ROWS:-5}" 'BEGIN {printf "%.2f", 1 + 2 / t}'))"
  echo
  echo "Idle tick on a 1 s schedule (median over $COUNT runs of the mean of 10 ticks):"
  printf '%-10s %10s %12s %12s %16s\n' cursor "ms" "blob reads" "blob writes" "SQL round trips"
  for c in logical xid; do
    printf '%-10s %10s %12s %12s %16s\n' "$c" "$(m BenchmarkLogicalIdleTick "$c-idle-ms")" "$(m BenchmarkLogicalIdleTick "$c-blob-reads")" \
      "$(m BenchmarkLogicalIdleTick "$c-blob-writes")" "$(m BenchmarkLogicalIdleTick "$c-sql-trips")"
    summary_row "idle-tick/$c/blob-reads" - - "$(m BenchmarkLogicalIdleTick "$c-blob-reads")"
    summary_row "idle-tick/$c/blob-writes" - - "$(m BenchmarkLogicalIdleTick "$c-blob-writes")"
  done
  echo "logical/xid idle tick time: $(m BenchmarkLogicalIdleTick logical/xid-time)"
  echo
  echo "Commit-to-delivery on a 1 s schedule, ${LATENCY_ROWS:-30} rows a random 0-1.5 s apart (median over $COUNT runs):"
  printf '%-20s %-8s %9s %9s %9s\n' "writer's commit" cursor "p50 ms" "p95 ms" "max ms"
  for mode in server-default writer-sync-commit; do
    for c in logical xid; do
      printf '%-20s %-8s %9s %9s %9s\n' "$mode" "$c" "$(m "BenchmarkLogicalLatency/$mode" "$c-p50-ms")" \
        "$(m "BenchmarkLogicalLatency/$mode" "$c-p95-ms")" "$(m "BenchmarkLogicalLatency/$mode" "$c-max-ms")"
    done
  done
  echo "(server-default is synchronous_commit=off here: a commit returns before its WAL flush, which logical decoding waits for)"
  echo
fi

if [ "$what" = backfill ] || [ "$what" = all ]; then
  [ -n "${AZURITE_CONNECTION_STRING:-}" ] || start_azurite
  [ -n "${PG_TEST_DSN:-}" ] || start_postgres
  out="$RUN_DIR/bench-backfill.txt"
  log "go test -run '^\$' -bench 'BenchmarkBackfill(LiveLatency)?\$' (2x, 2x) -count $COUNT ./internal/tick/ (creates ${BACKFILL_ROWS:-1000000} rows first)"
  : >"$out"
  gotest "$out" -run '^$' -bench 'BenchmarkBackfill$' -benchtime 2x -count "$COUNT" -timeout 60m ./internal/tick/
  gotest "$out" -run '^$' -bench 'BenchmarkBackfillLiveLatency$' -benchtime 2x -count "$COUNT" -timeout 60m ./internal/tick/
  echo
  m() { med "$out" "$1" "$2"; }
  echo "Backfill of ${BACKFILL_ROWS:-1000000} PostgreSQL rows, chunks of 1,000, no-op handler, state on Azurite, the live side"
  echo "idle, against a hand-written read of the table by primary key (median over $COUNT runs; goals in the summary):"
  printf '%-22s %12s %8s %22s\n' reader rows/s MB/s backfill/handwritten
  printf '%-22s %12s %8s %22s\n' "backfill (tick)" "$(num %.0f "$(m BenchmarkBackfill- backfill-rows/s)")" \
    "$(num %.1f "$(m BenchmarkBackfill- backfill-MB/s)")" "$(num %.3f "$(m BenchmarkBackfill- backfill/handwritten)")"
  printf '%-22s %12s %8s %22s\n' "hand-written by key" "$(num %.0f "$(m BenchmarkBackfill- handwritten-rows/s)")" \
    "$(num %.1f "$(m BenchmarkBackfill- handwritten-MB/s)")" 1.000
  summary_row backfill "$(m BenchmarkBackfill- backfill-rows/s)" "$(m BenchmarkBackfill- backfill-MB/s)" "$(m BenchmarkBackfill- backfill/handwritten)"
  echo
  echo "Live commit-to-delivery on a 1 s schedule (xid poller, ${LATENCY_ROWS:-30} rows a random 0-1.5 s apart) with a backfill"
  echo "of ${BACKFILL_LIVE_ROWS:-200000} rows running throughout and without one (median over $COUNT runs):"
  printf '%-18s %9s %9s\n' "" "p50 ms" "p95 ms"
  for k in without with; do
    printf '%-18s %9s %9s\n' "$k a backfill" "$(m BenchmarkBackfillLiveLatency "$k-p50-ms")" "$(m BenchmarkBackfillLiveLatency "$k-p95-ms")"
  done
  echo "p95 with / without: $(m BenchmarkBackfillLiveLatency p95-with/without); reads delivered per run with: $(num %.0f "$(m BenchmarkBackfillLiveLatency reads/run)")"
  summary_row backfill/live-p95 - - "$(m BenchmarkBackfillLiveLatency p95-with/without)"
  echo
fi

if [ "$what" = e2e ] || [ "$what" = all ]; then
  [ -n "${AZURITE_CONNECTION_STRING:-}" ] || start_azurite
  [ -n "${PG_TEST_DSN:-}" ] || start_postgres
  build_handler
  out="$RUN_DIR/bench-e2e.txt"
  rows=${E2E_ROWS:-1000000}
  log "E2E_ROWS=$rows E2E_HANDLER=bin/handler go test -run '^\$' -bench BenchmarkEndToEnd -benchtime 1x -count $COUNT ./e2e/ (creates the table first)"
  : >"$out"
  E2E_ROWS=$rows E2E_HANDLER="$ROOT/bin/handler" gotest "$out" -run '^$' -bench BenchmarkEndToEnd -benchtime 1x -count "$COUNT" -timeout 60m ./e2e/
  echo
  m() { med "$out" BenchmarkEndToEnd "$1"; }
  echo "End to end: the handler binary with the example poller orders and its default settings catching up on"
  echo "$rows PostgreSQL rows, state on Azurite, invoked as the host invokes it, against a raw database/sql keyset"
  echo "scan of the same table in batches of the default batch size (median over $COUNT runs; goal in the summary):"
  printf '%-22s %12s %8s %10s %14s %11s %12s %12s\n' reader rows/s MB/s e2e/raw "peak RSS MB" invocations "blob reads" "blob writes"
  printf '%-22s %12s %8s %10s %14s %11s %12s %12s\n' "handler (orders)" "$(num %.0f "$(m e2e-rows/s)")" "$(num %.1f "$(m e2e-MB/s)")" \
    "$(num %.3f "$(m e2e/raw)")" "$(num %.1f "$(m peak-rss-MB)")" "$(m invocations)" "$(m blob-reads)" "$(m blob-writes)"
  printf '%-22s %12s %8s %10s %14s %11s %12s %12s\n' "raw keyset scan" "$(num %.0f "$(m raw-rows/s)")" "$(num %.1f "$(m raw-MB/s)")" 1.000 - - - -
  echo
  summary_row e2e "$(m e2e-rows/s)" "$(m e2e-MB/s)" "$(m e2e/raw)"
fi

if [ "$what" = scale ] || [ "$what" = all ]; then
  [ -n "${AZURITE_CONNECTION_STRING:-}" ] || start_azurite
  [ -n "${PG_TEST_DSN:-}" ] || start_postgres
  build_handler
  out="$RUN_DIR/bench-scale.txt"
  export SCALE_SMALL=${SCALE_SMALL:-1000000} SCALE_LARGE=${SCALE_LARGE:-10000000}
  export SCALE_LOGICAL_SMALL=${SCALE_LOGICAL_SMALL:-100000} SCALE_LOGICAL_LARGE=${SCALE_LOGICAL_LARGE:-1000000} SCALE_LOGICAL_TX_ROWS=${SCALE_LOGICAL_TX_ROWS:-5}
  export SCALE_POLLERS=${SCALE_POLLERS:-50} SCALE_POLLER_ROWS=${SCALE_POLLER_ROWS:-10000}
  log "SCALE_SMALL=$SCALE_SMALL SCALE_LARGE=$SCALE_LARGE SCALE_LOGICAL_SMALL=$SCALE_LOGICAL_SMALL SCALE_LOGICAL_LARGE=$SCALE_LOGICAL_LARGE" \
    "SCALE_POLLERS=$SCALE_POLLERS E2E_HANDLER=bin/handler go test -run '^\$' -bench BenchmarkScale -benchtime 2x -count $COUNT ./e2e/" \
    "(creates the tables first: $SCALE_LARGE rows take minutes, a line per million)"
  : >"$out"
  E2E_HANDLER="$ROOT/bin/handler" gotest "$out" -run '^$' -bench BenchmarkScale -benchtime 2x -count "$COUNT" -timeout 120m ./e2e/
  echo
  m() { med "$out" "BenchmarkScale/$1" "$2"; }
  echo "Scale: the handler binary catching up at two sizes, a fresh process and state blob each, the order alternating"
  echo "(median over $COUNT runs of 2 each; goals in the summary: large/small rows/s >= 0.90, peak RSS <= 1.2):"
  printf '%-44s %13s %13s %12s %13s %13s %12s\n' path small-rows/s large-rows/s large/small "small RSS MB" "large RSS MB" large/small
  for p in rows logical; do
    if [ $p = rows ]; then
      label="orders, $SCALE_SMALL vs $SCALE_LARGE rows"
    else
      label="logical, $SCALE_LOGICAL_SMALL vs $SCALE_LOGICAL_LARGE changes"
    fi
    printf '%-44s %13s %13s %12s %13s %13s %12s\n' "$label" "$(num %.0f "$(m $p small-rows/s)")" "$(num %.0f "$(m $p large-rows/s)")" \
      "$(num %.3f "$(m $p large/small-rows/s)")" "$(num %.1f "$(m $p small-peak-rss-MB)")" "$(num %.1f "$(m $p large-peak-rss-MB)")" \
      "$(num %.3f "$(m $p large/small-peak-rss)")"
  done
  summary_row scale/rows/rate "$(m rows large-rows/s)" "$(m rows large-MB/s)" "$(m rows large/small-rows/s)"
  summary_row scale/rows/peak-rss - - "$(m rows large/small-peak-rss)"
  summary_row scale/logical/rate "$(m logical large-rows/s)" - "$(m logical large/small-rows/s)"
  summary_row scale/logical/peak-rss - - "$(m logical large/small-peak-rss)"
  echo
  echo "$SCALE_POLLERS declared pollers on one table of $SCALE_POLLER_ROWS rows, their timers fired at once, against one poller"
  echo "alone (5 handler runs an iteration), each catching up and then ticking once more, idle; state on Azurite (median over $COUNT runs):"
  printf '%-22s %13s %12s %12s %17s %17s\n' app "peak RSS MB" "tick p50 ms" "tick p95 ms" "idle tick p50 ms" "idle tick p95 ms"
  for a in one all; do
    label="one poller"
    [ $a = one ] || label="$SCALE_POLLERS pollers"
    printf '%-22s %13s %12s %12s %17s %17s\n' "$label" "$(num %.1f "$(m pollers $a-peak-rss-MB)")" "$(m pollers $a-tick-p50-ms)" \
      "$(m pollers $a-tick-p95-ms)" "$(m pollers $a-idle-tick-p50-ms)" "$(m pollers $a-idle-tick-p95-ms)"
  done
  printf '%-22s %13s\n' "$SCALE_POLLERS / one" "$(num %.2f "$(m pollers all/one-peak-rss)")"
  echo "PostgreSQL connections the handler held at once: $(num %.0f "$(m pollers peak-pg-conns)")" \
    "(bound: POLLER_DB_MAX_CONNECTIONS, default $(num %.0f "$(m pollers pg-conns-bound)"))"
  echo
  summary_row scale/pollers/pg-connections - - "$(m pollers peak-pg-conns)"
fi

if [ "$what" = outbox ] || [ "$what" = all ]; then
  [ -n "${AZURITE_CONNECTION_STRING:-}" ] || start_azurite
  [ -n "${PG_TEST_DSN:-}" ] || start_postgres
  export OUTBOX_RATE=${OUTBOX_RATE:-5000} OUTBOX_CLIENTS=${OUTBOX_CLIENTS:-8} OUTBOX_SECONDS=${OUTBOX_SECONDS:-60}
  export OUTBOX_WARMUP_SECONDS=${OUTBOX_WARMUP_SECONDS:-10} OUTBOX_PERIOD_MS=${OUTBOX_PERIOD_MS:-1000}
  export OUTBOX_TICK_BUDGET_MS=${OUTBOX_TICK_BUDGET_MS:-800} OUTBOX_CONCURRENCY=${OUTBOX_CONCURRENCY:-16}
  OUTBOX_MODES=${OUTBOX_MODES:-batch row}
  for OUTBOX_MODE in $OUTBOX_MODES; do
    case $OUTBOX_MODE in
    batch) how="many events to a POST (the sink's \"mode\": \"batch\", CloudEvents)" ;;
    row) how="a POST per event" ;;
    *) die "OUTBOX_MODES: $OUTBOX_MODE is not batch or row" ;;
    esac
    export OUTBOX_MODE
    out="$RUN_DIR/bench-outbox-$OUTBOX_MODE.txt"
    log "OUTBOX_MODE=$OUTBOX_MODE OUTBOX_RATE=$OUTBOX_RATE OUTBOX_CLIENTS=$OUTBOX_CLIENTS OUTBOX_SECONDS=$OUTBOX_SECONDS OUTBOX_CONCURRENCY=$OUTBOX_CONCURRENCY" \
      "go test -run '^\$' -bench BenchmarkOutbox -benchtime 1x -count $COUNT ./internal/tick/ ($((OUTBOX_WARMUP_SECONDS + OUTBOX_SECONDS)) s of pgbench a run)"
    : >"$out"
    gotest "$out" -run '^$' -bench BenchmarkOutbox -benchtime 1x -count "$COUNT" -timeout 60m ./internal/tick/
    echo
    m() { med "$out" BenchmarkOutbox "$1"; }
    echo "Outbox under load, $how: pgbench, $OUTBOX_CLIENTS clients writing $OUTBOX_RATE transactions/s (an order and its event"
    echo "each) into docs/outbox.md's PostgreSQL outbox (xid cursor, cleanup \"delete\"); a poller ticking every $OUTBOX_PERIOD_MS ms"
    echo "(tick budget $OUTBOX_TICK_BUDGET_MS ms) to a local webhook at concurrency $OUTBOX_CONCURRENCY; $OUTBOX_SECONDS s measured after $OUTBOX_WARMUP_SECONDS s (median over $COUNT runs):"
    printf '%-34s %s\n' "events/s written, delivered" "$(num %.0f "$(m written-events/s)"), $(num %.0f "$(m delivered-events/s)") (delivered/written $(num %.3f "$(m delivered/written)"))"
    printf '%-34s %s\n' "rows waiting after a tick, max" "$(num %.0f "$(m rows-waiting-max)") ($(num %.2f "$(m rows-waiting-ticks)") ticks' worth of writes; counted up to 10,000)"
    printf '%-34s %s\n' "outbox table's rows, max" "$(num %.0f "$(m table-rows-max)") ($(num %.2f "$(m table-rows-ticks)") ticks' worth)"
    printf '%-34s %s\n' "commit-to-delivery ms" "p50 $(num %.0f "$(m p50-ms)"), p95 $(num %.0f "$(m p95-ms)"), p99 $(num %.0f "$(m p99-ms)"), max $(num %.0f "$(m max-ms)") (p95 / (period + 1 s): $(num %.2f "$(m p95/period+1s)"))"
    printf '%-34s %s\n' "blob writes a minute" "$(num %.0f "$(m blob-writes/min)")"
    printf '%-34s %s\n' "a tick, ms" "p50 $(num %.0f "$(m tick-p50-ms)"), p95 $(num %.0f "$(m tick-p95-ms)"); a tick's mean $(num %.0f "$(m tick-ms/tick)"): acquire $(num %.0f "$(m acquire-ms/tick)"), fetch $(num %.0f "$(m fetch-ms/tick)"), deliver $(num %.0f "$(m deliver-ms/tick)"), commit $(num %.0f "$(m commit-ms/tick)")"
    printf '%-34s %s\n' "producers (pgbench)" "$(num %.0f "$(m pgbench-tps)") transactions/s, schedule lag max $(num %.0f "$(m pgbench-lag-max-ms)") ms"
    printf '%-34s %s\n' "the backlog, producers stopped" "delivered at $(num %.0f "$(m drain-events/s)") events/s (-: less than a tick's worth was left)"
    printf '%-34s %s\n' "re-deliveries, failed cleanups" "$(num %.0f "$(m redelivered)"), $(num %.0f "$(m cleanup-errors)")"
    echo "(fetch and deliver overlap when a tick reads ahead; the rest of a tick is its cleanup, the backlog's count and the release)"
    echo
  done
  out="$RUN_DIR/bench-outbox-${OUTBOX_MODES%% *}.txt" # the summary's: the first mode's
  summary_row outbox/keep-up "$(m delivered-events/s)" - "$(m rows-waiting-ticks)"
  summary_row outbox/table-rows - - "$(m table-rows-ticks)"
  summary_row outbox/p95 - - "$(m p95/period+1s)"
fi

if [ "$what" = latency ] || [ "$what" = all ]; then
  [ -n "${AZURITE_CONNECTION_STRING:-}" ] || start_azurite
  [ -n "${PG_TEST_DSN:-}" ] || start_postgres
  export LATENCY_RATES=${LATENCY_RATES:-1000 10000} LATENCY_SECONDS=${LATENCY_SECONDS:-20}
  out="$RUN_DIR/bench-latency.txt"
  log "LATENCY_RATES=\"$LATENCY_RATES\" LATENCY_SECONDS=$LATENCY_SECONDS go test -run '^\$' -bench BenchmarkFollowLatency -benchtime 1x -count $COUNT ./internal/tick/"
  : >"$out"
  gotest "$out" -run '^$' -bench BenchmarkFollowLatency -benchtime 1x -count "$COUNT" -timeout 120m ./internal/tick/
  echo
  m() { med "$out" "BenchmarkFollowLatency/$1" "$2"; }
  echo "Commit-to-delivery, ${LATENCY_CLIENTS:-4} clients writing each rate in transactions of 5 (synchronous_commit on);"
  echo "follow: a timer every ${LATENCY_PERIOD_MS:-60000} ms, {P}_FOLLOW ${LATENCY_FOLLOW_MS:-59500} ms, ${LATENCY_FOLLOW_SECONDS:-130} s; timer: every 1,000 ms, no follow, $LATENCY_SECONDS s; timestamp+pk with a"
  echo "settle lag of ${LATENCY_SETTLE_MS:-1000} ms (median over $COUNT runs):"
  printf '%-14s %-7s %8s %9s %9s %9s %9s %8s %11s %14s\n' cursor mode "rate/s" "p50 ms" "p95 ms" "p99 ms" "max ms" keep-up "blob w/min" "follow/catchup"
  for rate in $LATENCY_RATES; do
    for c in logical xid timestamp-pk; do
      for mode in follow timer; do
        k="$c/$mode/$rate-" # the name ends with -GOMAXPROCS: 1000- is not 10000
        printf '%-14s %-7s %8s %9s %9s %9s %9s %8s %11s %14s\n' "$c" "$mode" "$rate" "$(m "$k" p50-ms)" "$(m "$k" p95-ms)" "$(m "$k" p99-ms)" \
          "$(m "$k" max-ms)" "$(num %.3f "$(m "$k" keep-up)")" "$(num %.0f "$(m "$k" blob-writes/min)")" "$(num %.2f "$(m "$k" follow/catchup)")"
      done
    done
  done
  echo "(keep-up: rows delivered by the writers' end over rows written; follow/catchup: the median of ${LATENCY_BURSTS:-5} bursts of ${LATENCY_BURST_ROWS:-300000} rows, each one transaction,"
  echo " delivered by a following tick against a catch-up tick, rows/s from its first row delivered to its last)"
  echo
  top=${LATENCY_RATES##* }
  summary_row latency/logical/p50-ms - - "$(m "logical/follow/$top-" p50-ms)"
  summary_row latency/logical/p99-ms - - "$(m "logical/follow/$top-" p99-ms)"
  summary_row latency/xid/p50-ms - - "$(m "xid/follow/$top-" p50-ms)"
  summary_row latency/follow/blob-writes-min - - "$(m "xid/follow/$top-" blob-writes/min)"
  summary_row latency/follow/throughput - - "$(m "xid/follow/$top-" follow/catchup)"
fi

if [ "$what" = instructions ] || [ "$what" = all ]; then
  command -v valgrind >/dev/null || die "instructions: valgrind is missing (apt-get install valgrind): this section counts with its callgrind"
  [ -n "${PG_TEST_DSN:-}" ] || start_postgres
  [ -n "${MYSQL_TEST_DSN:-}" ] || start_mariadb
  bin="$RUN_DIR/instructions"
  mkdir -p "$bin"
  log "building the test binaries of ./sink, ./internal/source/postgres, ./internal/tick and ./internal/source for callgrind"
  for pkg in sink internal/source/postgres internal/tick internal/source; do
    (cd "$ROOT" && go test -c -o "$bin/$(basename "$pkg").test" "./$pkg") || die "instructions: go test -c ./$pkg failed"
  done
  # count PKG BENCH FUNCTION ITERATIONS: the instructions FUNCTION executed (with what it calls) over
  # ITERATIONS iterations of BENCH, the package's test binary run in its folder under callgrind. GOGC=off:
  # no collection whose timing varies; asyncpreemptoff: callgrind trips on Go's preemption signal;
  # GOMAXPROCS=1: the scheduler's spinning, counted while FUNCTION's goroutine waits, follows the
  # machine's timing on more threads (the decode: 937 and 1,072 a change in two runs, 1,062 and
  # 1,066 on one); and the decode runs 20 times, not 5: the heap's first growth, whose cost varies
  # with what the setup left, spread five runs' counts over 2%, twenty's over 0.3%.
  count() {
    local n
    n=$(cd "$ROOT/$1" && GOMAXPROCS=1 GOGC=off GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --callgrind-out-file=/dev/null \
      --toggle-collect="$3" "$bin/$(basename "$1").test" -test.run '^$' -test.bench "$2" -test.benchtime "$4x" 2>&1 | awk '/Collected :/ { print $NF }')
    [ -n "$n" ] || die "instructions: callgrind counted nothing for $3 in $2"
    echo "$n"
  }
  # count_per_iteration PKG BENCH N1 N2: the instructions of one iteration of BENCH, from two runs of the
  # whole test binary (N1 and N2 iterations): (count(N2) - count(N1)) / (N2 - N1). For work that
  # spans goroutines (the tick), where --toggle-collect follows the thread, not the goroutine;
  # GOMAXPROCS=1 runs them on one thread, which makes the whole run's count repeat (85,458,836,
  # 85,496,390 and 85,501,728 for three runs of the same).
  count_per_iteration() {
    local a b
    a=$(cd "$ROOT/$1" && GOMAXPROCS=1 GOGC=off GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --callgrind-out-file=/dev/null \
      "$bin/$(basename "$1").test" -test.run '^$' -test.bench "$2" -test.benchtime "$3x" 2>&1 | awk '/Collected :/ { print $NF }')
    b=$(cd "$ROOT/$1" && GOMAXPROCS=1 GOGC=off GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --callgrind-out-file=/dev/null \
      "$bin/$(basename "$1").test" -test.run '^$' -test.bench "$2" -test.benchtime "$4x" 2>&1 | awk '/Collected :/ { print $NF }')
    [ -n "$a" ] && [ -n "$b" ] || die "instructions: callgrind counted nothing for $2"
    awk -v a="$a" -v b="$b" -v n="$(($4 - $3))" 'BEGIN { print (b - a) / n }'
  }
  # instructions_recorded PATH: the count a row recorded in PERF_DOC's "Instructions per row" table.
  instructions_recorded() {
    awk -F'|' -v p="$1" '
      /^## / { inside = ($0 ~ /^## Instructions per row/); next }
      inside && /^\|/ { k = $2; gsub(/[ `]/, "", k); if (k == p) { r = $3; gsub(/[^0-9.]/, "", r); print r; exit } }' "$PERF_DOC"
  }
  M=github.com/pseudotrigger/pseudotrigger
  log "callgrind: the logical decode and the sinks' rendering, and their hand loops; the tick's machinery"
  decode=$(count internal/source/postgres '^BenchmarkDecode$' "$M/internal/source/postgres.decodeAll" 20)
  bare=$(count internal/source/postgres '^BenchmarkDecodeBare$' "$M/internal/source/postgres.parseAll" 20)
  render=$(count sink '^BenchmarkMessages$' "$M/sink.Messages" 20)
  hand=$(count sink '^BenchmarkMessagesHand$' "$M/sink.handMessages" 20)
  tickrun=$(count_per_iteration internal/tick '^BenchmarkTickMachinery$/^batches$' 1 3)
  # MariaDB's orders table of 20,000 rows (bench_orders_20000), read whole an iteration; made
  # first, outside callgrind, so that neither count has its making.
  (cd "$ROOT/internal/source" && BENCH_ROWS=20000 "$bin/source.test" -test.run '^$' -test.bench '^BenchmarkMySQLKeysetAlone$' -test.benchtime 1x >/dev/null) ||
    die "instructions: BenchmarkMySQLKeysetAlone failed (MYSQL_TEST_DSN)"
  mysrc=$(BENCH_ROWS=20000 count_per_iteration internal/source '^BenchmarkMySQLKeysetAlone$/^source$' 1 3)
  myhand=$(BENCH_ROWS=20000 count_per_iteration internal/source '^BenchmarkMySQLKeysetAlone$/^hand$' 1 3)
  echo
  echo "Instructions a row (callgrind; against the counts in ${PERF_DOC#"$ROOT"/}'s \"Instructions per row\"; a rise over 3% fails):"
  printf '%-24s %14s %14s %10s %14s %14s\n' path "instructions" "recorded" "/recorded" "hand loop" "/hand loop"
  instr_row() { # PATH PER-ROW HAND-PER-ROW
    local rec ratio
    rec=$(instructions_recorded "$1")
    ratio=$(awk -v m="$2" -v r="${rec:-0}" 'BEGIN { if (r > 0) printf "%.3f", m / r; else print "-" }')
    printf '%-24s %14.0f %14s %10s %14s %14s\n' "$1" "$2" "${rec:--}" "$ratio" "$(num %.0f "$3")" \
      "$(awk -v m="$2" -v h="$3" 'BEGIN { if (h != "-" && h > 0) printf "%.2f", m / h; else print "-" }')"
    summary_row "$1" - - "$ratio"
    if [ "$ratio" != - ] && awk -v x="$ratio" 'BEGIN { exit !(x > 1.03) }'; then instr_failed+=("$1 ($ratio of its recorded count)"); fi
  }
  instr_row instructions/logical-decode "$(awk -v n="$decode" 'BEGIN { print n / (20 * 2000) }')" "$(awk -v n="$bare" 'BEGIN { print n / (20 * 2000) }')"
  instr_row instructions/sink-render "$(awk -v n="$render" 'BEGIN { print n / (20 * 500) }')" "$(awk -v n="$hand" 'BEGIN { print n / (20 * 500) }')"
  instr_row instructions/tick "$(awk -v n="$tickrun" 'BEGIN { print n / 100 }')" -
  instr_row instructions/mysql-keyset "$(awk -v n="$mysrc" 'BEGIN { print n / 20000 }')" "$(awk -v n="$myhand" 'BEGIN { print n / 20000 }')"
  echo "(the decode: BenchmarkDecode's 2,000 inserts, against pglogrepl.Parse alone; the rendering: 500 rows as webhook messages;"
  echo "the tick: its own work a batch of 1,000 rows, each batch committed, source and state in memory (BenchmarkTickMachinery),"
  echo "which has no hand loop: a loop handing the same batches over does nothing of it; MySQL's keyset read: 20,000 rows of"
  echo "BenchmarkKeysetScan's orders from MariaDB in batches of 1,000, against a database/sql loop scanning into typed variables)"
  echo
fi

print_summary
if [ ${#instr_failed[@]} -gt 0 ]; then
  die "instructions a row rose more than 3% over ${PERF_DOC#"$ROOT"/}'s record: ${instr_failed[*]}"
fi
