#!/usr/bin/env bash
# Benchmarks against a local Azurite, PostgreSQL and MariaDB it starts and stops. Prints the raw
# go test -bench output and summaries as ratios against baselines measured in the same run
# (absolute times drift on a shared machine; ratios travel):
#   lease   each lease operation's p50 against a bare blob GET / conditional PUT, with the blob
#           requests each costs;
#   source  rows/s of the source reading 1,000,000 rows in batches of 1,000 against a
#           hand-written keyset loop over the same table (PostgreSQL, SQLite, MySQL/MariaDB);
#   tick    a poller catching up on 200,000 PostgreSQL rows (batches of 1,000, no-op handler,
#           state on Azurite) against the hand-written loop, with blob requests per tick;
#   sink    a poller sending 10,000 PostgreSQL rows to Azurite's storage queue and to a local
#           webhook against a hand-written loop making the same call per row (SINK_ROWS);
#   handler the handler binary's start to first answered GET / and its idle RSS;
#   logical the logical cursor: catch-up of LOGICAL_ROWS (50,000) rows in transactions of
#           LOGICAL_TX_ROWS (5) through the tick against a bare pg_logical_slot_peek_binary_changes
#           decoded with pglogrepl.Parse and against the xid cursor's tick on the same table; an
#           idle tick's blob requests and SQL round trips against an idle xid poller's; and
#           commit-to-delivery time on a 1 s schedule (LATENCY_ROWS=30 rows), both cursors.
#
#   scripts/bench.sh [lease|source|tick|status|sink|handler|logical|all]     COUNT=3 repetitions; BENCH_ROWS=1000000
set -euo pipefail
source "$(dirname "$0")/lib/services.sh"
cd "$ROOT"
export GOFLAGS=${GOFLAGS:--buildvcs=false}
COUNT=${COUNT:-3}
what=${1:-all}
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
  echo "Source keyset scan, ${BENCH_ROWS:-1000000} rows in batches of 1,000 (median over $COUNT runs; target >= 0.90):"
  printf '%-10s %14s %18s %18s %16s\n' driver source-rows/s handwritten-rows/s source/handwritten source/pgx-native
  for d in postgres sqlite mysql; do
    s=$(metric "$out" "BenchmarkKeysetScan/$d" source-rows/s | median_of)
    h=$(metric "$out" "BenchmarkKeysetScan/$d" handwritten-rows/s | median_of)
    r=$(metric "$out" "BenchmarkKeysetScan/$d" source/handwritten | median_of)
    n=$(metric "$out" "BenchmarkKeysetScan/$d" source/pgx-native | median_of)
    printf '%-10s %14.0f %18.0f %18.3f %16s\n' "$d" "$s" "$h" "$r" "${n:--}"
  done
fi

if [ "$what" = tick ] || [ "$what" = all ]; then
  [ -n "${AZURITE_CONNECTION_STRING:-}" ] || start_azurite
  [ -n "${PG_TEST_DSN:-}" ] || start_postgres
  out="$RUN_DIR/bench-tick.txt"
  log "go test -run '^\$' -bench BenchmarkCatchUp -benchtime 3x -count $COUNT ./internal/tick/"
  : >"$out"
  gotest "$out" -run '^$' -bench BenchmarkCatchUp -benchtime 3x -count "$COUNT" -timeout 60m ./internal/tick/
  echo
  echo "Catch-up of ${CATCHUP_ROWS:-200000} PostgreSQL rows, batches of 1,000, no-op handler (median over $COUNT runs; target >= 0.90):"
  printf '%-26s %12s %18s %16s %14s %15s %11s %12s\n' mode tick-rows/s handwritten-rows/s tick/handwritten batches/tick blob-writes/tick blob-reads idle-writes
  for m in checkpoint-every-2s checkpoint-every-batch; do
    printf '%-26s %12.0f %18.0f %16.3f %14s %15s %11s %12s\n' "$m" \
      "$(metric "$out" "BenchmarkCatchUp/$m" tick-rows/s | median_of)" \
      "$(metric "$out" "BenchmarkCatchUp/$m" handwritten-rows/s | median_of)" \
      "$(metric "$out" "BenchmarkCatchUp/$m" tick/handwritten | median_of)" \
      "$(metric "$out" "BenchmarkCatchUp/$m" batches/tick | median_of)" \
      "$(metric "$out" "BenchmarkCatchUp/$m" blob-writes/tick | median_of)" \
      "$(metric "$out" "BenchmarkCatchUp/$m" blob-reads/tick | median_of)" \
      "$(metric "$out" "BenchmarkCatchUp/$m" idle-blob-writes | median_of)"
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
  log "SINK_ROWS=${SINK_ROWS:-10000} go test -run '^\$' -bench BenchmarkSinkCatchUp -benchtime 3x -count $COUNT ./sink/"
  : >"$out"
  SINK_ROWS=${SINK_ROWS:-10000} gotest "$out" -run '^$' -bench BenchmarkSinkCatchUp -benchtime 3x -count "$COUNT" ./sink/
  echo
  echo "Sinks: PostgreSQL rows through a poller's tick against a hand-written keyset loop making the same"
  echo "call per row at the same concurrency (median over $COUNT runs; target >= 0.9; blob writes <= batches + 1):"
  printf '%-14s %12s %14s %16s %9s %12s\n' sink "tick rows/s" "hand rows/s" "tick/hand" batches "blob writes"
  for s in storagequeue webhook; do
    printf '%-14s %12.0f %14.0f %16.2f %9s %12s\n' "$s" \
      "$(metric "$out" "BenchmarkSinkCatchUp/$s" tick-rows/s | median_of)" \
      "$(metric "$out" "BenchmarkSinkCatchUp/$s" handwritten-rows/s | median_of)" \
      "$(metric "$out" "BenchmarkSinkCatchUp/$s" tick/handwritten | median_of)" \
      "$(metric "$out" "BenchmarkSinkCatchUp/$s" batches/tick | median_of)" \
      "$(metric "$out" "BenchmarkSinkCatchUp/$s" blob-writes/tick | median_of)"
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
  echo "Handler process (median over $COUNT runs of 20 starts; targets < 50 ms, < 40 MB):"
  echo "start to first answered GET /: $(metric "$out" BenchmarkHandlerStartup start-to-ready-p50-ms | median_of) ms"
  echo "idle RSS after 5 idle ticks:   $(metric "$out" BenchmarkHandlerStartup idle-rss-MB | median_of) MB"
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
  m() { metric "$out" "$1" "$2" | median_of; }
  rows=${LOGICAL_ROWS:-50000}
  echo "Logical cursor catch-up: $rows rows inserted in transactions of ${LOGICAL_TX_ROWS:-5}, batches of 500, no-op handler,"
  echo "default checkpoint interval, state on Azurite (median over $COUNT runs; target logical/peek >= 0.80):"
  printf '%-34s %12s %14s %16s %16s\n' reader rows/s "logical/reader" "blob writes/tick" "SQL trips/tick"
  printf '%-34s %12.0f %14s %16s %16s\n' "logical tick" "$(m BenchmarkLogicalCatchUp logical-rows/s)" 1.000 \
    "$(m BenchmarkLogicalCatchUp logical-blob-writes/tick)" "$(m BenchmarkLogicalCatchUp logical-sql-trips/tick)"
  printf '%-34s %12.0f %14.3f %16s %16s\n' "bare peek + pglogrepl.Parse" "$(m BenchmarkLogicalCatchUp peek-rows/s)" \
    "$(m BenchmarkLogicalCatchUp logical/peek)" - 1
  printf '%-34s %12.0f %14.3f %16s %16s\n' "xid keyset tick" "$(m BenchmarkLogicalCatchUp xid-rows/s)" \
    "$(m BenchmarkLogicalCatchUp logical/xid)" "$(m BenchmarkLogicalCatchUp xid-blob-writes/tick)" "$(m BenchmarkLogicalCatchUp xid-sql-trips/tick)"
  echo "pgoutput messages the logical tick read per row delivered: $(m BenchmarkLogicalCatchUp logical-msgs-read/row)" \
    "(a bare peek: $(awk -v t="${LOGICAL_TX_ROWS:-5}" 'BEGIN {printf "%.2f", 1 + 2 / t}'))"
  echo
  echo "Idle tick on a 1 s schedule (median over $COUNT runs of the mean of 10 ticks):"
  printf '%-10s %10s %12s %12s %16s\n' cursor "ms" "blob reads" "blob writes" "SQL round trips"
  for c in logical xid; do
    printf '%-10s %10s %12s %12s %16s\n' "$c" "$(m BenchmarkLogicalIdleTick "$c-idle-ms")" "$(m BenchmarkLogicalIdleTick "$c-blob-reads")" \
      "$(m BenchmarkLogicalIdleTick "$c-blob-writes")" "$(m BenchmarkLogicalIdleTick "$c-sql-trips")"
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
