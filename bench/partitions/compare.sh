#!/usr/bin/env bash
# bench/partitions/compare.sh — issue 23, Deliver 1: the PL/Proxy path vs scangate's direct per-partition
# writers, on a local partitioned cluster (deploy/partitions.sh start, 4 servers, 8 partitions, a fresh folder
# under /tmp), then end to end: scangate --partitions=<proxy> under wrk next to scangate on one PostgreSQL.
#   bench/partitions/compare.sh
# Environment (default): C (8) client threads, B (64) keys per batch, S (20) measured seconds per run,
#   REP_SHARE (0.25) repeated keys per batch, REPS (2) repetitions (odd: proxy then direct; even: direct then
#   proxy), E2E (1; 0 = skip the end-to-end part), E2E_CONNS (64), E2E_S (10), E2E_REPEAT (0.25),
#   BUILD (build/release), PARTITIONS_SH (deploy/partitions.sh).
# Writes bench/partitions/logs/compare-<UTC time>.log (every run's full output, the load average before each).
# Needs: partition_bench and scangate built (cmake --build BUILD --target partition_bench scangate), wrk, root
# (PostgreSQL runs as postgres; /proc of its processes is read for CPU). Nothing here is niced: measured.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
C=${C:-8} B=${B:-64} S=${S:-20} REP_SHARE=${REP_SHARE:-0.25} REPS=${REPS:-2}
E2E=${E2E:-1} E2E_CONNS=${E2E_CONNS:-64} E2E_S=${E2E_S:-10} E2E_REPEAT=${E2E_REPEAT:-0.25}
BUILD=${BUILD:-$ROOT/build/release}
PARTS=${PARTITIONS_SH:-$ROOT/deploy/partitions.sh}
BENCH=$BUILD/bench/partitions/partition_bench
SG=$BUILD/server/scangate
mkdir -p "$ROOT/bench/partitions/logs"
LOG=$ROOT/bench/partitions/logs/compare-$(date -u +%Y%m%dT%H%M%SZ).log
DIR=$(mktemp -d /tmp/sg-parts.XXXXXX)
chmod 755 "$DIR"
PGDIR=$(mktemp -d /tmp/sg-onepg.XXXXXX)
chmod 755 "$PGDIR"
cleanup() {
  "$PARTS" stop "$DIR" --clean >/dev/null 2>&1 || true
  "$ROOT/scripts/pg.sh" stop "$PGDIR/data" >/dev/null 2>&1 || true
  rm -rf "$PGDIR"
  [[ -s $LOG.stderr ]] || rm -f "$LOG.stderr"
}
trap cleanup EXIT
say() { echo "$*" | tee -a "$LOG"; }

say "# compare.sh $(date -u +%FT%TZ) commit $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet || echo '+dirty')"
say "# nproc $(nproc); C=$C B=$B S=$S REP_SHARE=$REP_SHARE REPS=$REPS; partitions script: $PARTS"
"$PARTS" start "$DIR" --servers 4 --partitions 8 2>&1 | tail -1 | tee -a "$LOG"
URL=$("$PARTS" url "$DIR")
say "# map:"; sed 's/^/#   /' "$DIR/map" | tee -a "$LOG"

run() {  # run MODE: one partition_bench run, output into the log
  say "## $1 (load $(cut -d' ' -f1-3 /proc/loadavg))"
  say "\$ partition_bench --mode=$1 --url=$URL --clients=$C --batch=$B --seconds=$S --repeat=$REP_SHARE"
  "$BENCH" --mode="$1" --url="$URL" --clients="$C" --batch="$B" --seconds="$S" --repeat="$REP_SHARE" 2>>"$LOG.stderr" | tee -a "$LOG"
}
for r in $(seq "$REPS"); do
  if ((r % 2)); then run proxy; run direct; else run direct; run proxy; fi
done

[[ $E2E == 1 ]] || exit 0
# End to end: ack=commit (every key goes to the exact store), wrk with E2E_REPEAT repeated keys.
postmaster() { head -1 "$1/postmaster.pid"; }
PMS="$(postmaster "$(cut -d' ' -f2 "$DIR/proxy_server")")"
while read -r _ _ data; do PMS+=" $(postmaster "$data")"; done <"$DIR/servers"
if "$SG" --help 2>&1 | grep -q -- '--partitions'; then
  say "## end to end: scangate --partitions (proxy + 4 servers counted as PG; load $(cut -d' ' -f1-3 /proc/loadavg))"
  say "\$ SG_URL=$URL SG_DB_ARGS='--partitions $URL' SG_POSTMASTERS='$PMS' REPEAT=$E2E_REPEAT bench/cpu_per_request.sh $SG commit $E2E_CONNS $E2E_S"
  SG_URL=$URL SG_DB_ARGS="--partitions $URL" SG_POSTMASTERS=$PMS REPEAT=$E2E_REPEAT \
    "$ROOT/bench/cpu_per_request.sh" "$SG" commit "$E2E_CONNS" "$E2E_S" 2>&1 | tee -a "$LOG"
else
  say "## end to end with --partitions: SKIPPED (this scangate has no --partitions flag yet)"
fi
"$PARTS" stop "$DIR" >/dev/null 2>&1 || true  # the one-PostgreSQL cell runs alone
PORT=$((40000 + RANDOM % 10000))
"$ROOT/scripts/pg.sh" start "$PGDIR/data" "$PORT" >/dev/null
ONE=$("$ROOT/scripts/pg.sh" url "$PGDIR/data" "$PORT")
say "## end to end: scangate on one PostgreSQL (scripts/pg.sh; load $(cut -d' ' -f1-3 /proc/loadavg))"
say "\$ SG_URL=$ONE REPEAT=$E2E_REPEAT bench/cpu_per_request.sh $SG commit $E2E_CONNS $E2E_S"
SG_URL=$ONE REPEAT=$E2E_REPEAT "$ROOT/bench/cpu_per_request.sh" "$SG" commit "$E2E_CONNS" "$E2E_S" 2>&1 | tee -a "$LOG"
say "# done $(date -u +%FT%TZ)"
