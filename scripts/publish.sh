#!/usr/bin/env bash
# Publishes the handler to a Flex Consumption function app: stages exactly what the app runs in
# .dist/ (host.json, bin/handler built there for linux/amd64, poller.schema.json, each
# <function>/function.json and, for a declared poller, its <function>/poller.json) and runs
# `func azure functionapp publish APP --custom` there, retrying while a new app's role assignments
# apply. The working tree's bin/handler is never touched: it stays this machine's build, the one
# `func start` runs. Usage: scripts/publish.sh --help.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  cat <<'USAGE'
Usage: scripts/publish.sh APP [--dry-run]

Stages .dist/ with host.json, bin/handler (built there for linux/amd64: the working tree's
bin/handler, this machine's build for func start, is left alone), every <name>/function.json
folder of the repository with its <name>/poller.json when it has one (a declared poller, read by
the handler at start-up) and poller.schema.json (the poller.json files' "$schema"), and publishes
.dist/ to the function app APP with
  func azure functionapp publish APP --custom
(--custom: the custom handler runtime; there is no local.settings.json to tell Core Tools, and
Flex Consumption takes the runtime from the app, never from FUNCTIONS_WORKER_RUNTIME).

A first publish can fail while the app's new identity's role assignments apply (up to about 10
minutes): it is retried, PUBLISH_ATTEMPTS times in all (5) with PUBLISH_RETRY_WAIT seconds (60)
between attempts.

  --dry-run   print the commands instead of running them (needs neither func nor Go)
  -h, --help  this text
USAGE
}

app="" dry=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry=1; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "publish.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *)
      [ -z "$app" ] || { echo "publish.sh: one APP only, got $app and $1 (see --help)" >&2; exit 2; }
      app=$1; shift ;;
  esac
done
[ -n "$app" ] || { echo "publish.sh: the function app's name is required: scripts/publish.sh APP (see --help)" >&2; exit 2; }
attempts=${PUBLISH_ATTEMPTS:-5}
wait_s=${PUBLISH_RETRY_WAIT:-60}
case "$attempts" in ''|*[!0-9]*|0) echo "publish.sh: PUBLISH_ATTEMPTS=$attempts is not a whole number of at least 1" >&2; exit 2 ;; esac
case "$wait_s" in ''|*[!0-9]*) echo "publish.sh: PUBLISH_RETRY_WAIT=$wait_s is not a whole number of seconds" >&2; exit 2 ;; esac

# The function folders: every top-level directory holding a function.json; those that also hold
# a poller.json are declared pollers, and the handler reads that file at start-up.
functions=() files=()
for f in */function.json; do
  [ -f "$f" ] || continue
  fn=${f%/function.json}
  functions+=("$fn")
  files+=("$f")
  [ ! -f "$fn/poller.json" ] || files+=("$fn/poller.json")
done
[ ${#functions[@]} -gt 0 ] || { echo "publish.sh: no <name>/function.json folder found in $(pwd)" >&2; exit 1; }

# shellcheck source=scripts/lib/run.sh
. scripts/lib/run.sh
if [ -z "$dry" ]; then
  command -v func >/dev/null || { echo "publish.sh: Azure Functions Core Tools (func) is not installed: https://learn.microsoft.com/azure/azure-functions/functions-run-local" >&2; exit 1; }
fi

# Azure's build goes straight into the staging folder: a linux/amd64 bin/handler left in the
# working tree would be what a later plain `func start` runs on macOS or arm64.
run rm -rf .dist
run mkdir -p .dist/bin
run env BUILD_DIR=.dist/bin GOOS=linux GOARCH=amd64 scripts/build.sh
[ -n "$dry" ] || [ -f .dist/bin/handler ] || { echo "publish.sh: scripts/build.sh did not write .dist/bin/handler" >&2; exit 1; }
run chmod 755 .dist/bin/handler
run cp host.json .dist/host.json
[ ! -f poller.schema.json ] || run cp poller.schema.json .dist/poller.schema.json
for fn in "${functions[@]}"; do
  run mkdir -p ".dist/$fn"
  run cp "$fn/function.json" ".dist/$fn/function.json"
  [ ! -f "$fn/poller.json" ] || run cp "$fn/poller.json" ".dist/$fn/poller.json"
done
if [ -n "$dry" ]; then
  run cd .dist
  run func azure functionapp publish "$app" --custom
  exit 0
fi
staged="host.json bin/handler"
[ ! -f poller.schema.json ] || staged+=" poller.schema.json"
echo "staged .dist: $staged ${files[*]}"

n=1
while :; do
  echo "publishing .dist to $app (attempt $n of $attempts) ..."
  if (cd .dist && func azure functionapp publish "$app" --custom); then
    echo "published to $app"
    exit 0
  fi
  if [ "$n" -ge "$attempts" ]; then
    cat >&2 <<EOF
publish.sh: publishing to $app failed $attempts times.
  Check the app's Log stream or its Application Insights (the host's start-up errors), that the
  identity id-$app holds Storage Blob Data Owner on the host storage account (the deployment
  package is read with it), and that the app exists: az functionapp show -n $app -g <group>.
  Then run scripts/publish.sh $app again.
EOF
    exit 1
  fi
  echo "publish attempt $n of $attempts failed; a new app's role assignments can take up to 10 minutes to apply; retrying in $wait_s s" >&2
  sleep "$wait_s"
  n=$((n + 1))
done
