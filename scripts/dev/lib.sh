# shellcheck shell=bash
# What scripts/dev.sh alone does, beside scripts/lib/services.sh (source that first): the app
# root each DEV_DRIVER runs from, the pollers pointed at its database, the PostgreSQL kept in
# .dev/postgres between runs, --clean, and the watch on the services it started. Run from the
# checkout's root.

# dev_settings_file creates local.settings.json from local.settings.json.example when it is
# missing: the settings devhost and func start read, the environment winning over them.
dev_settings_file() {
  [ ! -f local.settings.json ] || return 0
  cp local.settings.json.example local.settings.json
  log "created local.settings.json from local.settings.json.example"
}

# dev_pollers ROOT prints the name of each poller of the app in ROOT: each folder whose
# function.json has a timer (the status function has none).
dev_pollers() {
  local f
  for f in "$1"/*/function.json; do
    [ -f "$f" ] && grep -q '"timerTrigger"' "$f" && basename "$(dirname "$f")"
  done
  return 0
}

# dev_app_root MODE sets app_root, the folder the app runs from, under devhost (-root) as under
# func start (--script-root): the checkout itself, or for postgres .dev/app-postgres, made again
# each run, which links what func start reads in a script root (host.json; local.settings.json,
# with FUNCTIONS_WORKER_RUNTIME and AzureWebJobsStorage; bin/, which holds the handler host.json
# names) and the function folders: the checkout's (a poller added since the last run too) and
# scripts/dev/postgres/orders-changes, whose schedule it exports.
dev_app_root() {
  app_root=.
  [ "$1" = postgres ] || return 0
  app_root=.dev/app-postgres
  [ ! -e orders-changes ] || die "orders-changes/ at the top of the checkout has the name of the poller DEV_DRIVER=postgres adds (scripts/dev/postgres/orders-changes): rename yours"
  rm -rf "$app_root" && mkdir -p "$app_root"
  local f
  for f in host.json local.settings.json bin */function.json; do
    f=${f%/function.json}
    ln -s "../../$f" "$app_root/$f"
  done
  ln -s ../../scripts/dev/postgres/orders-changes "$app_root/orders-changes"
  export ORDERS_CHANGES_SCHEDULE=${ORDERS_CHANGES_SCHEDULE:-*/5 * * * * *}
}

# dev_point_pollers DRIVER DSN SHOWN points every poller of $app_root at the database of DSN:
# exports its {P}_DB_DRIVER and {P}_DB_CONNECTION (the environment wins over local.settings.json,
# in devhost as in Core Tools), and adds them to pollerctl_env with SHOWN for the DSN (the DSN
# itself, or a variable holding it). A poller whose {P}_DB_CONNECTION the environment sets
# already is left to it. Sets pointed to the pollers' names. ({P} is appsettings.Prefix's: the
# name in upper case, - as _.)
dev_point_pollers() {
  local driver=$1 dsn=$2 shown=$3 name p
  pointed=""
  for name in $(dev_pollers "$app_root"); do
    p=${name^^}
    p=${p//-/_}
    local conn="${p}_DB_CONNECTION"
    if [ -n "${!conn+set}" ]; then
      log "$name keeps the database of $conn, set in the environment"
      continue
    fi
    export "${p}_DB_DRIVER=$driver" "${p}_DB_CONNECTION=$dsn"
    pollerctl_env+="${pollerctl_env:+ }${p}_DB_DRIVER=$driver ${p}_DB_CONNECTION=$shown"
    pointed+="${pointed:+, }$name"
  done
}

# The PostgreSQL of DEV_DRIVER=postgres (without DEV_POSTGRES_DSN) is kept between runs: its
# record is .dev/postgres (the port of the last run, its DSN, its logs), its cluster
# .dev/postgres/data, or, run as root in a checkout the postgres user cannot enter (a folder of
# mode 700 above it, as root's home), a folder of its own under /var/tmp that .dev/postgres/data
# links to. It starts on the last run's port when that is free, and is stopped, not removed, when
# dev.sh ends; scripts/dev.sh --clean removes it.
dev_pg=.dev/postgres

# start_kept_postgres starts the kept PostgreSQL (wal_level=logical), creating it on the first
# run, and sets dev_pg_dsn. A new cluster takes Azurite's data of the last one with it
# (.dev/azurite-postgres: checkpoints of tables that are gone).
start_kept_postgres() {
  install_postgres
  local data port pid detach=()
  mkdir -p "$dev_pg"
  if [ -L "$dev_pg/data" ] && [ ! -d "$dev_pg/data" ]; then
    log "the kept PostgreSQL's cluster, $(readlink "$dev_pg/data"), is gone (the system cleared /var/tmp?): making a new one"
    rm -f "$dev_pg/data"
  fi
  if [ ! -e "$dev_pg/data/PG_VERSION" ]; then
    _init_kept_postgres
    if [ -d .dev/azurite-postgres ]; then
      rm -rf .dev/azurite-postgres
      log "removed .dev/azurite-postgres, Azurite's data for the cluster before this one (its checkpoints and queues)"
    fi
  else
    log "reusing the PostgreSQL kept in $dev_pg (its tables and slots as the last run left them; scripts/dev.sh --clean removes it)"
  fi
  data=$(cd "$dev_pg/data" && pwd -P)
  _stop_orphan_postgres "$data"
  port=$(cat "$dev_pg/port" 2>/dev/null || true)
  if ! [[ $port =~ ^[0-9]+$ ]] || (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    port=$(free_port)
  fi
  command -v setsid >/dev/null 2>&1 && detach=(setsid)
  # In a session of its own, as Azurite: Ctrl-C reaches the timers and the handler, and the exit
  # trap stops the server after them. No Unix socket: clients come over TCP. synchronous_commit
  # on, the server's default: logical decoding sends a change once its WAL is flushed, which an
  # asynchronous commit waits up to three wal_writer_delays for (a following poller showed
  # commit to delivery p50 500 ms for it).
  : >"$dev_pg/server.log"
  (cd / && exec "${detach[@]}" "${_pg_as[@]}" "$PG_BIN/postgres" -D "$data" -c listen_addresses=127.0.0.1 -p "$port" \
    -c unix_socket_directories= -c wal_level=logical -c max_replication_slots=32 -c max_wal_senders=16) >>"$dev_pg/server.log" 2>&1 </dev/null &
  pid=$!
  _stops=("_stop_kept_postgres $pid" "${_stops[@]}") # before the lock goes
  wait_port "$port" "$pid" PostgreSQL "$dev_pg/server.log" "database system is ready to accept connections" ||
    die "PostgreSQL would not start (its log: $dev_pg/server.log; scripts/dev.sh --clean starts afresh, without its tables)"
  echo "$port" >"$dev_pg/port"
  dev_pg_dsn="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
  echo "$dev_pg_dsn" >"$dev_pg/dsn"
  watch_service "$pid" "PostgreSQL (127.0.0.1:$port, kept in $dev_pg)" "$dev_pg/server.log"
  log "PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}') on 127.0.0.1:$port (pid $pid): $dev_pg_dsn (also in $dev_pg/dsn)"
}

# _pg_as runs a command as the user the kept PostgreSQL runs as: postgres when run as root
# (PostgreSQL refuses root), otherwise the user running dev.sh. setpriv, not runuser: the server's
# pid is then the one dev.sh watches and stops.
_pg_as=()
[ "$(id -u)" != 0 ] || _pg_as=(setpriv --reuid=postgres --regid=postgres --init-groups)

# _init_kept_postgres makes the kept cluster, where its user can reach it.
_init_kept_postgres() {
  local d=$ROOT/$dev_pg/data
  if [ "$(id -u)" = 0 ]; then
    chmod 755 "$dev_pg"
    if ! runuser -u postgres -- test -x "$ROOT/$dev_pg"; then
      local home
      home=/var/tmp/pseudotrigger-dev-$(printf %s "$ROOT" | cksum | cut -d' ' -f1)
      mkdir -p "$home" && chmod 755 "$home" && chown postgres "$home"
      runuser -u postgres -- test -x "$home" || die "the postgres user cannot reach $home either: run dev.sh from a checkout it can enter"
      rm -rf "$home/data"
      d=$home/data
      ln -sfn "$d" "$dev_pg/data"
      log "the postgres user cannot enter this checkout (a folder above it is closed to others, as root's home is): the cluster goes in $d, which $dev_pg/data links to"
    else
      mkdir -p "$d" && chown postgres "$d" && chmod 700 "$d"
    fi
  fi
  log "creating the kept PostgreSQL cluster (once; initdb) ..."
  (cd / && "${_pg_as[@]}" "$PG_BIN/initdb" -D "$d" -U postgres --auth=trust -E UTF8) >"$dev_pg/initdb.log" 2>&1 ||
    { tail -20 "$dev_pg/initdb.log" >&2; die "initdb failed (its log: $dev_pg/initdb.log)"; }
}

# _postmaster DATA prints the pid of the server running on the cluster DATA, if one runs.
_postmaster() {
  local pid
  pid=$(head -1 "$1/postmaster.pid" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] && _alive "$pid" && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q postgres && echo "$pid"
}

# _stop_orphan_postgres DATA stops a server still running on DATA, left by a run that was
# killed outright (SIGKILL skips the exit trap).
_stop_orphan_postgres() {
  local pid
  pid=$(_postmaster "$1") || return 0
  log "the kept PostgreSQL still runs (pid $pid), left by a run killed outright: stopping it first"
  _stop_kept_postgres "$pid"
}

# _stop_kept_postgres PID stops the kept server: SIGINT (its fast shutdown: clients
# disconnected, the cluster consistent), up to 30 s, then SIGKILL.
_stop_kept_postgres() {
  local pid=$1 i
  kill -INT "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 300; i++)); do
    _alive "$pid" || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
}

# dev_clean removes .dev, what dev.sh keeps there between runs, saying what each part was, and
# the kept PostgreSQL's cluster outside it; a kept server still running (left by a run killed
# outright) is stopped first. The caller holds the lock: no dev.sh runs in this checkout.
dev_clean() {
  local f what size outside="" pid
  if [ -e "$dev_pg/data" ]; then
    local data
    data=$(cd "$dev_pg/data" && pwd -P)
    [ -L "$dev_pg/data" ] && outside=$data
    _stop_orphan_postgres "$data"
  elif [ -L "$dev_pg/data" ]; then
    outside=$(readlink "$dev_pg/data")
  fi
  local entries=()
  for f in .dev/* .dev/.[!.]*; do
    [ -e "$f" ] || [ -L "$f" ] || continue
    [ "$f" = "$lock" ] || entries+=("$f")
  done
  if [ ${#entries[@]} = 0 ] && [ -z "$outside" ]; then
    log "scripts/dev.sh --clean: nothing to remove (.dev holds nothing dev.sh kept)"
    rm -rf .dev
    return 0
  fi
  log "scripts/dev.sh --clean: removing what dev.sh kept between runs:"
  local rest=()
  for f in "${entries[@]}"; do
    case ${f#.dev/} in
      postgres) what="the kept PostgreSQL of DEV_DRIVER=postgres: its tables, replication slots and logs" ;;
      azurite) what="Azurite's data of an older dev.sh, every DEV_DRIVER's together" ;;
      azurite-*-dsn) what="Azurite's data for DEV_DRIVER=$(f=${f#.dev/azurite-} && echo "${f%-dsn}") with a DSN of yours: checkpoints and queues" ;;
      azurite-*.log) rest+=("$f") && continue ;;
      azurite-*) what="Azurite's data for DEV_DRIVER=${f#.dev/azurite-}: checkpoints and queues" ;;
      orders.db) what="the SQLite orders table of DEV_DRIVER=sqlite" ;;
      orders.db-*) continue ;; # its write-ahead log, with it
      *) rest+=("$f") && continue ;;
    esac
    size=$(du -sh "$f" 2>/dev/null | cut -f1)
    printf '  %s (%s): %s\n' "$f" "${size:-?}" "$what" >&2
  done
  if [ ${#rest[@]} -gt 0 ]; then
    printf '  %s: the last run'"'"'s logs, settings and app root\n' "$(printf '%s, ' "${rest[@]}" | sed 's/, $//')" >&2
  fi
  if [ -n "$outside" ]; then
    size=$(du -sh "$outside" 2>/dev/null | cut -f1)
    printf '  %s (%s): the kept PostgreSQL'"'"'s cluster, which %s/data linked to\n' "$outside" "${size:-gone}" "$dev_pg" >&2
    rm -rf "$outside"
    rmdir "$(dirname "$outside")" 2>/dev/null || true
  fi
  rm -rf .dev
  log "removed .dev: the next scripts/dev.sh starts afresh (a new PostgreSQL, new checkpoints)"
}

# The services dev.sh started and watches while the app runs: pid, what it is, its log.
_watch_pids=()
_watch_names=()
_watch_logs=()

# watch_service PID NAME LOG adds a service to those run_watched watches.
watch_service() {
  _watch_pids+=("$1")
  _watch_names+=("$2")
  _watch_logs+=("$3")
}

# run_watched NAME CMD [ARG...] runs CMD as run_child does (NAME says what it is), and waits for
# it or for any watched service to end. CMD's end returns its exit status. A service's end is
# said, with how it ended and its log's last lines, and ends dev.sh (exit 1; the exit trap stops
# the rest): the pollers cannot work without it, and a tick line a second saying so would hide
# which one went.
run_watched() {
  local name=$1 pid rc=0 who="" i g keep=()
  shift
  start_child "$@"
  pid=$CHILD_PID
  # Its stderr hidden: bash would print a job notice ("line N: PID Killed  COMMAND") for a service
  # killed by a signal, before the lines below that say which one it was.
  wait -n -p who "$pid" "${_watch_pids[@]}" 2>/dev/null || rc=$?
  if [ "$who" = "$pid" ] || [ -z "$who" ]; then
    for g in "${_groups[@]}"; do [ "$g" = "$pid" ] || keep+=("$g"); done
    _groups=("${keep[@]}")
    ((rc == 0 || rc > 128)) || log "$name ended ($(_ended "$rc")): its reason is above"
    ((rc <= 128)) || log "$name ended ($(_ended "$rc"), pid $pid)"
    return "$rc"
  fi
  for i in "${!_watch_pids[@]}"; do
    [ "${_watch_pids[i]}" = "$who" ] || continue
    local how logf=${_watch_logs[i]}
    how=$(_ended "$rc")
    if [ -z "$logf" ]; then
      log "error: ${_watch_names[i]} stopped ($how, pid $who) while dev.sh ran (its output is above)"
    elif [ -s "$logf" ]; then
      log "error: ${_watch_names[i]} stopped ($how, pid $who) while dev.sh ran; its log, $logf, ends:"
      tail -n 5 "$logf" | sed 's/^/    /' >&2
    else
      log "error: ${_watch_names[i]} stopped ($how, pid $who) while dev.sh ran (its log, $logf, is empty)"
    fi
  done
  log "stopping the rest: the pollers cannot work without it. Start scripts/dev.sh again."
  exit 1
}

# _ended RC says how a process whose wait status is RC ended: "exit status 1", "killed by SIGKILL".
_ended() {
  if (($1 > 128)); then
    echo "killed by SIG$(kill -l $(($1 - 128)) 2>/dev/null || echo $(($1 - 128)))"
  else
    echo "exit status $1"
  fi
}
