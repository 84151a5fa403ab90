#!/usr/bin/env bash
# azd's preprovision hook (azure.yaml): refuses to provision while infra/bicep/main.bicepparam
# holds example values (scripts/check-params.sh), as scripts/deploy.sh does, unless
# ALLOW_EXAMPLE=1.
set -euo pipefail
cd "$(dirname "$0")/.."
code=0
scripts/check-params.sh infra/bicep/main.bicepparam || code=$?
[ "$code" -ne 2 ] || exit 2
if [ "$code" -eq 1 ] && [ "${ALLOW_EXAMPLE:-}" != 1 ]; then
  echo "azd-preprovision.sh: refusing to provision them; edit infra/bicep/main.bicepparam, or run ALLOW_EXAMPLE=1 azd up to deploy them anyway" >&2
  exit 2
fi
