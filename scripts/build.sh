#!/usr/bin/env bash
# Builds the custom handler to bin/handler for this machine, or for Azure with
#   GOOS=linux GOARCH=amd64 scripts/build.sh
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bin
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o bin/handler ./cmd/handler
echo "built bin/handler (${GOOS:-$(go env GOOS)}/${GOARCH:-$(go env GOARCH)})"
