#!/usr/bin/env bash
# Starts, stops and describes a project-owned PostgreSQL 15 cluster.
#   scripts/pg.sh start DATADIR PORT   initdb on first use (reused afterwards), start, create db "scangate"
#   scripts/pg.sh stop  DATADIR        fast shutdown (no-op when not running)
#   scripts/pg.sh kill  DATADIR        immediate shutdown (crash-like; for outage tests)
#   scripts/pg.sh url   DATADIR PORT   print the libpq URL
# Environment: PG_SHARED_MB (shared_buffers in MB, set at initdb; default a quarter of the RAM, 128 MB..8 GB).
# PostgreSQL refuses to run as root, so as root every server command runs as the "postgres" user.
set -euo pipefail

PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
cmd=${1:?usage: pg.sh start|stop|kill|url DATADIR [PORT]}
datadir=$(realpath -m "${2:?DATADIR required}")
port=${3:-5544}

as_pg() {
  if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

url() { echo "postgresql://postgres@127.0.0.1:${port}/scangate?connect_timeout=3"; }

case "$cmd" in
  url) url ;;
  start)
    if [[ ! -f "$datadir/PG_VERSION" ]]; then
      mkdir -p "$datadir"
      if [[ $(id -u) -eq 0 ]]; then chown postgres: "$datadir"; fi
      chmod 700 "$datadir"
      if ! as_pg test -w "$datadir"; then
        echo "pg.sh: user postgres cannot write $datadir (check the permissions of its parent folders)" >&2
        exit 1
      fi
      as_pg "$PGBIN/initdb" -D "$datadir" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
      # shared_buffers: PG_SHARED_MB when set (deploy/partitions.sh: several clusters on one machine), else a
      # quarter of the RAM, 128 MB to 8 GB. The primary key of random digests is touched at
      # random leaves, so once it outgrows shared_buffers every insert evicts and re-reads a leaf page.
      shared_mb=${PG_SHARED_MB:-$(awk '/^MemTotal:/ {m = int($2 / 1024 / 4); print (m < 128 ? 128 : (m > 8192 ? 8192 : m))}' /proc/meminfo)}
      # Settings shipped for scangate's local cluster. synchronous_commit stays on: an acknowledged
      # "new" must survive a crash of PostgreSQL as well as of scangate.
      cat >>"$datadir/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
unix_socket_directories = '$datadir'
max_connections = 200
shared_buffers = ${shared_mb}MB
wal_buffers = 64MB
max_wal_size = 16GB
min_wal_size = 2GB
checkpoint_timeout = 30min
synchronous_commit = on
commit_delay = 0
wal_compression = lz4
effective_cache_size = 8GB
random_page_cost = 1.1
log_min_messages = warning
logging_collector = off
wal_level = logical
max_replication_slots = 64
max_wal_senders = 64
CONF
    fi
    if as_pg "$PGBIN/pg_ctl" -D "$datadir" status >/dev/null 2>&1; then
      :
    else
      as_pg "$PGBIN/pg_ctl" -D "$datadir" -o "-p $port" -l "$datadir/server.log" -w -t 60 start >/dev/null
    fi
    # --follow=logical (issue 32; the default, poll, does not need it) decodes the WAL: a cluster made by an older pg.sh is moved to
    # wal_level=logical once (one restart).
    if [[ $(as_pg "$PGBIN/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -tAc "SHOW wal_level") != logical ]]; then
      as_pg "$PGBIN/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -q \
        -c "ALTER SYSTEM SET wal_level = 'logical'" -c "ALTER SYSTEM SET max_replication_slots = 64" \
        -c "ALTER SYSTEM SET max_wal_senders = 64" >/dev/null
      as_pg "$PGBIN/pg_ctl" -D "$datadir" -o "-p $port" -l "$datadir/server.log" -w -t 60 restart >/dev/null
    fi
    if ! as_pg "$PGBIN/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -tAc \
        "SELECT 1 FROM pg_database WHERE datname='scangate'" | grep -q 1; then
      as_pg "$PGBIN/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -qc "CREATE DATABASE scangate" >/dev/null
    fi
    ;;
  stop)
    if [[ -f "$datadir/postmaster.pid" ]]; then
      as_pg "$PGBIN/pg_ctl" -D "$datadir" -m fast -w -t 60 stop >/dev/null || true
    fi
    ;;
  kill)
    if [[ -f "$datadir/postmaster.pid" ]]; then
      as_pg "$PGBIN/pg_ctl" -D "$datadir" -m immediate -w -t 60 stop >/dev/null || true
    fi
    ;;
  *) echo "pg.sh: unknown command $cmd" >&2; exit 2 ;;
esac
