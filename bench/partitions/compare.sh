#!/usr/bin/env bash
# bench/partitions/compare.sh — issue 23, Deliver 1: the PL/Proxy path vs scangate's direct per-partition
# writers, on a local partitioned cluster (deploy/partitions.sh start, 4 servers, 8 partitions, a fresh folder
# under /tmp), then end to end: scangate --partitions=<proxy> under wrk next to scangate on one PostgreSQL.
#   bench/partitions/compare.sh
# Environment (default): C (8) client threads, B (64) keys per batch, S (20) measured seconds per run,
#   REP_SHARE (0.25) repeated keys per batch, REPS (2) repetitions (odd: proxy then direct; even: direct then
#   proxy), E2E (1; 0 = skip the end-to-end part), E2E_CONNS ("64 256"), E2E_WRITERS ("2 1": scangate's
#   --writers, per partition with --partitions), E2E_S (10), E2E_REPEAT (0.25), MODES ("proxy direct"; "" = only
#   the end-to-end part),
#   BUILD (build/release), PARTITIONS_SH (deploy/partitions.sh), PG_SHARED_MB (128: the one-PostgreSQL cell's
#   shared_buffers, as deploy/partitions.sh's clusters get).
# Writes bench/partitions/logs/compare-<UTC time>.log (every run's full output, the load average before each).
# Needs: partition_bench and scangate built (cmake --build BUILD --target partition_bench scangate), wrk, root
# (PostgreSQL runs as postgres; /proc of its processes is read for CPU). Nothing here is niced: measured.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
C=${C:-8} B=${B:-64} S=${S:-20} REP_SHARE=${REP_SHARE:-0.25} REPS=${REPS:-2}
E2E=${E2E:-1} E2E_CONNS=${E2E_CONNS:-"64 256"} E2E_WRITERS=${E2E_WRITERS:-"2 1"} E2E_S=${E2E_S:-10}
E2E_REPEAT=${E2E_REPEAT:-0.25}
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
MODES=${MODES-proxy direct}
if [[ -n $MODES ]]; then
  for r in $(seq "$REPS"); do
    if ((r % 2)); then run proxy; run direct; else run direct; run proxy; fi
  done
fi

[[ $E2E == 1 ]] || { say "# done $(date -u +%FT%TZ)"; exit 0; }
# End to end: ack=commit (every key goes to the exact store), wrk with E2E_REPEAT repeated keys; per connection
# count: scangate --partitions with each of E2E_WRITERS writers per partition, then scangate on one PostgreSQL
# (its default 2 writers). The one-PostgreSQL cluster idles while the partition cells run, and the other way
# round: idle clusters cost little, and the cells alternate.
postmaster() { head -1 "$1/postmaster.pid"; }
PMS="$(postmaster "$(cut -d' ' -f2 "$DIR/proxy_server")")"
while read -r _ _ data; do PMS+=" $(postmaster "$data")"; done <"$DIR/servers"
PORT=$((40000 + RANDOM % 10000))
# shared_buffers as deploy/partitions.sh gives each of its clusters (PG_SHARED_MB, default 128 there).
PG_SHARED_MB=${PG_SHARED_MB:-128} "$ROOT/scripts/pg.sh" start "$PGDIR/data" "$PORT" >/dev/null
ONE=$("$ROOT/scripts/pg.sh" url "$PGDIR/data" "$PORT")
HAS_PARTITIONS=0
"$SG" --help 2>&1 | grep -q -- '--partitions' && HAS_PARTITIONS=1
for conns in $E2E_CONNS; do
  for w in $E2E_WRITERS; do
    if [[ $HAS_PARTITIONS == 0 ]]; then
      say "## end to end with --partitions: SKIPPED (this scangate has no --partitions flag yet)"; break
    fi
    say "## end to end: scangate --partitions --writers $w, $conns connections (proxy + 4 servers counted as PG; load $(cut -d' ' -f1-3 /proc/loadavg))"
    say "\$ SG_URL=$URL SG_DB_ARGS='--partitions $URL' SG_POSTMASTERS='$PMS' SG_EXTRA='--writers $w' REPEAT=$E2E_REPEAT bench/cpu_per_request.sh $SG commit $conns $E2E_S"
    SG_URL=$URL SG_DB_ARGS="--partitions $URL" SG_POSTMASTERS=$PMS SG_EXTRA="--writers $w" REPEAT=$E2E_REPEAT \
      "$ROOT/bench/cpu_per_request.sh" "$SG" commit "$conns" "$E2E_S" 2>&1 | tee -a "$LOG"
  done
  say "## end to end: scangate on one PostgreSQL, $conns connections (scripts/pg.sh, shared_buffers ${PG_SHARED_MB:-128} MB; load $(cut -d' ' -f1-3 /proc/loadavg))"
  say "\$ SG_URL=$ONE REPEAT=$E2E_REPEAT bench/cpu_per_request.sh $SG commit $conns $E2E_S"
  SG_URL=$ONE REPEAT=$E2E_REPEAT "$ROOT/bench/cpu_per_request.sh" "$SG" commit "$conns" "$E2E_S" 2>&1 | tee -a "$LOG"
done
say "# done $(date -u +%FT%TZ)"
