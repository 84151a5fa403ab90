#!/usr/bin/env bash
# Runs every test: installs what the tests need when missing (Azurite and the Bicep syntax
# checker from package.json, PostgreSQL, MariaDB, the spin model checker, Chromium, valgrind), starts the
# servers on free 127.0.0.1 ports, checks formatting, import grouping and tracked files' sizes
# (scripts/lib/tree.sh), vet, staticcheck, the Bicep syntax and the model of the lease protocol
# (internal/model/check.sh), runs go test -race ./... against the real servers, and stops what it
# started, also on failure.
#
#   scripts/test.sh                 everything
#   scripts/test.sh -run Lease      extra arguments go to go test
#   SHORT=1 scripts/test.sh         go test -short (fewer repetitions)
#   FUZZTIME=1m scripts/test.sh     run each fuzz target longer (default 5s; 0 skips them)
#   SKIP_CHECKS=1 scripts/test.sh   the servers and go test only: no gofmt, vet, staticcheck,
#                                   model or Bicep check (a quick rerun; CI runs them all)
set -euo pipefail
source "$(dirname "$0")/lib/services.sh"
cd "$ROOT"
export GOFLAGS=${GOFLAGS:--buildvcs=false}
STATICCHECK_VERSION=v0.8.2

need go "install Go 1.26 or newer"

if [ -z "${SKIP_CHECKS:-}" ]; then
  log "checking formatting, go vet and staticcheck ..."
  unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './node_modules/*'))
  [ -z "$unformatted" ] || die "gofmt would change: $unformatted (run gofmt -w)"
  source scripts/lib/tree.sh
  check_tree . >&2 || die "the checkout's files fail the checks above (scripts/lib/tree.sh)"
  # Each long step runs through run_child (services.sh): Ctrl-C or kill PID stops it at once, with
  # the servers, instead of when it finishes.
  run_child go vet ./...
  run_child go run "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION" ./...

  install_spin
  log "checking the models of the lease protocol and of backfills, and their negative controls (internal/model/check.sh) ..."
  run_child internal/model/check.sh >"$RUN_DIR/model.txt" 2>&1 || { cat "$RUN_DIR/model.txt" >&2; die "internal/model/check.sh failed"; }
  sed -n '/^run /,/^$/p' "$RUN_DIR/model.txt" >&2
fi

start_azurite # installs node_modules first, which the Bicep check needs too
if [ -z "${SKIP_CHECKS:-}" ]; then
  log "checking the Bicep syntax ..."
  run_child node scripts/check-bicep.mjs
fi
start_postgres
start_mariadb
install_chromium
install_valgrind

args=(-race -timeout 30m)
[ -n "${SHORT:-}" ] && args+=(-short)
log "go test ${args[*]} ./... $*"
run_child go test "${args[@]}" ./... "$@"

# Every fuzz target, briefly (their seed corpora already ran above as ordinary tests).
FUZZTIME=${FUZZTIME:-5s}
if [ $# -eq 0 ] && [ "$FUZZTIME" != 0 ]; then
  while read -r pkg target; do
    grep -qs "^func $target(" "$pkg"/*_test.go || die "fuzz target $target is not in ./$pkg (moved? update the list in scripts/test.sh)"
    log "fuzzing $target in ./$pkg for $FUZZTIME ..."
    for try in 1 2; do
      run_child go test -run '^$' -fuzz "^$target\$" -fuzztime "$FUZZTIME" "./$pkg/" >"$RUN_DIR/fuzz-$target.log" 2>&1 && break
      # Go 1.26's fuzz coordinator can report a bare "context deadline exceeded" as the
      # -fuzztime window closes, with no input found (go.dev/issue/75804, fixed in Go 1.27):
      # that, and only that, is run again, once.
      if [ "$try" = 1 ] && grep -q "context deadline exceeded" "$RUN_DIR/fuzz-$target.log" \
        && ! grep -q "Failing input written\|panic:\|_test.go:[0-9]" "$RUN_DIR/fuzz-$target.log"; then
        log "fuzz target $target: the fuzzer's end-of-time race (go.dev/issue/75804), nothing found; fuzzing it again"
        continue
      fi
      tail -30 "$RUN_DIR/fuzz-$target.log" >&2
      die "fuzz target $target failed (its input is saved under ./$pkg/testdata/fuzz/$target)"
    done
  done <<'TARGETS'
internal/state FuzzDecode
handler FuzzInvocationBody
internal/source FuzzCursorValues
internal/appsettings FuzzSettings
internal/store/blobstore FuzzConnectionString
internal/declared FuzzParse
internal/jsonenc FuzzAppendFloat
TARGETS
fi
