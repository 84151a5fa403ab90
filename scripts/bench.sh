#!/usr/bin/env bash
# Benchmarks against a local Azurite it starts and stops. Prints the raw go test -bench output and
# a table of p50 latencies as ratios to a bare blob GET / conditional PUT measured in the same run
# (absolute times drift on a shared machine; ratios travel), with blob requests per operation.
#
#   scripts/bench.sh            BENCHTIME=300x COUNT=3 by default
set -euo pipefail
source "$(dirname "$0")/lib/services.sh"
cd "$ROOT"
export GOFLAGS=${GOFLAGS:--buildvcs=false}
BENCHTIME=${BENCHTIME:-300x}
COUNT=${COUNT:-3}
start_azurite
out="$RUN_DIR/bench-lease.txt"
log "go test -run '^\$' -bench BenchmarkLeaseCycle -benchtime $BENCHTIME -count $COUNT ./lease/"
go test -run '^$' -bench BenchmarkLeaseCycle -benchtime "$BENCHTIME" -count "$COUNT" ./lease/ | tee "$out"
echo
echo "Lease protocol on Azurite (median over $COUNT runs of the per-run p50):"
awk '
/^BenchmarkLeaseCycle/ {
  for (i = 3; i < NF; i += 2) { v[$(i+1)] = v[$(i+1)] " " $i }
}
function median(list,   a, n, j, k, t) {
  n = split(list, a, " ")
  for (j = 1; j <= n; j++) for (k = j + 1; k <= n; k++) if (a[k] + 0 < a[j] + 0) { t = a[j]; a[j] = a[k]; a[k] = t }
  return a[int((n + 1) / 2)]
}
END {
  get = median(v["baseline-get-p50-ms"]); put = median(v["baseline-put-p50-ms"])
  printf "%-16s %9s %18s %6s %6s\n", "operation", "p50 ms", "ratio", "GETs", "PUTs"
  printf "%-16s %9.3f %18s %6.2f %6.2f\n", "bare GET", get, "1.00 x GET", median(v["baseline-get-gets"]), median(v["baseline-get-puts"])
  printf "%-16s %9.3f %18s %6.2f %6.2f\n", "bare cond. PUT", put, "1.00 x PUT", median(v["baseline-put-gets"]), median(v["baseline-put-puts"])
  n = split("acquire commit heartbeat commit+release", ops, " ")
  for (j = 1; j <= n; j++) {
    op = ops[j]; p = median(v[op "-p50-ms"])
    if (op == "acquire") r = sprintf("%.2f x (GET+PUT)", p / (get + put)); else r = sprintf("%.2f x PUT", p / put)
    printf "%-16s %9.3f %18s %6.2f %6.2f\n", op, p, r, median(v[op "-gets"]), median(v[op "-puts"])
  }
}' "$out"
