#!/usr/bin/env bash
# The reliability evidence, in one command: the spin model of the lease protocol with its
# negative controls (internal/model/check.sh), the fault matrix (the real handler binaries against
# Azurite through a fault proxy and PostgreSQL, e2e TestFaultMatrix) and the late-commit soak
# (soak TestLateCommit). Starts Azurite and PostgreSQL on free ports and stops them afterwards.
#
#   scripts/verify.sh            bounded: every fault scenario once, a 6 s soak (as CI runs them)
#   scripts/verify.sh --long     40 iterations of every scenario (over 1,000 runs) and a 2 min soak
#
# Environment: VERIFY_ITERATIONS (runs per scenario), VERIFY_SEED (repeat a run's random choices),
# VERIFY_PARALLEL (scenario runs at once; default 4 with --long, else go test's default),
# VERIFY_CHUNK (runs of every scenario per fresh Azurite, default 4), SOAK_DURATION (the soak's
# writing phase). Each part prints its table; the tables are also kept in .test/verify/.
set -euo pipefail
source "$(dirname "$0")/lib/services.sh"
cd "$ROOT"
export GOFLAGS=${GOFLAGS:--buildvcs=false}

long=
case "${1:-}" in
  --long) long=1 ;;
  "") ;;
  *) die "unknown argument $1 (use --long, or nothing)" ;;
esac
if [ -n "$long" ]; then
  export VERIFY_ITERATIONS=${VERIFY_ITERATIONS:-40}
  export SOAK_DURATION=${SOAK_DURATION:-2m}
  parallel=${VERIFY_PARALLEL:-4}
else
  export VERIFY_ITERATIONS=${VERIFY_ITERATIONS:-1}
  parallel=${VERIFY_PARALLEL:-}
fi
out="$RUN_DIR/verify"
mkdir -p "$out"

need go "install Go 1.26 or newer"
install_spin
log "checking the models of the lease protocol and of backfills (internal/model/check.sh) ..."
internal/model/check.sh | tee "$out/model.txt"

start_postgres

# A fresh Azurite for every chunk of the matrix: one in-memory Azurite serving thousands of runs
# in a row slows down until requests time out (seen after about 400 runs). The test adds each
# chunk's counts to the tally file and prints the table of all of them.
chunk=${VERIFY_CHUNK:-4}
export VERIFY_REPORT="$out/faults.txt" VERIFY_TALLY="$out/faults.tally.json"
rm -f "$VERIFY_REPORT" "$VERIFY_TALLY" "$out/faults.log"
seed=${VERIFY_SEED:-$(date +%s)}
left=$VERIFY_ITERATIONS
start=$(date +%s)
n=0
while [ "$left" -gt 0 ]; do
  this=$(( left < chunk ? left : chunk ))
  left=$(( left - this ))
  n=$(( n + 1 ))
  start_azurite
  log "fault matrix, part $n: $this run(s) of every scenario (VERIFY_SEED=$((seed + n))) ..."
  args=(-v -count=1 -timeout 120m -run '^TestFaultMatrix$')
  [ -n "$parallel" ] && args+=(-parallel "$parallel")
  # go test -v streams the matrix's progress lines; about every 10 % of the runs is shown here.
  set +e
  VERIFY_ITERATIONS=$this VERIFY_SEED=$((seed + n)) go test "${args[@]}" ./e2e/ 2>&1 | tee -a "$out/faults.log" \
    | awk '/progress: [0-9]+ of [0-9]+ runs done/ {
        for (i = 1; i <= NF; i++) if ($i == "progress:") { n = $(i + 1); total = $(i + 3) }
        if (n % (int(total / 10) + 1) == 0 || n == total) { print "  " n " of " total " runs done"; fflush() }
      }' >&2
  status=${PIPESTATUS[0]}
  set -e
  stop_azurite
  if [ "$status" != 0 ]; then
    grep -E -- '--- FAIL|to run it again|faults_test.go:[0-9]+: (the|[0-9]+ |a |row|not caught|without)' "$out/faults.log" | head -40 >&2 || true
    [ -f "$VERIFY_REPORT" ] && cat "$VERIFY_REPORT"
    die "the fault matrix failed (full log: $out/faults.log)"
  fi
done
echo
echo "fault matrix, $VERIFY_ITERATIONS run(s) of every scenario in $(($(date +%s) - start)) s ($out/faults.log):"
cat "$VERIFY_REPORT"

log "late-commit soak (writing for ${SOAK_DURATION:-the default 6s}) ..."
export SOAK_REPORT="$out/soak.txt"
rm -f "$SOAK_REPORT"
if ! go test -count=1 -race -timeout 60m -run '^TestLateCommit$' ./e2e/soak/ >"$out/soak.log" 2>&1; then
  tail -40 "$out/soak.log" >&2
  die "the late-commit soak failed (full log: $out/soak.log)"
fi
echo
cat "$SOAK_REPORT"
log "verified: the model, the fault matrix and the late-commit soak"
