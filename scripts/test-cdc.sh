#!/usr/bin/env bash
# Runs the change-data-capture operator tests against real components: PostgreSQL with
# wal_level=logical (PG_TEST_DSN) and Azurite (AZURITE_CONNECTION_STRING), both started on free
# ports here and stopped on exit. Extra arguments go to go test (e.g. -run Logical -v).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/services.sh"
start_postgres
start_azurite
cd "$ROOT"
go test -count=1 "$@" ./internal/ctl/... ./internal/pollerstatus/... ./internal/declared/... ./infra/bicep/...
go test -count=1 -run 'CDC|ReplayChange' "$@" ./internal/source/
