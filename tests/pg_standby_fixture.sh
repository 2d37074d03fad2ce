#!/usr/bin/env bash
# CTest fixture "pg_standby": a small primary and a streaming standby of it (pg_basebackup -R), for tests of what
# scangate does when its URL leads to a server in recovery (pg_is_in_recovery()).
#   pg_standby_fixture.sh start DIR   a primary (scripts/pg.sh, shared_buffers 128 MB) and its standby on free ports
#                                     in a fresh folder under /dev/shm or /tmp; writes DIR/primary_url and
#                                     DIR/standby_url (libpq URLs of database "scangate") once the standby replays
#   pg_standby_fixture.sh stop DIR    stops both and deletes their data
# Tests find DIR through SCANGATE_TEST_PG_STANDBY_DIR (tests/storage/CMakeLists.txt). PostgreSQL runs as postgres.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
cmd=${1:?}; dir=${2:?}
as_pg() { if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
stop() {
  if [[ -f $dir/base ]]; then
    base=$(cat "$dir/base")
    if [[ -f $base/standby/postmaster.pid ]]; then as_pg "$PGBIN/pg_ctl" -D "$base/standby" -m immediate -w stop >/dev/null || true; fi
    "$here/scripts/pg.sh" kill "$base/primary" || true
    rm -rf "$base"
  fi
  rm -rf "$dir"
}
case "$cmd" in
  start)
    stop
    mkdir -p "$dir"
    parent=/tmp
    if [[ -w /dev/shm ]]; then parent=/dev/shm; fi
    base=$(mktemp -d "$parent/scangate-test-standby.XXXXXX"); chmod 755 "$base"
    echo "$base" >"$dir/base"
    primary_port=$(free_port)
    PG_SHARED_MB=128 "$here/scripts/pg.sh" start "$base/primary" "$primary_port"
    standby_port=$(free_port)
    mkdir -m 700 "$base/standby"
    if [[ $(id -u) -eq 0 ]]; then chown postgres: "$base/standby"; fi
    # -R: standby.signal and primary_conninfo; -X stream: the WAL of the copy comes along. The fixture's pg_hba
    # (initdb --auth=trust) lets postgres replicate from 127.0.0.1.
    if ! as_pg "$PGBIN/pg_basebackup" -h 127.0.0.1 -p "$primary_port" -U postgres -D "$base/standby" -R -X stream \
        --checkpoint=fast >/dev/null 2>"$base/basebackup.log"; then
      cat "$base/basebackup.log" >&2
      exit 1
    fi
    as_pg "$PGBIN/pg_ctl" -D "$base/standby" -o "-p $standby_port -k $base/standby" -l "$base/standby/server.log" -w -t 60 \
      start >/dev/null
    for _ in $(seq 1 100); do
      recovery=$(as_pg "$PGBIN/psql" -h 127.0.0.1 -p "$standby_port" -U postgres -d scangate -tAc \
        "SELECT pg_is_in_recovery()" 2>/dev/null || true)
      [[ $recovery == t ]] && break
      sleep 0.1
    done
    [[ $recovery == t ]] || { echo "pg_standby_fixture.sh: the standby is not in recovery" >&2; exit 1; }
    "$here/scripts/pg.sh" url "$base/primary" "$primary_port" >"$dir/primary_url"
    "$here/scripts/pg.sh" url "$base/standby" "$standby_port" >"$dir/standby_url"
    echo "primary on port $primary_port, standby on port $standby_port in $base"
    ;;
  stop) stop ;;
  *) echo "usage: pg_standby_fixture.sh start|stop DIR" >&2; exit 2 ;;
esac
