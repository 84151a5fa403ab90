#!/usr/bin/env bash
# Runs the product locally: Azurite's blob and queue services (installed into node_modules when
# missing), an SQLite orders table that keeps being written to, the custom handler, and the
# timers: fired by `func start` when Azure Functions Core Tools is on PATH, otherwise by
# cmd/devhost, which POSTs the host's timer invocations on each function's schedule. Progress
# prints as it goes, with the depth of orders-queue's storage queue; Ctrl-C stops it all. A
# local.settings.json lacking keys the .example sets (made before a poller was added) is told
# by devhost, which names them.
#
#   scripts/dev.sh            settings from local.settings.json (created from the .example)
#   DEV_DRIVER=mysql DEV_MYSQL_DSN='user:password@tcp(127.0.0.1:3306)/shop' scripts/dev.sh
#                             the orders table in a MySQL or MariaDB of yours instead of SQLite
#                             (go-sql-driver/mysql's DSN; the database must exist, the table is
#                             created when missing): both example pollers read it, under the app
#                             name local-mysql so that their checkpoints are not SQLite's
#   DEV_DRIVER=mysql scripts/dev.sh
#                             the same in a throwaway MariaDB started for the run (Debian's
#                             mariadb-server is installed when missing), on a free port, under the
#                             app name local-mariadb-PORT (a new server each run, so new checkpoints)
set -euo pipefail
# shellcheck source=scripts/lib/services.sh
source "$(dirname "$0")/lib/services.sh"
cd "$ROOT"
export GOFLAGS=${GOFLAGS:--buildvcs=false}
need go "install Go 1.26 or newer"
mkdir -p .dev

if [ ! -f local.settings.json ]; then
  cp local.settings.json.example local.settings.json
  log "created local.settings.json from local.settings.json.example"
fi

# DEV_DRIVER picks the example's database: SQLite (the default, nothing to install) or a MySQL or
# MariaDB the developer runs. The environment wins over local.settings.json, in devhost as in
# Core Tools, so local.settings.json stays as it is.
case "${DEV_DRIVER:-sqlite}" in
  sqlite) ;;
  mysql)
    if [ -z "${DEV_MYSQL_DSN:-}" ]; then
      log "DEV_DRIVER=mysql without DEV_MYSQL_DSN: starting a throwaway MariaDB for this run (gone when it stops) ..."
      start_mariadb
      DEV_MYSQL_DSN=$MYSQL_TEST_DSN
      DEV_POLLER_APP_NAME=${DEV_POLLER_APP_NAME:-local-mariadb-${MYSQL_TEST_DSN##*:}}
      DEV_POLLER_APP_NAME=${DEV_POLLER_APP_NAME%%)*}
    fi
    case "$DEV_MYSQL_DSN" in *@tcp\(*\)/* | *@unix\(*\)/*) ;; *)
      die "DEV_MYSQL_DSN is not go-sql-driver/mysql's form user:password@tcp(host:3306)/database" ;;
    esac
    export ORDERS_DB_DRIVER=mysql ORDERS_DB_CONNECTION="$DEV_MYSQL_DSN"
    export ORDERS_QUEUE_DB_DRIVER=mysql ORDERS_QUEUE_DB_CONNECTION="$DEV_MYSQL_DSN"
    export POLLER_APP_NAME=${DEV_POLLER_APP_NAME:-local-mysql}
    # The password stays out of the log: user:REDACTED@tcp(...).
    log "the orders table is in MySQL: $(printf '%s' "$DEV_MYSQL_DSN" | sed -E 's/^([^:]*):.*@(tcp|unix)\(/\1:REDACTED@\2(/'), app $POLLER_APP_NAME"
    # pollerctl reads local.settings.json (SQLite, app local): the same overrides point it here.
    dsn_shown="'$DEV_MYSQL_DSN'"
    [ -n "${MYSQL_TEST_DSN:-}" ] && [ "$DEV_MYSQL_DSN" = "$MYSQL_TEST_DSN" ] || dsn_shown='"$DEV_MYSQL_DSN"'
    log "pollerctl for this run (another shell): POLLER_APP_NAME=$POLLER_APP_NAME ORDERS_DB_DRIVER=mysql ORDERS_DB_CONNECTION=$dsn_shown ORDERS_QUEUE_DB_DRIVER=mysql ORDERS_QUEUE_DB_CONNECTION=$dsn_shown go run ./cmd/pollerctl status"
    ;;
  *) die "DEV_DRIVER=$DEV_DRIVER: use sqlite (the default) or mysql" ;;
esac

# Azurite's blob service (the checkpoints) and queue service (orders-queue's sink), persisted
# under .dev/azurite so both survive restarts. Ports 10000 and 10001 are what
# UseDevelopmentStorage=true means; when one is taken by something else, that service goes on a
# free port and the connection settings point there (the environment wins over
# local.settings.json, in devhost as in Core Tools).
install_azurite
mkdir -p .dev/azurite

# azurite SERVICE DEFAULT_PORT PROBE_PATH starts Azurite's SERVICE on DEFAULT_PORT, or uses the
# Azurite already answering there, or starts it on a free port when something else holds it;
# sets port_SERVICE to the port in use.
azurite() {
  local service=$1 port=$2 probe=$3 pid
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    if curl -s -m 2 "http://127.0.0.1:$port$probe" 2>/dev/null | grep -q "EnumerationResults\|AuthorizationFailure\|AuthenticationFailed"; then
      log "using the Azurite $service service already listening on 127.0.0.1:$port"
      printf -v "port_$service" %s "$port"
      return 0
    fi
    local taken=$port
    port=$(free_port)
    log "127.0.0.1:$taken is taken by something else: Azurite's $service service goes on 127.0.0.1:$port"
  fi
  # In a session of its own (setsid), so that Ctrl-C (or timeout's signal to the process group)
  # reaches the timers and the handler only: Azurite is stopped by the exit trap once they are
  # gone. Stopped together, the handler's last batch could land on Azurite's queue after it saved
  # its data to .dev/azurite, and be lost on the next start while its checkpoint was kept.
  local detach=()
  command -v setsid >/dev/null 2>&1 && detach=(setsid)
  "${detach[@]}" "node_modules/.bin/azurite-$service" "--${service}Host" 127.0.0.1 "--${service}Port" "$port" --location .dev/azurite \
    --silent --skipApiVersionCheck --disableTelemetry >".dev/azurite-$service.log" 2>&1 &
  pid=$!
  wait_port "$port" "$pid" "Azurite $service" ".dev/azurite-$service.log" || die "Azurite's $service service would not start"
  _pids+=("$pid")
  log "Azurite $service service on 127.0.0.1:$port (data in .dev/azurite)"
  printf -v "port_$service" %s "$port"
}
port_blob="" port_queue=""
azurite blob 10000 "/devstoreaccount1?comp=list"
azurite queue 10001 "/devstoreaccount1?comp=list"
if [ "$port_blob" != 10000 ] || [ "$port_queue" != 10001 ]; then
  cs="DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;BlobEndpoint=http://127.0.0.1:$port_blob/devstoreaccount1;QueueEndpoint=http://127.0.0.1:$port_queue/devstoreaccount1;"
  export StateStorage="$cs" AzureWebJobsStorage="$cs" ChangesQueue="$cs"
  log "StateStorage, AzureWebJobsStorage and ChangesQueue point at blob port $port_blob and queue port $port_queue (set in the environment, which wins over local.settings.json)"
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
