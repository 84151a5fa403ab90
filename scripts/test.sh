#!/usr/bin/env bash
# Runs every test: installs what the tests need when missing (Azurite and the Bicep syntax
# checker from package.json, PostgreSQL), starts the servers on free 127.0.0.1 ports, checks
# formatting, vet, staticcheck and the Bicep syntax, runs
# go test -race ./... against the real servers, and stops what it started, also on failure.
#
#   scripts/test.sh                 everything
#   scripts/test.sh -run Lease      extra arguments go to go test
#   SHORT=1 scripts/test.sh         go test -short (fewer repetitions)
set -euo pipefail
source "$(dirname "$0")/lib/services.sh"
cd "$ROOT"
export GOFLAGS=${GOFLAGS:--buildvcs=false}
STATICCHECK_VERSION=v0.8.2

need go "install Go 1.26 or newer"

log "checking formatting, go vet and staticcheck ..."
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './node_modules/*'))
[ -z "$unformatted" ] || die "gofmt would change: $unformatted (run gofmt -w)"
go vet ./...
go run "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION" ./...

start_azurite # installs node_modules first, which the Bicep check needs too
log "checking the Bicep syntax ..."
node scripts/check-bicep.mjs
start_postgres

args=(-race -timeout 30m)
[ -n "${SHORT:-}" ] && args+=(-short)
log "go test ${args[*]} ./... $*"
go test "${args[@]}" ./... "$@"
