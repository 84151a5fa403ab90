#!/usr/bin/env bash
# Runs the product locally: Azurite's blob and queue services (installed into node_modules when
# missing), an orders table that keeps being written to (SQLite by default), the custom handler,
# and the timers: fired by `func start` when Azure Functions Core Tools is on PATH, otherwise by
# cmd/devhost, which POSTs the host's timer invocations on each function's schedule. Each step
# says what it does and how long it may take the first time (the first build compiles several
# hundred packages: a few minutes, with a count as it goes); then a line per tick, with the depth
# of the pollers' storage queues, and, for a failed tick, its cause first. Ctrl-C (or kill PID,
# or closing its output) stops it all. A service it started that stops meanwhile (Azurite, the
# database, the handler) is named, with its log, and the rest is stopped. One run per checkout:
# a second is refused, naming the first one's pid. A local.settings.json lacking keys the
# .example sets (made before a poller was added) is told by devhost, which names them.
#
# What a run keeps for the next in .dev/: Azurite's data (checkpoints, queues), one folder per
# database (.dev/azurite-sqlite, -postgres, ...: a queue filled by one DEV_DRIVER is not another's),
# the SQLite table, and the PostgreSQL of DEV_DRIVER=postgres.
#
#   scripts/dev.sh            settings from local.settings.json (created from the .example)
#   DEV_DRIVER=postgres scripts/dev.sh
#                             the orders table in a PostgreSQL (wal_level=logical) kept in
#                             .dev/postgres between runs (created on the first; Debian's
#                             postgresql is installed when missing), on the last run's port when
#                             free; every poller of the app reads it (a folder added since the last
#                             run too), and a third one, orders-changes, by logical decoding
#                             (scripts/dev/postgres/): app name local-postgres
#   DEV_DRIVER=postgres DEV_POSTGRES_DSN='postgres://user:password@127.0.0.1:5432/shop' scripts/dev.sh
#                             the same in a PostgreSQL of yours (the database must exist, with
#                             wal_level=logical for orders-changes; the table is created when
#                             missing)
#   DEV_DRIVER=mysql DEV_MYSQL_DSN='user:password@tcp(127.0.0.1:3306)/shop' scripts/dev.sh
#                             the orders table in a MySQL or MariaDB of yours instead of SQLite
#                             (go-sql-driver/mysql's DSN; the database must exist, the table is
#                             created when missing): every poller reads it, under the app name
#                             local-mysql so that their checkpoints are not SQLite's
#   DEV_DRIVER=mysql scripts/dev.sh
#                             the same in a throwaway MariaDB started for the run (Debian's
#                             mariadb-server is installed when missing), on a free port, under the
#                             app name local-mariadb-PORT (a new server each run, so new checkpoints,
#                             kept by an Azurite in memory, gone with it)
#   scripts/dev.sh --clean    removes what runs keep in .dev (the kept PostgreSQL, Azurite's data,
#                             the SQLite table), saying what; refused while dev.sh runs here
#   DEV_BLOB_PORT=20000 DEV_QUEUE_PORT=20001 scripts/dev.sh
#                             Azurite on other ports than 10000 and 10001 (UseDevelopmentStorage=true's)
#   OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 scripts/dev.sh
#                             the handler's traces and metrics to an OTLP/HTTP receiver of yours (a
#                             Jaeger, a Collector): docs/telemetry.md. The handler inherits every
#                             OTEL_ variable set here.
#
# A poller of the app keeps its own database when the environment sets its {P}_DB_CONNECTION.
set -euo pipefail
# shellcheck source=scripts/lib/services.sh
source "$(dirname "$0")/lib/services.sh"
# shellcheck source=scripts/dev/lib.sh
source "$(dirname "$0")/dev/lib.sh"
cd "$ROOT"
clean=""
case "$*" in
  "") ;;
  --clean) clean=1 ;;
  *) die "scripts/dev.sh takes no arguments but --clean or --help (given: $*); DEV_DRIVER and the other settings are variables: scripts/dev.sh --help" ;;
esac
export GOFLAGS=${GOFLAGS:--buildvcs=false}
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
    [ -z "$clean" ] || die "scripts/dev.sh runs in this checkout (pid $other): stop it (Ctrl-C in its terminal, or kill $other) before scripts/dev.sh --clean removes what it uses"
    die "scripts/dev.sh is already running in this checkout (pid $other; its handler's log is .dev/handler.log): stop it first (Ctrl-C in its terminal, or kill $other), or run the second copy from another clone"
  fi
  log "taking over $lock: the run that held it (pid ${other:-unknown}) is gone"
  rm -f "$lock"
  take_lock || die "another scripts/dev.sh took $lock just now (pid $(cat "$lock" 2>/dev/null)): stop it first"
fi
# Released last, once everything this run started is stopped.
release_lock() { [ "$(cat "$ROOT/$lock" 2>/dev/null)" != $$ ] || rm -f "$ROOT/$lock"; }
_stops+=(release_lock)

if [ -n "$clean" ]; then
  dev_clean
  exit 0
fi
need go "install Go 1.26 or newer"

dev_settings_file

# DEV_DRIVER picks the example's database: SQLite (the default, nothing to install), a
# PostgreSQL kept between runs (or yours), or a MySQL or MariaDB. The environment wins over
# local.settings.json, in devhost as in Core Tools, so local.settings.json stays as it is.
# azurite_data is where Azurite keeps its data for that database (none: in memory).
pollerctl_env=""
case "${DEV_DRIVER:-sqlite}" in
  sqlite)
    step "the orders table: SQLite, .dev/orders.db (nothing to install; devhost creates it)"
    dev_app_root sqlite
    azurite_data=.dev/azurite-sqlite
    ;;
  postgres)
    if [ -n "${DEV_POSTGRES_DSN:-}" ]; then
      step "the orders table: in the PostgreSQL of DEV_POSTGRES_DSN (orders-changes needs its wal_level=logical)"
      case "$DEV_POSTGRES_DSN" in postgres://* | postgresql://* | *host=*) ;; *)
        die "DEV_POSTGRES_DSN is neither a URL postgres://user:password@host:5432/database nor key=value pairs with host=" ;;
      esac
      pg_dsn=$DEV_POSTGRES_DSN dsn_shown='"$DEV_POSTGRES_DSN"' db_named="the PostgreSQL of DEV_POSTGRES_DSN"
      azurite_data=.dev/azurite-postgres-dsn
    else
      step "the orders table: a PostgreSQL with wal_level=logical, kept in .dev/postgres between runs (a few seconds; Debian's postgresql is installed when missing) ..."
      start_kept_postgres
      pg_dsn=$dev_pg_dsn dsn_shown="'$dev_pg_dsn'" db_named="the kept PostgreSQL"
      azurite_data=.dev/azurite-postgres
    fi
    export POLLER_APP_NAME=${DEV_POLLER_APP_NAME:-local-postgres}
    # The app root: the top-level function folders and scripts/dev/postgres/orders-changes (a
    # logical poller, only for this mode), read by devhost, the handler and func start.
    dev_app_root postgres
    pollerctl_env="AzureWebJobsScriptRoot=$app_root POLLER_APP_NAME=$POLLER_APP_NAME"
    dev_point_pollers postgres "$pg_dsn" "$dsn_shown"
    log "app $POLLER_APP_NAME; pollers reading $db_named: ${pointed:-none} (orders-changes by logical decoding)"
    ;;
  mysql)
    dev_app_root mysql
    if [ -z "${DEV_MYSQL_DSN:-}" ]; then
      step "the orders table: DEV_DRIVER=mysql without DEV_MYSQL_DSN: a throwaway MariaDB for this run (gone when it stops, and its checkpoints with it; ~10 s, Debian's mariadb-server installed when missing) ..."
      start_mariadb
      addr=${MYSQL_TEST_DSN#*tcp(}
      watch_service "$MYSQL_PID" "MariaDB (${addr%%)*}, this run's)" "$MYSQL_DIR/server.log"
      DEV_MYSQL_DSN=$MYSQL_TEST_DSN
      DEV_POLLER_APP_NAME=${DEV_POLLER_APP_NAME:-local-mariadb-${MYSQL_TEST_DSN##*:}}
      DEV_POLLER_APP_NAME=${DEV_POLLER_APP_NAME%%)*}
      azurite_data="" db_named="this run's MariaDB"
    else
      step "the orders table: in the MySQL or MariaDB of DEV_MYSQL_DSN"
      azurite_data=.dev/azurite-mysql-dsn db_named="the MySQL of DEV_MYSQL_DSN"
    fi
    case "$DEV_MYSQL_DSN" in *@tcp\(*\)/* | *@unix\(*\)/*) ;; *)
      die "DEV_MYSQL_DSN is not go-sql-driver/mysql's form user:password@tcp(host:3306)/database" ;;
    esac
    export POLLER_APP_NAME=${DEV_POLLER_APP_NAME:-local-mysql}
    # pollerctl reads local.settings.json (SQLite, app local): the same overrides point it here.
    dsn_shown="'$DEV_MYSQL_DSN'"
    [ -n "${MYSQL_TEST_DSN:-}" ] && [ "$DEV_MYSQL_DSN" = "$MYSQL_TEST_DSN" ] || dsn_shown='"$DEV_MYSQL_DSN"'
    pollerctl_env="POLLER_APP_NAME=$POLLER_APP_NAME"
    dev_point_pollers mysql "$DEV_MYSQL_DSN" "$dsn_shown"
    log "app $POLLER_APP_NAME; pollers reading $db_named: ${pointed:-none}"
    ;;
  *) die "DEV_DRIVER=$DEV_DRIVER: use sqlite (the default), postgres or mysql" ;;
esac
if [ -d .dev/azurite ]; then
  log "(.dev/azurite, Azurite's data of an older dev.sh that kept every DEV_DRIVER's together, is no longer read: scripts/dev.sh --clean removes it)"
fi

# Azurite's blob service (the checkpoints) and queue service (the storage queue sinks), their
# data kept in $azurite_data, the database's own folder, so that both survive restarts and a
# queue one DEV_DRIVER filled is not another's (a throwaway database's Azurite keeps it in
# memory). Ports 10000 and 10001 are what UseDevelopmentStorage=true means; when one is taken by
# something else, that service goes on a free port and the connection settings point there (the
# environment wins over local.settings.json, in devhost as in Core Tools).
if [ -x node_modules/.bin/azurite-blob ]; then
  step "Azurite, the local Azure Storage (blob: checkpoints; queue: the queue sinks): starting it (~2 s) ..."
else
  step "Azurite, the local Azure Storage (blob: checkpoints; queue: the queue sinks): installing it into node_modules with npm ci (about a minute, once), then starting it ..."
fi
install_azurite
keep=(--inMemoryPersistence) kept="in memory, gone when it stops"
if [ -n "$azurite_data" ]; then
  mkdir -p "$azurite_data"
  keep=(--location "$azurite_data") kept="data in $azurite_data"
fi

# azurite SERVICE DEFAULT_PORT PROBE_PATH starts Azurite's SERVICE on DEFAULT_PORT, or uses the
# Azurite already answering there, or starts it on a free port when something else holds it;
# sets port_SERVICE to the port in use.
azurite() {
  local service=$1 port=$2 probe=$3 pid
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    if curl -s -m 2 "http://127.0.0.1:$port$probe" 2>/dev/null | grep -q "EnumerationResults\|AuthorizationFailure\|AuthenticationFailed"; then
      log "using the Azurite $service service already listening on 127.0.0.1:$port (not this run's: its data is wherever it keeps it, and dev.sh does not watch it)"
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
  # saved its data, and be lost on the next start while its checkpoint was kept.
  local detach=()
  command -v setsid >/dev/null 2>&1 && detach=(setsid)
  "${detach[@]}" "node_modules/.bin/azurite-$service" "--${service}Host" 127.0.0.1 "--${service}Port" "$port" "${keep[@]}" \
    --silent --skipApiVersionCheck --disableTelemetry >".dev/azurite-$service.log" 2>&1 &
  pid=$!
  local name=Blob
  [ "$service" = queue ] && name=Queue
  wait_port "$port" "$pid" "Azurite $service" ".dev/azurite-$service.log" "Azurite $name service successfully listens on http://127.0.0.1:$port" ||
    die "Azurite's $service service would not start"
  _pids+=("$pid")
  watch_service "$pid" "Azurite's $service service (127.0.0.1:$port)" ".dev/azurite-$service.log"
  log "Azurite $service service on 127.0.0.1:$port (pid $pid, $kept)"
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
  watch_service "$CHILD_PID" "devhost's orders writer" ""
  if [ "$app_root" = . ]; then
    run_watched "func start" func start
  else
    run_watched "func start" func start --script-root "$app_root"
  fi
else
  step "starting the handler; devhost fires the timers (func, Azure Functions Core Tools, is not on PATH). Ready in $((SECONDS - began))s; the first tick within 5 s:"
  run_watched devhost bin/devhost -root "$app_root" -write-orders
fi
