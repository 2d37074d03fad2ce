#!/usr/bin/env bash
# A partitioned exact store on this machine, loopback only, for tests, benchmarks and operators' rehearsals
# (issue 23, docs/ha.md "Past one PostgreSQL"): N PostgreSQL 15 clusters ("servers") holding P logical
# partitions (one database scangate_pK per partition, pK on server K % N), and one more cluster holding the
# PL/Proxy database scangate_proxy, whose foreign server `scangate` is the partition map scangate reads
# (--partitions=$(deploy/partitions.sh url DIR)). Every cluster has its own port and data folder under DIR.
#
#   deploy/partitions.sh start DIR [--servers N] [--partitions P] [--port BASE]
#        N servers (default 4), P partitions (default 8; a power of two, >= 1), ports BASE (the proxy) and
#        BASE+1.. (the servers); default BASE: a free block. On a DIR that already holds a cluster, starts
#        its stopped clusters again and keeps its layout and map (the options are then ignored).
#   deploy/partitions.sh stop DIR [--clean]     stop every cluster of DIR whatever its state, then kill -9
#        any PostgreSQL process left in DIR (idempotent); --clean also deletes DIR
#   deploy/partitions.sh status DIR             each cluster: port, data folder, up/down; the map
#   deploy/partitions.sh url DIR                the proxy database's libpq URL
#   deploy/partitions.sh kill-server DIR I      kill -9 the postmaster of partition server I (0-based)
#   deploy/partitions.sh start-server DIR I     start partition server I again
#   deploy/partitions.sh add-server DIR         one more (empty) partition server; prints its index
#   deploy/partitions.sh move DIR K TO          move partition K to server TO, fenced (docs/ha.md)
#   deploy/partitions.sh psql DIR [ARGS...]     psql on the proxy database
#
# DIR is given by the caller and must be enterable by user postgres (e.g. under /tmp; NOT inside a mode-700
# clone): PostgreSQL runs as postgres (scripts/pg.sh). DIR is made mode 755. Files written there:
#   DIR/proxy_url   the proxy database's libpq URL
#   DIR/proxy_server  "port datadir" of the proxy cluster
#   DIR/servers     one line per partition server: "index port datadir"
#   DIR/map         one line per partition: "partition server port conninfo" (the map, as last set here)
# Every cluster gets scripts/pg.sh's settings with shared_buffers PG_SHARED_MB (default 128 here: several
# clusters share the machine). Every partition database gets the scangate migrations (sql/NNN_*.sql) exactly as
# storage/start/migrations.cc applies them, so the proxy path works before any scangate ran and scangate finds them
# applied. Needs postgresql-15 and postgresql-15-plproxy (scripts/deps.sh build partitions, run by `start`).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
export PG_SHARED_MB=${PG_SHARED_MB:-128}
MIGRATION_LOCK=101882705870849  # storage/start/migrations.cc kMigrationLockKey (0x5ca96a7e0001)

log() { echo "partitions.sh: $*" >&2; }
die() { log "$*"; exit 1; }
usage() { sed -n '/^#   deploy/,/^#$/p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

# sql PORT DB SQL: one statement (or several), unaligned tuples-only output, stops at the first error.
sql() { "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$1" -U postgres -d "$2" -tAc "$3"; }
up() { "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$1" -U postgres -t 2 2>/dev/null; }
conninfo() { echo "host=127.0.0.1 port=$1 dbname=scangate_p$2 user=postgres"; }

load() {  # reads DIR's layout into PROXY_PORT PROXY_DATA SERVER_PORT[] SERVER_DATA[]
  [[ -f $DIR/servers && -f $DIR/proxy_server ]] || die "$DIR holds no partitioned cluster (no $DIR/servers); run start"
  read -r PROXY_PORT PROXY_DATA <"$DIR/proxy_server"
  SERVER_PORT=() SERVER_DATA=()
  local i port data
  while read -r i port data; do SERVER_PORT[i]=$port SERVER_DATA[i]=$data; done <"$DIR/servers"
}
server_index() {  # validates a server index argument
  [[ ${1:-} =~ ^[0-9]+$ && -n ${SERVER_PORT[$1]:-} ]] || die "no partition server '${1:-}' in $DIR (0..$((${#SERVER_PORT[@]} - 1)))"
}

# The PIDs of the PostgreSQL processes of DIR: every backend's working directory is its data folder.
pids_of_dir() {
  local p cwd
  for p in /proc/[0-9]*; do
    cwd=$(readlink "$p/cwd" 2>/dev/null) || continue
    [[ $cwd == "$DIR"/* ]] && echo "${p#/proc/}"
  done
  return 0
}

free_block() {  # COUNT: prints a base port with COUNT free consecutive ports
  python3 - "$1" <<'PY'
import random, socket, sys
n = int(sys.argv[1])
for _ in range(200):
    base = random.randrange(20000, 60000 - n)
    socks = []
    try:
        for p in range(base, base + n):
            s = socket.socket(); s.bind(("127.0.0.1", p)); socks.append(s)
    except OSError:
        continue
    finally:
        for s in socks: s.close()
    print(base); sys.exit(0)
sys.exit("no free block of %d ports" % n)
PY
}

# The scangate migrations, as storage/start/migrations.cc applies them: one transaction holding the advisory lock,
# schema_migrations created if absent, each sql/NNN_name.sql not recorded there run and then recorded.
apply_migrations() {  # PORT DB
  local script f base version name
  script=$(mktemp)
  {
    echo "SET LOCAL client_min_messages = warning;"
    echo "SELECT pg_advisory_xact_lock($MIGRATION_LOCK);"
    echo "CREATE TABLE IF NOT EXISTS schema_migrations (version int PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());"
    for f in "$root"/sql/[0-9]*_*.sql; do  # NNN zero-padded: the glob's order is the numeric order
      base=$(basename "$f")
      [[ $base =~ ^([0-9]+)_([A-Za-z0-9_]+)\.sql$ ]] || die "sql/$base: not NNN_name.sql"
      version=$((10#${BASH_REMATCH[1]})) name=${BASH_REMATCH[2]}
      echo "SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $version) AS applied \\gset"
      echo "\\if :applied"
      echo "\\else"
      echo "\\i $f"
      echo "INSERT INTO schema_migrations (version, name) VALUES ($version, '$name');"
      echo "\\endif"
    done
  } >"$script"
  if ! "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 --single-transaction -h 127.0.0.1 -p "$1" -U postgres -d "$2" \
      -f "$script" >/dev/null; then
    rm -f "$script"; die "migrations failed on $2 (port $1)"
  fi
  rm -f "$script"
}

start_cluster() {  # DATADIR PORT: scripts/pg.sh start, retried while a killed postmaster's backends linger
  local tries=0
  until "$root/scripts/pg.sh" start "$1" "$2" 2>"$DIR/pg_start.err"; do
    tries=$((tries + 1))
    ((tries < 10)) || { cat "$DIR/pg_start.err" >&2; die "cannot start the cluster in $1 (port $2; see $1/server.log)"; }
    sleep 1
  done
  rm -f "$DIR/pg_start.err"
}

write_map() {  # regenerates DIR/map from the proxy's foreign server (the map in force)
  local key ci k port i server
  sql "$PROXY_PORT" scangate_proxy \
    "SELECT split_part(o, '=', 1), substr(o, strpos(o, '=') + 1) FROM pg_foreign_server s, unnest(s.srvoptions) o
     WHERE s.srvname = 'scangate' AND o ~ '^p[0-9]+='" |
    while IFS='|' read -r key ci; do
      k=${key#p} server='?'
      port=$(sed -nE 's/.*port=([0-9]+).*/\1/p' <<<"$ci")
      for i in "${!SERVER_PORT[@]}"; do [[ ${SERVER_PORT[i]} == "$port" ]] && server=$i; done
      echo "$k $server $port $ci"
    done | sort -n >"$DIR/map.tmp"
  mv "$DIR/map.tmp" "$DIR/map"
}

cmd_start() {
  local servers=4 parts=8 base=""
  while (($#)); do
    case $1 in
      --servers) servers=${2:?}; shift 2 ;;
      --partitions) parts=${2:?}; shift 2 ;;
      --port) base=${2:?}; shift 2 ;;
      *) die "start: unknown option $1" ;;
    esac
  done
  [[ $servers =~ ^[0-9]+$ ]] && ((servers >= 1)) || die "--servers must be >= 1"
  [[ $parts =~ ^[0-9]+$ ]] && ((parts >= 1 && (parts & (parts - 1)) == 0)) || die "--partitions must be a power of two >= 1 (PL/Proxy's hash & (P - 1))"
  bash "$root/scripts/deps.sh" build partitions
  mkdir -p "$DIR"; chmod 755 "$DIR"
  if [[ -f $DIR/servers ]]; then
    log "$DIR already holds a cluster: starting it as laid out (options ignored)"
    load
  else
    ((parts >= servers)) || log "note: $parts partitions on $servers servers leaves servers without a partition"
    [[ -n $base ]] || base=$(free_block $((servers + 1)))
    PROXY_PORT=$base PROXY_DATA=$DIR/proxy/data
    SERVER_PORT=() SERVER_DATA=()
    local i
    for ((i = 0; i < servers; i++)); do SERVER_PORT[i]=$((base + 1 + i)) SERVER_DATA[i]=$DIR/s$i/data; done
    echo "$PROXY_PORT $PROXY_DATA" >"$DIR/proxy_server"
    for i in "${!SERVER_PORT[@]}"; do echo "$i ${SERVER_PORT[i]} ${SERVER_DATA[i]}"; done >"$DIR/servers"
  fi
  local i
  start_cluster "$PROXY_DATA" "$PROXY_PORT"
  for i in "${!SERVER_PORT[@]}"; do start_cluster "${SERVER_DATA[i]}" "${SERVER_PORT[i]}"; done

  local fresh=0
  if [[ -z $(sql "$PROXY_PORT" postgres "SELECT 1 FROM pg_database WHERE datname = 'scangate_proxy'") ]]; then
    sql "$PROXY_PORT" postgres "CREATE DATABASE scangate_proxy"
  fi
  "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PROXY_PORT" -U postgres -d scangate_proxy \
    -c "SET client_min_messages = warning" -f "$root/sql/proxy/001_scangate_proxy.sql" >/dev/null
  if [[ -z $(sql "$PROXY_PORT" scangate_proxy "SELECT 1 FROM pg_foreign_server WHERE srvname = 'scangate'") ]]; then
    fresh=1
    local opts="connection_lifetime '1800'" k s
    for ((k = 0; k < parts; k++)); do
      s=$((k % ${#SERVER_PORT[@]}))
      opts+=", p$k '$(conninfo "${SERVER_PORT[s]}" "$k")'"
    done
    sql "$PROXY_PORT" scangate_proxy "CREATE SERVER scangate FOREIGN DATA WRAPPER plproxy OPTIONS ($opts);
      CREATE USER MAPPING FOR PUBLIC SERVER scangate;"
  fi
  write_map
  # Every partition database of the map exists on its server and carries the migrations.
  local k s port
  while read -r k s port _; do
    if [[ -z $(sql "$port" postgres "SELECT 1 FROM pg_database WHERE datname = 'scangate_p$k'") ]]; then
      ((fresh)) || die "partition $k: database scangate_p$k missing on port $port"
      sql "$port" postgres "CREATE DATABASE scangate_p$k"
    fi
    apply_migrations "$port" "scangate_p$k"
  done <"$DIR/map"
  echo "postgresql://postgres@127.0.0.1:$PROXY_PORT/scangate_proxy?connect_timeout=3" >"$DIR/proxy_url"
  log "up: proxy on port $PROXY_PORT, ${#SERVER_PORT[@]} servers (ports ${SERVER_PORT[*]}), $(wc -l <"$DIR/map") partitions"
  cat "$DIR/proxy_url"
}

cmd_stop() {
  local clean=0
  [[ ${1:-} == --clean ]] && clean=1
  [[ -d $DIR ]] || return 0
  local d
  for d in "$DIR"/proxy/data "$DIR"/s*/data; do
    # A killed postmaster leaves its postmaster.pid: pg_ctl would only complain; the sweep below ends the rest.
    if [[ -f $d/postmaster.pid ]] && kill -0 "$(head -1 "$d/postmaster.pid")" 2>/dev/null; then
      "$root/scripts/pg.sh" stop "$d" || true
    fi
  done
  # Whatever survived (a killed postmaster's backends, a cluster pg_ctl could not stop): kill -9 by pid.
  local left
  left=$(pids_of_dir)
  if [[ -n $left ]]; then
    log "killing leftover PostgreSQL processes of $DIR: $(echo $left)"
    kill -9 $left 2>/dev/null || true
    sleep 1
  fi
  left=$(pids_of_dir)
  [[ -z $left ]] || die "PostgreSQL processes of $DIR still alive: $(echo $left)"
  if ((clean)); then rm -rf "$DIR"; fi
}

cmd_status() {
  load
  local i
  state() { if up "$1"; then echo up; else echo DOWN; fi; }
  echo "proxy    port $PROXY_PORT  $(state "$PROXY_PORT")  $PROXY_DATA"
  for i in "${!SERVER_PORT[@]}"; do
    echo "server $i port ${SERVER_PORT[i]}  $(state "${SERVER_PORT[i]}")  ${SERVER_DATA[i]}"
  done
  if up "$PROXY_PORT"; then write_map; fi
  echo "map (partition server port conninfo):"
  sed 's/^/  /' "$DIR/map" 2>/dev/null || echo "  (none yet)"
}

cmd_kill_server() {
  load; server_index "${1:-}"
  local pidfile=${SERVER_DATA[$1]}/postmaster.pid pid
  [[ -f $pidfile ]] || die "server $1 is not running (no $pidfile)"
  pid=$(head -1 "$pidfile")
  kill -9 "$pid" 2>/dev/null || die "server $1: postmaster $pid not alive"
  log "killed the postmaster of server $1 (pid $pid, port ${SERVER_PORT[$1]})"
}

cmd_start_server() {
  load; server_index "${1:-}"
  start_cluster "${SERVER_DATA[$1]}" "${SERVER_PORT[$1]}"
  log "server $1 up on port ${SERVER_PORT[$1]}"
}

cmd_add_server() {
  load
  local i=${#SERVER_PORT[@]} port
  port=$(( $(printf '%s\n' "$PROXY_PORT" "${SERVER_PORT[@]}" | sort -n | tail -1) + 1 ))
  python3 -c 'import socket,sys; socket.socket().bind(("127.0.0.1", int(sys.argv[1])))' "$port" 2>/dev/null ||
    port=$(free_block 1)
  SERVER_PORT[i]=$port SERVER_DATA[i]=$DIR/s$i/data
  echo "$i $port ${SERVER_DATA[i]}" >>"$DIR/servers"
  start_cluster "${SERVER_DATA[i]}" "$port"
  log "server $i up on port $port (empty: move partitions to it with: $0 move $DIR K $i)"
  echo "$i"
}

# Moves partition K to server TO (docs/ha.md "Adding a server and moving a partition"): fence, copy, switch the map.
cmd_move() {
  load
  local k=${1:-} to=${2:-}
  [[ $k =~ ^[0-9]+$ ]] || die "move: partition number required"
  server_index "$to"
  write_map
  local line from from_port ci
  line=$(awk -v k="$k" '$1 == k' "$DIR/map")
  [[ -n $line ]] || die "move: no partition $k in the map"
  read -r _ from from_port ci <<<"$line"
  [[ $from != "$to" ]] || die "move: partition $k is already on server $to"
  local db=scangate_p$k fenced to_port=${SERVER_PORT[$to]}
  fenced=scangate_p${k}_moved_$(date +%s)
  [[ -z $(sql "$to_port" postgres "SELECT 1 FROM pg_database WHERE datname = '$db'") ]] ||
    die "move: server $to already has a database $db"
  # 1. Fence: nobody connects to the old database any more, the connected are ended, and it is renamed so
  #    that a writer still on the old map finds nothing to write to (renaming needs no other session in it).
  sql "$from_port" postgres "ALTER DATABASE $db ALLOW_CONNECTIONS false"
  local tries=0
  until sql "$from_port" postgres "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = '$db';
                                   ALTER DATABASE $db RENAME TO $fenced" >/dev/null 2>&1; do
    tries=$((tries + 1)); ((tries < 20)) || die "move: cannot fence $db on port $from_port"
    sleep 0.5
  done
  sql "$from_port" postgres "ALTER DATABASE $fenced ALLOW_CONNECTIONS true"
  log "fenced: $db on server $from renamed $fenced"
  # 2. Copy: everything committed before the fence.
  sql "$to_port" postgres "CREATE DATABASE $db TEMPLATE template0"
  if ! "$PGBIN/pg_dump" -Fc -h 127.0.0.1 -p "$from_port" -U postgres -d "$fenced" |
      "$PGBIN/pg_restore" --exit-on-error -h 127.0.0.1 -p "$to_port" -U postgres -d "$db"; then
    die "move: copy failed; the map still names server $from, whose copy is $fenced (rename it back to $db)"
  fi
  # 3. Switch the map: PL/Proxy (and scangate, at its next poll) now go to the new place.
  sql "$PROXY_PORT" scangate_proxy "ALTER SERVER scangate OPTIONS (SET p$k '$(conninfo "$to_port" "$k")')"
  write_map
  # 4. The old copy goes.
  sql "$from_port" postgres "DROP DATABASE $fenced"
  log "partition $k moved from server $from (port $from_port) to server $to (port $to_port)"
}

cmd=${1:-}; [[ -n $cmd ]] || usage
[[ -n ${2:-} ]] || usage
DIR=$(realpath -m "$2"); shift 2
case $cmd in
  start) cmd_start "$@" ;;
  stop) cmd_stop "$@" ;;
  status) cmd_status ;;
  url) load; cat "$DIR/proxy_url" ;;
  kill-server) cmd_kill_server "$@" ;;
  start-server) cmd_start_server "$@" ;;
  add-server) cmd_add_server ;;
  move) cmd_move "$@" ;;
  psql) load; exec "$PGBIN/psql" -X "$(cat "$DIR/proxy_url")" "$@" ;;
  *) usage ;;
esac
