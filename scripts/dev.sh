#!/usr/bin/env bash
# Runs the product locally: Azurite (installed into node_modules when missing), an SQLite orders
# table that keeps being written to, the custom handler, and the timers: fired by `func start`
# when Azure Functions Core Tools is on PATH, otherwise by cmd/devhost, which POSTs the host's
# timer invocations on each function's schedule. Progress prints as it goes; Ctrl-C stops it all.
#
#   scripts/dev.sh            settings from local.settings.json (created from the .example)
set -euo pipefail
source "$(dirname "$0")/lib/services.sh"
cd "$ROOT"
export GOFLAGS=${GOFLAGS:--buildvcs=false}
need go "install Go 1.26 or newer"
mkdir -p .dev

if [ ! -f local.settings.json ]; then
  cp local.settings.json.example local.settings.json
  log "created local.settings.json from local.settings.json.example"
fi

# Azurite, persisted under .dev/azurite so the checkpoint survives restarts. Port 10000 is what
# UseDevelopmentStorage=true means; when it is taken by something else, use a free port and
# point the handler there.
install_azurite
port=10000
if (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; then
  if curl -s -m 2 "http://127.0.0.1:$port/devstoreaccount1?comp=list" 2>/dev/null | grep -q "EnumerationResults\|AuthorizationFailure\|AuthenticationFailed"; then
    log "using the Azurite already listening on 127.0.0.1:$port"
    port=""
  else
    port=$(free_port)
    log "127.0.0.1:10000 is taken by something else: Azurite goes on 127.0.0.1:$port"
  fi
fi
if [ -n "$port" ]; then
  mkdir -p .dev/azurite
  node_modules/.bin/azurite-blob --blobHost 127.0.0.1 --blobPort "$port" --location .dev/azurite \
    --silent --skipApiVersionCheck --disableTelemetry >.dev/azurite.log 2>&1 &
  pid=$!
  wait_port "$port" "$pid" Azurite .dev/azurite.log || die "Azurite would not start"
  _pids+=("$pid")
  log "Azurite blob service on 127.0.0.1:$port (data in .dev/azurite)"
  if [ "$port" != 10000 ]; then
    cs="DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;BlobEndpoint=http://127.0.0.1:$port/devstoreaccount1;"
    export StateStorage="$cs" AzureWebJobsStorage="$cs"
  fi
fi

log "building bin/handler and bin/devhost ..."
scripts/build.sh >/dev/null
go build -o bin/devhost ./cmd/devhost

if command -v func >/dev/null 2>&1; then
  log "Azure Functions Core Tools found: func start fires the timers; devhost writes orders"
  bin/devhost -writer-only &
  _pids+=("$!")
  func start
else
  log "func (Azure Functions Core Tools) is not on PATH: devhost fires the timers"
  bin/devhost -write-orders
fi
