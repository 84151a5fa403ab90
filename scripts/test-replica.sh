#!/usr/bin/env bash
# Runs the logical cursor's replica tests: internal/tick's in-process TestLogicalReplica* and
# e2e's process-level ones (which build e2e/replicahandler with -tags faultpoints), against a
# PostgreSQL (wal_level=logical) and an Azurite started here and stopped on exit.
#
#   scripts/test-replica.sh               both packages once
#   scripts/test-replica.sh -count=3      extra arguments go to go test
set -euo pipefail
source "$(dirname "$0")/lib/services.sh"
cd "$ROOT"
start_postgres
start_azurite
log "go test -race ./internal/tick/ ./e2e/ -run Replica $*"
go test -race -timeout 20m ./internal/tick/ ./e2e/ -run Replica -v "$@"
