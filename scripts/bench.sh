#!/usr/bin/env bash
# Benchmarks against a local Azurite and PostgreSQL it starts and stops. Prints the raw go test
# -bench output and summaries as ratios against baselines measured in the same run (absolute times
# drift on a shared machine; ratios travel):
#   lease   each lease operation's p50 against a bare blob GET / conditional PUT, with the blob
#           requests each costs;
#   source  rows/s of the source reading 1,000,000 rows in batches of 1,000 against a
#           hand-written keyset loop over the same table (PostgreSQL and SQLite).
#
#   scripts/bench.sh [lease|source|all]     COUNT=3 repetitions; BENCH_ROWS=1000000
set -euo pipefail
source "$(dirname "$0")/lib/services.sh"
cd "$ROOT"
export GOFLAGS=${GOFLAGS:--buildvcs=false}
COUNT=${COUNT:-3}
what=${1:-all}

median_of() { # median of the numbers on stdin
  sort -g | awk '{a[NR] = $1} END {if (NR) print a[int((NR + 1) / 2)]}'
}
metric() { # metric FILE BENCH-PREFIX UNIT: one value per run
  awk -v b="$2" -v u="$3" 'index($1, b) == 1 {for (i = 3; i <= NF; i++) if ($i == u) print $(i - 1)}' "$1"
}

if [ "$what" = lease ] || [ "$what" = all ]; then
  start_azurite
  out="$RUN_DIR/bench-lease.txt"
  log "go test -run '^\$' -bench BenchmarkLeaseCycle -benchtime 300x -count $COUNT ./lease/"
  go test -run '^$' -bench BenchmarkLeaseCycle -benchtime 300x -count "$COUNT" ./lease/ | tee "$out"
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
  start_postgres
  export BENCH_DIR="$RUN_DIR/bench"
  mkdir -p "$BENCH_DIR"
  out="$RUN_DIR/bench-source.txt"
  log "go test -run '^\$' -bench BenchmarkKeysetScan -benchtime 3x -count $COUNT ./source/ (creates ${BENCH_ROWS:-1000000} rows first)"
  go test -run '^$' -bench BenchmarkKeysetScan -benchtime 3x -count "$COUNT" -timeout 60m ./source/ | tee "$out"
  echo
  echo "Source keyset scan, ${BENCH_ROWS:-1000000} rows in batches of 1,000 (median over $COUNT runs; target >= 0.90):"
  printf '%-10s %14s %18s %18s %16s\n' driver source-rows/s handwritten-rows/s source/handwritten source/pgx-native
  for d in postgres sqlite; do
    s=$(metric "$out" "BenchmarkKeysetScan/$d" source-rows/s | median_of)
    h=$(metric "$out" "BenchmarkKeysetScan/$d" handwritten-rows/s | median_of)
    r=$(metric "$out" "BenchmarkKeysetScan/$d" source/handwritten | median_of)
    n=$(metric "$out" "BenchmarkKeysetScan/$d" source/pgx-native | median_of)
    printf '%-10s %14.0f %18.0f %18.3f %16s\n' "$d" "$s" "$h" "$r" "${n:--}"
  done
fi
