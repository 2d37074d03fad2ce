#!/usr/bin/env bash
# CTest fixture: a throwaway PostgreSQL for the test run.
#   pg_fixture.sh start DIR   initdb in a fresh folder under /tmp (PostgreSQL runs as user postgres,
#                             which may not be able to enter the checkout), start it on a free port;
#                             writes DIR/url (libpq URL), DIR/port and DIR/pgdata (the data folder)
#   pg_fixture.sh stop DIR    stops it and deletes its data
# Tests find DIR through the environment variable SCANGATE_TEST_PG_DIR and may stop/start/kill the
# same cluster with scripts/pg.sh for outage tests.
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
    base=$(mktemp -d /tmp/scangate-test-pg.XXXXXX); chmod 755 "$base"
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    "$here/scripts/pg.sh" start "$base/data" "$port"
    echo "$port" >"$dir/port"
    echo "$base/data" >"$dir/pgdata"
    "$here/scripts/pg.sh" url "$base/data" "$port" >"$dir/url"
    echo "throwaway PostgreSQL on port $port in $base/data"
    ;;
  stop) stop ;;
  *) echo "usage: pg_fixture.sh start|stop DIR" >&2; exit 2 ;;
esac
