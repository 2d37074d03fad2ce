#!/usr/bin/env bash
# CTest fixture: a throwaway PostgreSQL for the test run.
#   pg_fixture.sh start DIR [DB...]  initdb in a fresh folder under /dev/shm (tmpfs; /tmp when it has less than
#                             4 GiB free) (PostgreSQL runs as user postgres,
#                             which may not be able to enter the checkout), start it on a free port;
#                             writes DIR/url (libpq URL of database "scangate"), DIR/port and DIR/pgdata (the
#                             data folder); then, for each DB, creates database DB and DIR/db/DB/{url,port,pgdata}
#                             naming it: a test given that folder works in a database of its own
#   pg_fixture.sh stop DIR    stops it and deletes its data
# Tests find DIR (or DIR/db/<test>) through the environment variable SCANGATE_TEST_PG_DIR. Two fixtures use it
# (tests/CMakeLists.txt): "pg", shared by tests that run side by side, each in its own database, and "pg_solo",
# one at a time, for the tests that stop, start or kill the cluster with scripts/pg.sh (outage tests).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cmd=${1:?}; dir=${2:?}
stop() {
  if [[ -f "$dir/pgdata" ]]; then
    data=$(cat "$dir/pgdata")
    "$here/scripts/pg.sh" stop "$data" || true
    rm -rf "$(dirname "$data")"
  fi
  rm -rf "$dir"
}
case "$cmd" in
  start)
    stop
    mkdir -p "$dir"
    # In memory (/dev/shm, tmpfs) when it has room: the tests run side by side and each commit is an fsync on the
    # machine's one disk (a release run of the suite: 253 s with the clusters on disk, 246 s on tmpfs; the rest is
    # CPU, docs/contributing.md "Tests"). Only a crash of the whole machine could lose a tmpfs cluster's data, and that no test
    # does: a PostgreSQL kill (pg.sh kill) or a scangate kill -9 behaves exactly as on disk.
    # SCANGATE_TEST_PG_BASE overrides.
    parent=${SCANGATE_TEST_PG_BASE:-}
    if [[ -z $parent ]]; then
      parent=/tmp
      shm_free_kb=$(df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 {print $4}')
      if [[ -w /dev/shm && ${shm_free_kb:-0} -gt $((4 * 1024 * 1024)) ]]; then parent=/dev/shm; fi
    fi
    base=$(mktemp -d "$parent/scangate-test-pg.XXXXXX"); chmod 755 "$base"
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    "$here/scripts/pg.sh" start "$base/data" "$port"
    echo "$port" >"$dir/port"
    echo "$base/data" >"$dir/pgdata"
    url=$("$here/scripts/pg.sh" url "$base/data" "$port")
    echo "$url" >"$dir/url"
    shift 2
    creates=()
    for db in "$@"; do
      [[ $db =~ ^[a-z_][a-z0-9_]*$ ]] || { echo "pg_fixture.sh: bad database name '$db'" >&2; exit 2; }
      creates+=(-c "CREATE DATABASE $db")
    done
    if (($# > 0)); then  # one session for all of them
      psql_as_pg=("${PGBIN:-/usr/lib/postgresql/15/bin}/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -q
                  -v ON_ERROR_STOP=1 "${creates[@]}")
      if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "${psql_as_pg[@]}" >/dev/null; else "${psql_as_pg[@]}" >/dev/null; fi
    fi
    for db in "$@"; do
      mkdir -p "$dir/db/$db"
      echo "$port" >"$dir/db/$db/port"
      echo "$base/data" >"$dir/db/$db/pgdata"
      echo "${url/\/scangate\?//$db?}" >"$dir/db/$db/url"
    done
    echo "throwaway PostgreSQL on port $port in $base/data ($# databases of their own)"
    ;;
  stop) stop ;;
  *) echo "usage: pg_fixture.sh start|stop DIR" >&2; exit 2 ;;
esac
