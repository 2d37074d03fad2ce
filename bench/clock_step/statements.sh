#!/usr/bin/env bash
# bench/clock_step/statements.sh — PostgreSQL's time per statement of the peers' watermark before and after the clock
# epoch (issue 55, sql/016): the publisher's beat (every 50 ms per instance and database), the readers' peers
# subquery (in every follower poll) and the clock reading (once a second), each as main had it (old_*) and with the
# epoch (new_*), pgbench with one client, REPS interleaved 5-s cells each.
#   bench/clock_step/statements.sh PORT [REPS]
# Needs a cluster on 127.0.0.1:PORT (scripts/pg.sh start DIR PORT) with every sql/*.sql applied to database
# scangate (psql -f each, in order); setup.sql adds the one row the beats update. As root, runs as user postgres.
set -euo pipefail
PORT=${1:?PORT}; REPS=${2:-3}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
as_pg() { if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi; }
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
as_pg "$PGBIN/psql" -qX -h 127.0.0.1 -p "$PORT" -U postgres -d scangate -f "$here/setup.sql"
for rep in $(seq "$REPS"); do
  for s in old_beat new_beat old_read new_read old_clock new_clock; do
    # The publisher's session runs with synchronous_commit off (storage/peers/watermark_publisher.cc).
    printf '%s rep%s: ' "$s" "$rep"
    as_pg env PGOPTIONS=-csynchronous_commit=off "$PGBIN/pgbench" -n -h 127.0.0.1 -p "$PORT" -U postgres \
      -M prepared -c 1 -T 5 -f "$here/$s.sql" scangate 2>/dev/null | grep 'latency average'
  done
done
