#!/usr/bin/env bash
# Builds the custom handler to bin/handler for this machine, or for Azure with
#   GOOS=linux GOARCH=amd64 scripts/build.sh
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bin
# The version --version prints and the state document records (internal/version): the build info's
# VCS data when go build has it; these -X values when it has none (a build outside git, or with
# -buildvcs=false), from git when there is one, else from SOURCE_REVISION (e.g. a CI variable).
pkg=github.com/pseudotrigger/pseudotrigger/internal/version
rev=$(git rev-parse HEAD 2>/dev/null || echo "${SOURCE_REVISION:-}")
at=$(TZ=UTC git log -1 --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd 2>/dev/null || true)
dirty=false
if [ -n "$(git status --porcelain 2>/dev/null | head -1)" ]; then dirty=true; fi
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X $pkg.revision=$rev -X $pkg.time=$at -X $pkg.modified=$dirty" -o bin/handler ./cmd/handler
echo "built bin/handler (${GOOS:-$(go env GOOS)}/${GOARCH:-$(go env GOARCH)}): $(bin/handler --version 2>/dev/null || echo "handler rev ${rev:-unknown}")"
