#!/usr/bin/env bash
# azd's postdeploy hook (azure.yaml): publishes the handler (scripts/publish.sh) to the app that
# provisioning created, named by main.bicep's appName output (azd keeps outputs in the
# environment: hooks get them as variables, and azd env get-value reads them).
set -euo pipefail
cd "$(dirname "$0")/.."
app=${appName:-}
if [ -z "$app" ] && command -v azd >/dev/null; then
  app=$(azd env get-value appName 2>/dev/null || true)
fi
if [ -z "$app" ]; then
  echo "azd-postdeploy.sh: no function app name: the azd environment has no appName output (run azd provision first, or azd up)" >&2
  exit 1
fi
exec scripts/publish.sh "$app"
