# shellcheck shell=bash
# Shared by scripts/*.sh: install and start the local servers on free 127.0.0.1 ports, and stop
# them again on exit, also on failure or Ctrl-C. Source it, then call the start_* functions.

# -h or --help as the script's first argument prints the script's header comment (what it does and
# how to call it) and exits, before anything is installed or started.
case "${1:-}" in
-h | --help)
  awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"
  exit 0
  ;;
esac

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
RUN_DIR=${RUN_DIR:-$ROOT/.test}
mkdir -p "$RUN_DIR"

_pids=()
_groups=()
_stops=()
# stop_services stops what the script started, newest first: the process groups run_child made
# (SIGTERM to the whole group, so that the children of a go test or a devhost go too; up to 30 s
# for them to finish their work, then SIGKILL), then the servers in _pids in reverse order (the
# timers and the handler are gone before Azurite, which keeps their last writes), then the _stops.
# A signal that comes meanwhile no longer ends the script (its trap would exit from the middle of
# this, leaving servers running: timeout(1) sends SIGTERM to the script and to its process group,
# Ctrl-C may be pressed twice), and a step that fails does not stop the others.
stop_services() {
  local pid cmd i
  trap : INT TERM HUP
  trap '' PIPE
  set +e
  for ((i = ${#_groups[@]} - 1; i >= 0; i--)); do
    _stop_group "${_groups[i]}"
  done
  for ((i = ${#_pids[@]} - 1; i >= 0; i--)); do
    _stop_pid "${_pids[i]}"
  done
  for cmd in "${_stops[@]}"; do
    eval "$cmd" >/dev/null 2>&1 || true
  done
  _groups=()
  _pids=()
  _stops=()
}
# A signal ends the script at once, also while a child runs (run_child waits in the background,
# and bash runs a trap during wait, not during a foreground child): INT from Ctrl-C, TERM from
# kill PID, HUP when the terminal goes, PIPE when the output's reader has gone (| head).
trap 'stop_services' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
trap 'exit 141' PIPE

# start_child CMD [ARG...] starts CMD in the background in a process group of its own (setsid),
# which stop_services stops (SIGTERM to the group, so that what CMD started goes too), and sets
# CHILD_PID.
start_child() {
  local detach=()
  command -v setsid >/dev/null 2>&1 && detach=(setsid)
  "${detach[@]}" "$@" &
  CHILD_PID=$!
  _groups+=("$CHILD_PID")
}

# run_child CMD [ARG...] runs CMD as start_child does and waits for it, returning its exit status.
# Unlike a foreground command, it lets the traps above run as soon as a signal comes (bash runs a
# trap during wait, but only after a foreground child exits); stop_services then stops CMD and
# everything it started.
run_child() {
  local pid rc=0 g keep=()
  start_child "$@"
  pid=$CHILD_PID
  wait "$pid" || rc=$?
  # A trapped signal ends the wait early (the EXIT trap stops the group); otherwise the child is
  # done and leaves the list.
  if ! _alive "$pid"; then
    for g in "${_groups[@]}"; do [ "$g" = "$pid" ] || keep+=("$g"); done
    _groups=("${keep[@]}")
  fi
  return "$rc"
}

# _stop_group PID sends SIGTERM to the process group PID leads, waits up to 30 s for its leader
# to exit, then sends SIGKILL to what is left of the group.
_stop_group() {
  local pid=$1 i
  [ -n "$pid" ] || return 0
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 300; i++)); do
    _alive "$pid" || break
    sleep 0.1
  done
  kill -KILL -- "-$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

# _stop_pid PID sends SIGTERM to a server, waits up to 10 s for it to exit, then sends SIGKILL.
# A server started inside $(...) (start_azurite_service) is not this shell's child, so wait
# returns at once: the poll is what knows it is gone (an Azurite queue service busy with a
# backlog outlived a bare kill and went on using a core).
_stop_pid() {
  local pid=$1 i
  kill "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 100; i++)); do
    _alive "$pid" || break
    sleep 0.1
  done
  _alive "$pid" && kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null || true
}

# _alive PID: the process runs (an exited child not yet waited for is a zombie, which kill -0
# still finds).
_alive() {
  local st
  st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
  [ -n "$st" ] && [[ $st != Z* ]]
}

log() { printf '%s %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# free_port prints a port that is free on 127.0.0.1 right now.
free_port() {
  node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

# wait_port PORT PID NAME LOG [SAYS] waits up to 30 s for PORT to accept connections while PID
# lives and, with SAYS, for LOG to hold that line too: the proof that PID, not another process,
# listens there (a port free_port found may be taken by another test's listener before the
# service binds it; the service then exits, but the port accepts connections all the same).
wait_port() {
  local port=$1 pid=$2 name=$3 logfile=$4 says=${5:-} i
  for ((i = 0; i < 300; i++)); do
    if ! _alive "$pid"; then
      log "$name exited during start-up; its log ($logfile):"
      tail -20 "$logfile" >&2
      return 1
    fi
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && { [ -z "$says" ] || grep -qF "$says" "$logfile"; }; then
      return 0
    fi
    sleep 0.1
  done
  log "$name did not listen on 127.0.0.1:$port within 30 s; its log ($logfile):"
  tail -20 "$logfile" >&2
  return 1
}

need() {
  command -v "$1" >/dev/null 2>&1 || die "$1 is not installed: $2"
}

# install_azurite installs the tools pinned in package.json (Azurite, the Bicep syntax checker, the
# Kusto language service scripts/check-kql.mjs runs, the Standard Webhooks library the webhook
# signing tests verify with) into node_modules when any is missing.
install_azurite() {
  need node "install Node.js 20 (Azurite 3.35 needs Node >= 18)"
  need npm "install npm (it comes with Node.js)"
  if [ ! -x "$ROOT/node_modules/.bin/azurite-blob" ] || [ ! -f "$ROOT/node_modules/tree-sitter-bicep/tree-sitter-bicep.wasm" ] \
    || [ ! -d "$ROOT/node_modules/web-tree-sitter" ] || [ ! -f "$ROOT/node_modules/@kusto/language-service-next/Kusto.Language.Bridge.min.js" ] \
    || [ ! -f "$ROOT/node_modules/standardwebhooks/package.json" ]; then
    log "installing the tools pinned in package.json (Azurite, tree-sitter-bicep, the Kusto language service, standardwebhooks) into node_modules ..."
    (cd "$ROOT" && npm ci --no-fund --no-audit --loglevel=error >&2) || die "npm ci failed"
  fi
}

# start_azurite starts Azurite's blob and queue services on free ports and exports
# AZURITE_CONNECTION_STRING (with BlobEndpoint and QueueEndpoint), AZURITE_BLOB_PORT and
# AZURITE_QUEUE_PORT.
start_azurite() {
  install_azurite
  local blob queue
  blob=$(start_azurite_service blob) || exit 1
  queue=$(start_azurite_service queue) || exit 1
  export AZURITE_BLOB_PORT=${blob% *} AZURITE_QUEUE_PORT=${queue% *}
  export AZURITE_PID="${blob#* } ${queue#* }"
  _pids+=(${blob#* } ${queue#* })
  export AZURITE_CONNECTION_STRING="DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;BlobEndpoint=http://127.0.0.1:$AZURITE_BLOB_PORT/devstoreaccount1;QueueEndpoint=http://127.0.0.1:$AZURITE_QUEUE_PORT/devstoreaccount1;"
}

# start_azurite_service SERVICE starts Azurite's blob or queue service on a free port and prints
# "PORT PID": in memory, without its garbage collection, which froze it for minutes in a long run
# (scripts/lib/azurite.js says why).
start_azurite_service() {
  local service=$1 attempt port pid logfile="$RUN_DIR/azurite-$1.log"
  for attempt in 1 2 3; do
    port=$(free_port)
    node "$ROOT/scripts/lib/azurite.js" "$service" "--${service}Host" 127.0.0.1 "--${service}Port" "$port" \
      --inMemoryPersistence --silent --skipApiVersionCheck --disableTelemetry >"$logfile" 2>&1 &
    pid=$!
    local name=Blob
    [ "$service" = queue ] && name=Queue
    if wait_port "$port" "$pid" "Azurite $service" "$logfile" "Azurite $name service successfully listens on http://127.0.0.1:$port"; then
      log "Azurite $service service on 127.0.0.1:$port (pid $pid)"
      echo "$port $pid"
      return 0
    fi
    kill "$pid" 2>/dev/null || true
    log "Azurite $service start attempt $attempt failed; retrying on another port"
  done
  die "Azurite's $service service would not start"
}

# stop_azurite stops the Azurite services that start_azurite started last.
stop_azurite() {
  local pids=${AZURITE_PID:-} p pid keep=()
  [ -n "$pids" ] || return 0
  for pid in $pids; do
    _stop_pid "$pid"
  done
  for p in "${_pids[@]}"; do
    case " $pids " in *" $p "*) ;; *) keep+=("$p") ;; esac
  done
  _pids=("${keep[@]}")
  unset AZURITE_PID
}

# install_postgres finds PostgreSQL's server binaries (PG_BIN), installing Debian's postgresql
# package when there are none.
install_postgres() {
  PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  if [ -z "$PG_BIN" ] || [ ! -x "$PG_BIN/initdb" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      log "installing PostgreSQL from Debian packages ..."
      apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2 \
        || die "apt-get install postgresql failed"
      PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
    fi
    [ -n "$PG_BIN" ] && [ -x "$PG_BIN/initdb" ] || die "PostgreSQL server binaries not found: install PostgreSQL 15+ (Debian: apt-get install postgresql)"
  fi
}

# start_postgres initialises a throwaway cluster (wal_level=logical, for the logical cursor) in a directory of its own under the system's
# temporary directory, starts it on a free port and exports PG_TEST_DSN. Not under $RUN_DIR: run
# as root, the server runs as the postgres user, which cannot enter a checkout in a mode-700
# directory such as root's home. The directory is removed again when the services stop.
start_postgres() {
  install_postgres
  local d port as=()
  d=$(mktemp -d "${TMPDIR:-/tmp}/pseudotrigger-pg.XXXXXX") || die "cannot make a directory for PostgreSQL"
  chmod 755 "$d"
  if [ "$(id -u)" = 0 ]; then
    chown postgres "$d"
    as=(runuser -u postgres --)
    # The server's user must reach the directory through every parent.
    if ! runuser -u postgres -- test -x "$d"; then
      rm -rf "$d"
      die "the postgres user cannot reach $d: set TMPDIR to a directory it can enter"
    fi
  fi
  _stops+=("rm -rf $d")
  # Run from the cluster's directory: the postgres user may not be able to enter ours.
  (cd "$d" && "${as[@]}" "$PG_BIN/initdb" -D "$d/data" -U postgres --auth=trust -E UTF8 --no-sync) >"$d/initdb.log" 2>&1 \
    || { tail -20 "$d/initdb.log" >&2; die "initdb failed"; }
  port=$(free_port)
  (cd "$d" && "${as[@]}" "$PG_BIN/pg_ctl" -D "$d/data" -w -t 60 -l "$d/server.log" \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $d -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 -c wal_level=logical -c max_replication_slots=64 -c max_wal_senders=16" \
    start) >/dev/null || { tail -20 "$d/server.log" >&2; die "PostgreSQL would not start"; }
  # Stopped before the directory is removed: _stops run in order, so put the stop first.
  _stops=("(cd $d && ${as[*]} $PG_BIN/pg_ctl -D $d/data -m immediate stop)" "${_stops[@]}")
  export PG_TEST_DSN="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
  export PG_DIR=$d
  log "PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}') on 127.0.0.1:$port (cluster in $d)"
}

# install_mariadb makes sure MariaDB's server is there (Debian's mariadb-server when missing).
install_mariadb() {
  if ! command -v mariadbd >/dev/null 2>&1 && [ ! -x /usr/sbin/mariadbd ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      log "installing MariaDB from Debian packages ..."
      apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server >&2 \
        || die "apt-get install mariadb-server failed"
    fi
    command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] \
      || die "MariaDB's server not found: install MariaDB 10.11+ (Debian: apt-get install mariadb-server)"
  fi
}

# start_mariadb initialises a throwaway MariaDB in a directory of its own under the system's
# temporary directory (as start_postgres does, for the same reason: run as root, the server runs
# as the mysql user), starts it on a free 127.0.0.1 port with its socket there, creates the
# database pseudotrigger and exports MYSQL_TEST_DSN (go-sql-driver/mysql's form), MYSQL_DIR and
# MYSQL_PID (the server's, or its runuser's when run as root: either ends when the server does).
start_mariadb() {
  install_mariadb
  local d port as=() user=root mariadbd=/usr/sbin/mariadbd
  command -v mariadbd >/dev/null 2>&1 && mariadbd=$(command -v mariadbd)
  d=$(mktemp -d "${TMPDIR:-/tmp}/pseudotrigger-mariadb.XXXXXX") || die "cannot make a directory for MariaDB"
  chmod 755 "$d"
  if [ "$(id -u)" = 0 ]; then
    chown mysql "$d"
    as=(runuser -u mysql --)
    user=mysql
    runuser -u mysql -- test -x "$d" || { rm -rf "$d"; die "the mysql user cannot reach $d: set TMPDIR to a directory it can enter"; }
  fi
  _stops+=("rm -rf $d")
  (cd "$d" && "${as[@]}" mariadb-install-db --no-defaults --datadir="$d/data" --auth-root-authentication-method=normal \
    --skip-test-db >"$d/install.log" 2>&1) || { tail -20 "$d/install.log" >&2; die "mariadb-install-db failed"; }
  port=$(free_port)
  (cd "$d" && exec "${as[@]}" "$mariadbd" --no-defaults --datadir="$d/data" --socket="$d/mysqld.sock" --pid-file="$d/mysqld.pid" \
    --bind-address=127.0.0.1 --port="$port" --user="$user" --innodb-flush-log-at-trx-commit=2 --skip-log-bin \
    --character-set-server=utf8mb4 --collation-server=utf8mb4_bin --max-connections=300 >"$d/server.log" 2>&1) &
  local pid=$!
  # Stopped before its directory is removed (_stops run in order). $pid is runuser when run as
  # root, whose child mariadbd would outlive it: the server is stopped by its own pid file.
  _stops=("_stop_mariadb $d $pid" "${_stops[@]}")
  wait_port "$port" "$pid" MariaDB "$d/server.log" "port: $port "
  mariadb --no-defaults -h 127.0.0.1 -P "$port" -u root -e "CREATE DATABASE IF NOT EXISTS pseudotrigger CHARACTER SET utf8mb4" \
    || die "MariaDB: cannot create the database pseudotrigger"
  export MYSQL_TEST_DSN="root@tcp(127.0.0.1:$port)/pseudotrigger"
  export MYSQL_DIR=$d MYSQL_PID=$pid
  log "MariaDB $("$mariadbd" --version | awk '{print $3}') on 127.0.0.1:$port (data in $d)"
}

# _stop_mariadb DIR PID stops the MariaDB start_mariadb started in DIR (PID: its runuser, or the
# server itself): SIGTERM to the server's own pid (from its pid file) and to PID, up to 10 s for
# a clean shutdown, then SIGKILL.
_stop_mariadb() {
  local d=$1 pid=$2 server i
  server=$(cat "$d/mysqld.pid" 2>/dev/null || true)
  [ -n "$server" ] && kill "$server" 2>/dev/null
  kill "$pid" 2>/dev/null
  for i in $(seq 100); do
    { [ -z "$server" ] || ! kill -0 "$server" 2>/dev/null; } && ! kill -0 "$pid" 2>/dev/null && break
    sleep 0.1
  done
  [ -n "$server" ] && kill -9 "$server" 2>/dev/null
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null || true
}

# install_package COMMAND PACKAGE WHY makes sure COMMAND is there, installing Debian's PACKAGE when
# it is missing (as root, with apt-get); WHY says what needs it.
install_package() {
  command -v "$1" >/dev/null 2>&1 && return
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing $2 from Debian packages ($3) ..."
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >&2 \
      || die "apt-get install $2 failed"
  fi
  command -v "$1" >/dev/null 2>&1 || die "$1 is not installed (Debian: apt-get install $2)"
}

# install_spin makes sure the spin model checker (and gcc, which compiles its verifiers) is there.
install_spin() {
  need gcc "install gcc (Debian: apt-get install gcc): spin's verifiers are C programs"
  install_package spin spin "the model checker of the lease protocol"
}

# install_valgrind makes sure valgrind is there: bench.sh instructions counts with its callgrind,
# and a scripts test runs that section.
install_valgrind() { install_package valgrind valgrind "bench.sh instructions counts with its callgrind"; }

# install_chromium makes sure headless Chromium is there for the status page's browser test,
# installing Debian's chromium package when it is missing, and exports CHROMIUM.
install_chromium() {
  CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)}
  if [ -z "$CHROMIUM" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      log "installing Chromium from Debian packages (the status page's browser test) ..."
      apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >&2 \
        || die "apt-get install chromium failed"
      CHROMIUM=$(command -v chromium || true)
    fi
    [ -n "$CHROMIUM" ] || die "Chromium is not installed (Debian: apt-get install chromium; or set CHROMIUM to a Chromium or Chrome binary)"
  fi
  export CHROMIUM
}
