#!/usr/bin/env bash
# Deploys pseudotrigger to Azure: the Bicep in infra/bicep (Flex Consumption app, identity-only
# storage, Application Insights, least-privilege roles), then the handler built for linux/amd64,
# published with Azure Functions Core Tools.
#
#   scripts/deploy.sh -g RESOURCE_GROUP [-l LOCATION] [-p infra/bicep/main.bicepparam] [--dry-run]
#
# -l creates the resource group when it does not exist. --dry-run prints the commands instead of
# running them (and needs neither az nor func).
set -euo pipefail
cd "$(dirname "$0")/.."

group="" location="" params="infra/bicep/main.bicepparam" dry=""
while [ $# -gt 0 ]; do
  case "$1" in
    -g) group=$2; shift 2 ;;
    -l) location=$2; shift 2 ;;
    -p) params=$2; shift 2 ;;
    --dry-run) dry=1; shift ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "deploy.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$group" ] || { echo "deploy.sh: -g RESOURCE_GROUP is required (see --help)" >&2; exit 2; }
[ -f "$params" ] || { echo "deploy.sh: parameters file $params not found" >&2; exit 2; }

run() {
  if [ -n "$dry" ]; then
    printf '+ %s\n' "$*"
  else
    "$@"
  fi
}

if [ -z "$dry" ]; then
  command -v az >/dev/null || { echo "deploy.sh: the Azure CLI (az) is not installed: https://learn.microsoft.com/cli/azure/install-azure-cli" >&2; exit 1; }
  command -v func >/dev/null || { echo "deploy.sh: Azure Functions Core Tools (func) is not installed: https://learn.microsoft.com/azure/azure-functions/functions-run-local" >&2; exit 1; }
  az account show >/dev/null 2>&1 || { echo "deploy.sh: not logged in to Azure: run az login" >&2; exit 1; }
fi

if [ -n "$location" ]; then
  run az group create --name "$group" --location "$location" --output none
fi
echo "deploying infra/bicep/main.bicep to $group ..."
if [ -n "$dry" ]; then
  run az deployment group create --resource-group "$group" --name pseudotrigger --template-file infra/bicep/main.bicep --parameters "$params" --output none
  app="<appName output>"
  identity="<identityName output>"
else
  az deployment group create --resource-group "$group" --name pseudotrigger \
    --template-file infra/bicep/main.bicep --parameters "$params" --output none
  app=$(az deployment group show -g "$group" -n pseudotrigger --query properties.outputs.appName.value -o tsv)
  identity=$(az deployment group show -g "$group" -n pseudotrigger --query properties.outputs.identityName.value -o tsv)
fi

echo "building bin/handler for linux/amd64 ..."
run env GOOS=linux GOARCH=amd64 scripts/build.sh
echo "publishing to $app ..."
run func azure functionapp publish "$app"

done="Deployed"
[ -z "$dry" ] || done="Dry run: nothing was deployed. It would deploy"
cat <<NEXT

$done: function app $app (resource group $group), identity $identity.
Next steps:
  1. Let the identity read the source tables: scripts/sql-grants.sh $identity dbo.orders
     prints the T-SQL for your database administrator.
  2. Watch the ticks: az monitor app-insights query, or the function app's Log stream.
  3. See the pollers: set StateStorage__blobServiceUri and POLLER_APP_NAME=$app, then pollerctl status.
NEXT
