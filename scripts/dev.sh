#!/usr/bin/env bash
# Runs the product locally: Azurite's blob and queue services (installed into node_modules when
# missing), an orders table that keeps being written to (SQLite by default), the custom handler,
# and the timers: fired by `func start` when Azure Functions Core Tools is on PATH, otherwise by
# cmd/devhost, which POSTs the host's timer invocations on each function's schedule. Each step
# says what it does and how long it may take the first time (the first build compiles several
# hundred packages: a few minutes, with a count as it goes); then a line per tick, with the depth
# of the pollers' storage queues. Ctrl-C (or kill PID, or closing its output) stops it all. One
# run per checkout: a second is refused, naming the first one's pid. A local.settings.json
# lacking keys the .example sets (made before a poller was added) is told by devhost, which
# names them.
#
#   scripts/dev.sh            settings from local.settings.json (created from the .example)
#   DEV_DRIVER=postgres scripts/dev.sh
#                             the orders table in a throwaway PostgreSQL started for the run
#                             (wal_level=logical; Debian's postgresql is installed when missing),
#                             and a third poller, orders-changes, reading it by logical decoding
#                             (scripts/dev/postgres/): app name local-postgres-PORT
#   DEV_DRIVER=mysql DEV_MYSQL_DSN='user:password@tcp(127.0.0.1:3306)/shop' scripts/dev.sh
#                             the orders table in a MySQL or MariaDB of yours instead of SQLite
#                             (go-sql-driver/mysql's DSN; the database must exist, the table is
#                             created when missing): both example pollers read it, under the app
#                             name local-mysql so that their checkpoints are not SQLite's
#   DEV_DRIVER=mysql scripts/dev.sh
#                             the same in a throwaway MariaDB started for the run (Debian's
#                             mariadb-server is installed when missing), on a free port, under the
#                             app name local-mariadb-PORT (a new server each run, so new checkpoints)
#   DEV_BLOB_PORT=20000 DEV_QUEUE_PORT=20001 scripts/dev.sh
#                             Azurite on other ports than 10000 and 10001 (UseDevelopmentStorage=true's)
#   OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 scripts/dev.sh
#                             the handler's traces and metrics to an OTLP/HTTP receiver of yours (a
#                             Jaeger, a Collector): docs/telemetry.md. The handler inherits every
#                             OTEL_ variable set here.
set -euo pipefail
# shellcheck source=scripts/lib/services.sh
source "$(dirname "$0")/lib/services.sh"
cd "$ROOT"
export GOFLAGS=${GOFLAGS:--buildvcs=false}
need go "install Go 1.26 or newer"
mkdir -p .dev
began=$SECONDS
step_no=0
step_began=$SECONDS
steps=4
# step TEXT: a numbered step, with the time the previous one took.
step() {
  local took=$((SECONDS - step_began))
  ((step_no == 0 || took < 2)) || log "  (took ${took}s)"
  step_no=$((step_no + 1)) step_began=$SECONDS
  log "[$step_no/$steps] $*"
}

# One run per checkout: a second would write over the first one's .dev/handler.log, Azurite data
# and SQLite table. The lock holds the pid of the run that owns .dev; a lock whose process is gone
# (a run killed with SIGKILL) is taken over.
lock=.dev/dev.pid
take_lock() {
  (set -o noclobber && echo "$$" >"$lock") 2>/dev/null
}
if ! take_lock; then
  other=$(cat "$lock" 2>/dev/null || true)
  if [[ $other =~ ^[0-9]+$ ]] && [ "$other" != $$ ] && _alive "$other" && tr '\0' ' ' <"/proc/$other/cmdline" 2>/dev/null | grep -q 'dev\.sh'; then
    die "scripts/dev.sh is already running in this checkout (pid $other; its handler's log is .dev/handler.log): stop it first (Ctrl-C in its terminal, or kill $other), or run the second copy from another clone"
  fi
  log "taking over $lock: the run that held it (pid ${other:-unknown}) is gone"
  rm -f "$lock"
  take_lock || die "another scripts/dev.sh took $lock just now (pid $(cat "$lock" 2>/dev/null)): stop it first"
fi
# Released last, once everything this run started is stopped.
release_lock() { [ "$(cat "$ROOT/$lock" 2>/dev/null)" != $$ ] || rm -f "$ROOT/$lock"; }
_stops+=(release_lock)

if [ ! -f local.settings.json ]; then
  cp local.settings.json.example local.settings.json
  log "created local.settings.json from local.settings.json.example"
fi

# DEV_DRIVER picks the example's database: SQLite (the default, nothing to install), a
# throwaway PostgreSQL, or a MySQL or MariaDB. The environment wins over local.settings.json, in
# devhost as in Core Tools, so local.settings.json stays as it is.
app_root=.
pollerctl_env=""
case "${DEV_DRIVER:-sqlite}" in
  sqlite)
    step "the orders table: SQLite, .dev/orders.db (nothing to install; devhost creates it)"
    ;;
  postgres)
    step "the orders table: a throwaway PostgreSQL with wal_level=logical, on a free port (a few seconds; Debian's postgresql is installed when missing) ..."
    start_postgres
    pg_port=${PG_TEST_DSN##*:}
    pg_port=${pg_port%%/*}
    export POLLER_APP_NAME=${DEV_POLLER_APP_NAME:-local-postgres-$pg_port}
    for p in ORDERS ORDERS_QUEUE ORDERS_CHANGES; do
      export "${p}_DB_DRIVER=postgres" "${p}_DB_CONNECTION=$PG_TEST_DSN"
    done
    export ORDERS_CHANGES_SCHEDULE=${ORDERS_CHANGES_SCHEDULE:-*/5 * * * * *}
    # The app root: the top-level function folders and scripts/dev/postgres/orders-changes (a
    # logical poller, only for this mode), read by devhost and the handler.
    app_root=.dev/app-postgres
    rm -rf "$app_root" && mkdir -p "$app_root"
    for f in host.json */function.json; do
      f=${f%/function.json}
      ln -s "../../$f" "$app_root/$f"
    done
    ln -s ../../scripts/dev/postgres/orders-changes "$app_root/orders-changes"
    pollerctl_env="AzureWebJobsScriptRoot=$app_root POLLER_APP_NAME=$POLLER_APP_NAME"
    for p in ORDERS ORDERS_QUEUE ORDERS_CHANGES; do
      pollerctl_env+=" ${p}_DB_DRIVER=postgres ${p}_DB_CONNECTION='$PG_TEST_DSN'"
    done
    log "app $POLLER_APP_NAME: orders, orders-queue and orders-changes (logical decoding) read orders in $PG_TEST_DSN"
    ;;
  mysql)
    if [ -z "${DEV_MYSQL_DSN:-}" ]; then
      step "the orders table: DEV_DRIVER=mysql without DEV_MYSQL_DSN: a throwaway MariaDB for this run (gone when it stops; ~10 s, Debian's mariadb-server installed when missing) ..."
      start_mariadb
      DEV_MYSQL_DSN=$MYSQL_TEST_DSN
      DEV_POLLER_APP_NAME=${DEV_POLLER_APP_NAME:-local-mariadb-${MYSQL_TEST_DSN##*:}}
      DEV_POLLER_APP_NAME=${DEV_POLLER_APP_NAME%%)*}
    else
      step "the orders table: in the MySQL or MariaDB of DEV_MYSQL_DSN"
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
    pollerctl_env="POLLER_APP_NAME=$POLLER_APP_NAME ORDERS_DB_DRIVER=mysql ORDERS_DB_CONNECTION=$dsn_shown ORDERS_QUEUE_DB_DRIVER=mysql ORDERS_QUEUE_DB_CONNECTION=$dsn_shown"
    ;;
  *) die "DEV_DRIVER=$DEV_DRIVER: use sqlite (the default), postgres or mysql" ;;
esac

# Azurite's blob service (the checkpoints) and queue service (the storage queue sinks), persisted
# under .dev/azurite so both survive restarts. Ports 10000 and 10001 are what
# UseDevelopmentStorage=true means; when one is taken by something else, that service goes on a
# free port and the connection settings point there (the environment wins over
# local.settings.json, in devhost as in Core Tools).
if [ -x node_modules/.bin/azurite-blob ]; then
  step "Azurite, the local Azure Storage (blob: checkpoints; queue: the queue sinks): starting it (~2 s) ..."
else
  step "Azurite, the local Azure Storage (blob: checkpoints; queue: the queue sinks): installing it into node_modules with npm ci (about a minute, once), then starting it ..."
fi
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
  # In a session of its own (setsid), so that Ctrl-C reaches the timers and the handler only:
  # Azurite is stopped by the exit trap once they are gone (stop_services stops the newest
  # first). Stopped together, the handler's last batch could land on Azurite's queue after it
  # saved its data to .dev/azurite, and be lost on the next start while its checkpoint was kept.
  local detach=()
  command -v setsid >/dev/null 2>&1 && detach=(setsid)
  "${detach[@]}" "node_modules/.bin/azurite-$service" "--${service}Host" 127.0.0.1 "--${service}Port" "$port" --location .dev/azurite \
    --silent --skipApiVersionCheck --disableTelemetry >".dev/azurite-$service.log" 2>&1 &
  pid=$!
  local name=Blob
  [ "$service" = queue ] && name=Queue
  wait_port "$port" "$pid" "Azurite $service" ".dev/azurite-$service.log" "Azurite $name service successfully listens on http://127.0.0.1:$port" ||
    die "Azurite's $service service would not start"
  _pids+=("$pid")
  log "Azurite $service service on 127.0.0.1:$port (pid $pid, data in .dev/azurite)"
  printf -v "port_$service" %s "$port"
}
port_blob="" port_queue=""
azurite blob "${DEV_BLOB_PORT:-10000}" "/devstoreaccount1?comp=list"
azurite queue "${DEV_QUEUE_PORT:-10001}" "/devstoreaccount1?comp=list"
if [ "$port_blob" != 10000 ] || [ "$port_queue" != 10001 ]; then
  cs="DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;BlobEndpoint=http://127.0.0.1:$port_blob/devstoreaccount1;QueueEndpoint=http://127.0.0.1:$port_queue/devstoreaccount1;"
  export StateStorage="$cs" AzureWebJobsStorage="$cs" ChangesQueue="$cs"
  log "StateStorage, AzureWebJobsStorage and ChangesQueue point at blob port $port_blob and queue port $port_queue (set in the environment, which wins over local.settings.json)"
  pollerctl_env+="${pollerctl_env:+ }StateStorage='$cs'"
fi

# One go build for the three binaries, with the same flags (scripts/build.sh's): what they share
# is compiled once.
step "building bin/handler, bin/devhost and bin/pollerctl (the first time: a few minutes, several hundred packages; then seconds) ..."
BUILD_PROGRESS=1 run_child scripts/build.sh ./cmd/devhost ./cmd/pollerctl >&2 || die "the build failed (its errors are above)"

# The orders table, then its set-up checked as an operator checks a table before pointing a
# poller at it: the example application stamps updated_at itself, which misses a write that
# forgets to, so the first run adds what pollerctl check asks for (triggers that stamp every
# INSERT and UPDATE) and prints the SQL it ran. Later runs find it set up and print nothing.
bin/devhost -root "$app_root" -create-orders >&2
if ! AzureWebJobsScriptRoot=$app_root bin/pollerctl check orders >.dev/check.txt 2>&1; then
  log "pollerctl check orders found the orders table's set-up lacking; fixing it with pollerctl check orders --fix --yes:"
  AzureWebJobsScriptRoot=$app_root bin/pollerctl check orders --fix --yes >&2 \
    || die "pollerctl check orders --fix --yes failed (its report is above)"
fi

if [ "${DEV_DRIVER:-sqlite}" = postgres ]; then
  # The slot and publication of the logical poller, made as an operator makes them: its report
  # and the SQL it runs are printed.
  log "pollerctl cdc enable orders-changes --yes (the replication slot and publication the logical poller reads):"
  AzureWebJobsScriptRoot=$app_root bin/pollerctl cdc enable orders-changes --yes >&2 \
    || die "pollerctl cdc enable orders-changes failed (its report is above)"
fi

if [ -n "${OTEL_EXPORTER_OTLP_ENDPOINT:-}" ]; then
  log "OpenTelemetry: the handler sends its traces and metrics to $OTEL_EXPORTER_OTLP_ENDPOINT (OTEL_EXPORTER_OTLP_ENDPOINT; its start-up line says what it exports)"
fi
if [ -n "$pollerctl_env" ]; then
  # The settings this run changed, in a file (the Azurite connection string holds its key, which
  # stays out of the output).
  (umask 077 && printf 'export %s\n' "$pollerctl_env" >.dev/pollerctl.env)
  log "pollerctl for this run, from another shell in this folder: (. .dev/pollerctl.env && bin/pollerctl status)"
else
  log "pollerctl for this run, from another shell in this folder: bin/pollerctl status"
fi
if command -v func >/dev/null 2>&1; then
  step "Azure Functions Core Tools found: func start fires the timers; devhost writes orders (started in $((SECONDS - began))s)"
  start_child bin/devhost -root "$app_root" -writer-only
  if [ "$app_root" = . ]; then
    run_child func start
  else
    run_child func start --script-root "$app_root"
  fi
else
  step "starting the handler; devhost fires the timers (func, Azure Functions Core Tools, is not on PATH). Ready in $((SECONDS - began))s; the first tick within 5 s:"
  run_child bin/devhost -root "$app_root" -write-orders
fi
