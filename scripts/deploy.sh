#!/usr/bin/env bash
# Deploys pseudotrigger to Azure: the Bicep in infra/bicep (Flex Consumption app, identity-only
# storage, Application Insights, least-privilege roles), then the handler built for linux/amd64,
# published with Azure Functions Core Tools (scripts/publish.sh). Usage: scripts/deploy.sh --help.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  cat <<'USAGE'
Usage: scripts/deploy.sh -g RESOURCE_GROUP [-l LOCATION] [-p infra/bicep/main.bicepparam] [--dry-run] [--allow-example]

Deploys infra/bicep/main.bicep with the parameters file, builds the handler for linux/amd64 and
publishes it with func azure functionapp publish (scripts/publish.sh), then prints the
deployment's outputs and the next steps (the operator's role for pollerctl, the SQL grants for
each poller's table). With vnetEnabled set in the parameters file it first checks that the
subscription has the Microsoft.App resource provider registered, which the app's subnet needs.

  -g RESOURCE_GROUP  the resource group to deploy to (required)
  -l LOCATION        create the resource group in LOCATION when it does not exist
  -p FILE            the parameters file (default infra/bicep/main.bicepparam)
  --dry-run          print the commands instead of running them (needs neither az nor func)
  --allow-example    deploy even though the parameters file still holds example values
                     (contoso-sql..., database 'shop', pollerctl new's EDIT-ME placeholders)
  -h, --help         this text
USAGE
}

group="" location="" params="infra/bicep/main.bicepparam" dry="" allow_example=""
deployment=pseudotrigger
# value OPTION WHAT "$@": fails with a usage error when OPTION has no value after it.
value() {
  if [ $# -lt 4 ] || [ -z "$4" ] || [ "${4#-}" != "$4" ]; then
    echo "deploy.sh: $1 needs a value ($2) (see --help)" >&2
    exit 2
  fi
}
while [ $# -gt 0 ]; do
  case "$1" in
    -g) value -g "the resource group" "$@"; group=$2; shift 2 ;;
    -l) value -l "the location, e.g. westeurope" "$@"; location=$2; shift 2 ;;
    -p) value -p "the parameters file, e.g. infra/bicep/main.bicepparam" "$@"; params=$2; shift 2 ;;
    --dry-run) dry=1; shift ;;
    --allow-example) allow_example=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "deploy.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$group" ] || { echo "deploy.sh: -g RESOURCE_GROUP is required (see --help)" >&2; exit 2; }
[ -f "$params" ] || { echo "deploy.sh: parameters file $params not found" >&2; exit 2; }

# Example values (scripts/check-params.sh): a dry run warns, a real run refuses them unless
# --allow-example.
code=0
found=$(scripts/check-params.sh "$params" 2>&1) || code=$?
if [ "$code" -ne 0 ]; then
  printf '%s\n' "$found" | sed 's/^/deploy.sh: /;s/^deploy.sh:   /  /' >&2
  [ "$code" -eq 1 ] || exit 2
  [ -z "$dry" ] || echo "  A real run refuses to deploy them unless --allow-example is given." >&2
  if [ -z "$dry" ] && [ -z "$allow_example" ]; then
    echo "deploy.sh: refusing to deploy them; edit $params, or pass --allow-example to deploy anyway" >&2
    exit 2
  fi
fi

# shellcheck source=scripts/lib/run.sh
. scripts/lib/run.sh

if [ -z "$dry" ]; then
  command -v az >/dev/null || { echo "deploy.sh: the Azure CLI (az) is not installed: https://learn.microsoft.com/cli/azure/install-azure-cli" >&2; exit 1; }
  command -v func >/dev/null || { echo "deploy.sh: Azure Functions Core Tools (func) is not installed: https://learn.microsoft.com/azure/azure-functions/functions-run-local" >&2; exit 1; }
  az account show >/dev/null 2>&1 || { echo "deploy.sh: not logged in to Azure: run az login" >&2; exit 1; }
fi

# vnetEnabled delegates the app's subnet to Microsoft.App/environments, which needs the
# Microsoft.App resource provider registered in the subscription (Microsoft's Flex Consumption
# plan page, Considerations). Unregistered, the deployment fails half-way, after the storage
# accounts and the network are made: check first, and say how to register it (which needs a
# subscription-level right a resource group's Contributor may lack, so this script does not).
vnet=$(grep -v -E '^[[:space:]]*//' "$params" | grep -E '^[[:space:]]*param[[:space:]]+vnetEnabled[[:space:]]*=[[:space:]]*true' || true)
if [ -n "$vnet" ]; then
  if [ -n "$dry" ]; then
    run az provider show --namespace Microsoft.App --query registrationState -o tsv
  else
    state=$(az provider show --namespace Microsoft.App --query registrationState -o tsv 2>/dev/null | tr -d '\r' || true)
    if [ "$state" != Registered ]; then
      cat >&2 <<EOF
deploy.sh: $params sets vnetEnabled, which needs the Microsoft.App resource provider registered
  in the subscription (the app's subnet is delegated to Microsoft.App/environments); its
  registration state is ${state:-unknown: az provider show --namespace Microsoft.App failed}.
  Register it once per subscription (it needs the right to register resource providers, e.g. the
  subscription's Contributor, and takes a few minutes), then deploy again:
    az provider register --namespace Microsoft.App --wait
EOF
      exit 1
    fi
  fi
fi

if [ -n "$location" ]; then
  run az group create --name "$group" --location "$location" --output none
fi
echo "deploying infra/bicep/main.bicep to $group ..."
run az deployment group create --resource-group "$group" --name "$deployment" \
  --template-file infra/bicep/main.bicep --parameters "$params" --output none

# main.bicep's outputs, one a line (-o tsv prints a multiselect list one value a line).
query='[properties.outputs.appName.value, properties.outputs.identityName.value, properties.outputs.stateAccount.value, properties.outputs.stateContainer.value]'
if [ -n "$dry" ]; then
  run az deployment group show -g "$group" -n "$deployment" --query "$query" -o tsv
  app="<appName output>" identity="<identityName output>" account="<stateAccount output>" container="<stateContainer output>"
else
  outputs=$(az deployment group show -g "$group" -n "$deployment" --query "$query" -o tsv | tr -d '\r' | tr '\t' '\n')
  { read -r app; read -r identity; read -r account; read -r container; } <<<"$outputs" || true
  if [ -z "${app:-}" ] || [ -z "${identity:-}" ] || [ -z "${account:-}" ] || [ -z "${container:-}" ]; then
    echo "deploy.sh: could not read the outputs of deployment $deployment in $group (appName, identityName, stateAccount, stateContainer); got:" >&2
    printf '%s\n' "$outputs" >&2
    exit 1
  fi
fi

echo "publishing to $app (scripts/publish.sh) ..."
scripts/publish.sh "$app" ${dry:+--dry-run}

# The pollers of the parameters file: "name driver" per entry of the pollers array.
pollers=$(awk '
  /^[ \t]*\/\// { next }
  /^[ \t]*param[ \t]+pollers[ \t]*=/ { in_p = 1; depth = 0; next }
  in_p && depth == 0 && /^[ \t]*\][ \t]*$/ { in_p = 0 }
  !in_p { next }
  depth == 1 && match($0, /name:[ \t]*'\''[^'\'']*'\''/) { s = substr($0, RSTART, RLENGTH); sub(/^name:[ \t]*'\''/, "", s); sub(/'\''$/, "", s); name = s }
  depth == 1 && match($0, /driver:[ \t]*'\''[^'\'']*'\''/) { s = substr($0, RSTART, RLENGTH); sub(/^driver:[ \t]*'\''/, "", s); sub(/'\''$/, "", s); driver = s }
  {
    l = $0; gsub(/'\''[^'\'']*'\''/, "", l); sub(/\/\/.*/, "", l)
    for (i = 1; i <= length(l); i++) {
      c = substr(l, i, 1)
      if (c == "{") depth++
      if (c == "}") { depth--; if (depth == 0 && name != "") { print name, (driver == "" ? "?" : driver); name = ""; driver = "" } }
    }
  }
' "$params")

# The Key Vaults the parameters file's Key Vault references name (@Microsoft.KeyVault(SecretUri=
# https://VAULT.vault.azure.net/... or VaultName=VAULT;...), one a line; comment lines ignored.
vaults=$(grep -v -E '^[[:space:]]*//' "$params" | grep -o -E '@Microsoft\.KeyVault\([^)]*\)' |
  sed -n -E 's#.*SecretUri=https://([^./]+)\..*#\1#p; s#.*VaultName=([^;)]+).*#\1#p' | sort -u || true)
operator_set=$(grep -v -E '^[[:space:]]*//' "$params" | grep -E "^[[:space:]]*param[[:space:]]+operatorPrincipalId[[:space:]]*=[[:space:]]*'[^']+'" || true)

# declared FILE: a declared poller's .source.table and .source.schema (empty when absent), one a
# line, read from its poller.json with awk (no jq: it may not be installed): a small JSON scanner
# that tracks the key path, so a "table" elsewhere (a column, the sink) does not count.
declared() {
  awk '
    { text = text $0 "\n" }
    END {
      n = length(text); depth = 0; table = ""; schema = ""
      for (i = 1; i <= n; i++) {
        c = substr(text, i, 1)
        if (c == "{" || c == "[") { depth++; key[depth] = ""; arr[depth] = (c == "[") }
        else if (c == "}" || c == "]") { depth-- }
        else if (c == "\"") {
          s = ""
          for (i++; i <= n; i++) {
            c = substr(text, i, 1)
            if (c == "\\") { i++; s = s substr(text, i, 1); continue }
            if (c == "\"") break
            s = s c
          }
          for (j = i + 1; j <= n && index(" \t\r\n", substr(text, j, 1)) > 0; j++) ;
          if (substr(text, j, 1) == ":" && !arr[depth]) { key[depth] = s; i = j; continue }
          if (depth == 2 && !arr[2] && key[1] == "source" && key[2] == "table") table = s
          if (depth == 2 && !arr[2] && key[1] == "source" && key[2] == "schema") schema = s
        }
      }
      print table; print schema
    }
  ' "$1"
}

# table NAME DRIVER: the poller's table as schema.table: from NAME/poller.json (.source.table and
# .source.schema) for a declared poller, else from the poller.New call in pollers/NAME (its second
# argument) and its poller.WithSchema option; unqualified names resolve to the default schema.
table() {
  local src t schema
  if [ -f "$1/poller.json" ]; then
    src=$(declared "$1/poller.json" || true)
    t=$(printf '%s\n' "$src" | sed -n 1p)
    schema=$(printf '%s\n' "$src" | sed -n 2p)
  else
    src=$(for f in "pollers/$1"/*.go; do case $f in *_test.go) ;; *) cat "$f" 2>/dev/null ;; esac; done |
      grep -v '^[[:space:]]*//' | tr '\n' ' ' || true)
    t=$(printf '%s\n' "$src" | sed -n 's/.*poller\.New[[:space:]]*([^,]*,[[:space:]]*"\([^"]*\)".*/\1/p' | head -n1)
    schema=$(printf '%s\n' "$src" | sed -n 's/.*poller\.WithSchema("\([^"]*\)").*/\1/p' | head -n1)
  fi
  [ -n "$t" ] || return 1
  if [ -z "${schema:-}" ]; then
    case "$2" in sqlserver) schema=dbo ;; postgres) schema=public ;; esac
  fi
  printf '%s\n' "${schema:+$schema.}$t"
}

done="Deployed"
[ -z "$dry" ] || done="Dry run: nothing was deployed. It would deploy"
blob_uri="https://$account.blob.core.windows.net"
cat <<NEXT

$done:
  function app   $app (resource group $group)
  identity       $identity (its client id: the identityClientId output)
  state storage  $account, container $container ($blob_uri)
NEXT
[ -z "$dry" ] || echo "  (placeholders: a real run reads them from the deployment's outputs, the az deployment group show above)"
cat <<NEXT

Next steps:
  1. Let the identity read each poller's table: these print the T-SQL for your database
     administrator (the table is the second argument of poller.New in pollers/NAME/*.go, or
     .source.table in NAME/poller.json for a declared poller):
NEXT
if [ -z "$pollers" ]; then
  echo "     (no pollers entries found in $params)"
fi
while read -r name driver; do
  [ -n "$name" ] || continue
  hint="pollers/$name/"
  [ ! -f "$name/poller.json" ] || hint="$name/poller.json"
  if t=$(table "$name" "$driver"); then
    hint="the table from $hint"
  else
    t="<schema.table of pollers/$name>"
    [ ! -f "$name/poller.json" ] || t="<schema.table of $name/poller.json>"
    [ -d "pollers/$name" ] || [ -f "$name/poller.json" ] ||
      hint="no pollers/$name folder or $name/poller.json: add the poller (pollerctl new $name)"
    hint="$hint; give its table"
  fi
  case "$driver" in
    sqlserver) echo "       scripts/sql-grants.sh $identity $t    # $name ($driver): $hint" ;;
    postgres) echo "       scripts/sql-grants.sh $identity $t    # $name ($driver): $hint; use its PostgreSQL section" ;;
    sqlite) echo "       # $name (sqlite): a file, nothing to grant" ;;
    *) echo "       scripts/sql-grants.sh $identity $t    # $name (driver $driver): $hint" ;;
  esac
done <<<"$pollers"
step=2
if [ -n "$vaults" ]; then
  echo "  2. Let the identity read the Key Vault references' secrets: Key Vault Secrets User on each vault:"
  while read -r vault; do
    [ -n "$vault" ] || continue
    cat <<NEXT
       az role assignment create --role "Key Vault Secrets User" \\
         --assignee-object-id "\$(az identity show -g $group -n $identity --query principalId -o tsv)" --assignee-principal-type ServicePrincipal \\
         --scope "\$(az keyvault show -n $vault --query id -o tsv)"
NEXT
  done <<<"$vaults"
  step=3
fi
skip=""
[ -z "$operator_set" ] || skip=" (skip it: operatorPrincipalId in $params grants it at deploy)"
cat <<NEXT
  $step. Let yourself (each operator) run pollerctl against Azure$skip: Storage Blob Data Contributor on
     the $container container only:
       az role assignment create --role "Storage Blob Data Contributor" \\
         --assignee "\$(az ad signed-in-user show --query id -o tsv)" --assignee-principal-type User \\
         --scope "\$(az storage account show -g $group -n $account --query id -o tsv)/blobServices/default/containers/$container"
     then, signed in with az login (role assignments can take a few minutes to apply):
       StateStorage__blobServiceUri=$blob_uri STATE_CONTAINER=$container POLLER_APP_NAME=$app pollerctl status
  $((step + 1)). See the first tick: the status page (health, last tick, lag per poller) at
       https://$app.azurewebsites.net/api/status?code=<key>
     with the key from
       az functionapp function keys list -g $group -n $app --function-name status --query default -o tsv
     or the function app's Log stream, or the queries of docs/operations.md in Application Insights' Logs.
NEXT
