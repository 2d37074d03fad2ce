#!/usr/bin/env bash
# bench/partitions/scaling.sh — issue 23, Deliver 5: PostgreSQL CPU per key per partition server as the same
# 8 logical partitions are spread over 1, 2 and 4 partition servers (deploy/partitions.sh --partitions 8
# --servers N, a fresh cluster folder per run), scangate's direct writer path (partition_bench --mode=direct:
# one storage::Store per partition), the SAME number of measured keys in every run (so every partition's table
# ends equally large). The reference "one PostgreSQL": --servers 1 --partitions 1, the same bench (one Store:
# exactly scangate's single-database writers). On this 2-core machine throughput cannot grow with servers (all
# clusters share the two cores); the claim measured is that the CPU each server spends per key it owns stays
# flat, so that keys/s per added server (on its own cores) is predictable.
#   bench/partitions/scaling.sh
# Environment (default): LAYOUTS ("1:1 1:8 2:8 4:8" = servers:partitions), KEYS (400000) measured keys per run,
#   C (8), B (64), REP_SHARE (0.25), WRITERS (2, per partition), REPS (2; the layouts in reverse order on even
#   repetitions), BUILD (build/release), PARTITIONS_SH (deploy/partitions.sh).
# Writes bench/partitions/logs/scaling-<UTC time>.log.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LAYOUTS=${LAYOUTS:-"1:1 1:8 2:8 4:8"} KEYS=${KEYS:-400000} C=${C:-8} B=${B:-64} REP_SHARE=${REP_SHARE:-0.25}
WRITERS=${WRITERS:-2} REPS=${REPS:-2}
BUILD=${BUILD:-$ROOT/build/release}
PARTS=${PARTITIONS_SH:-$ROOT/deploy/partitions.sh}
BENCH=$BUILD/bench/partitions/partition_bench
mkdir -p "$ROOT/bench/partitions/logs"
LOG=$ROOT/bench/partitions/logs/scaling-$(date -u +%Y%m%dT%H%M%SZ).log
DIR=
cleanup() {
  [[ -z $DIR ]] || "$PARTS" stop "$DIR" --clean >/dev/null 2>&1 || true
  [[ -s $LOG.stderr ]] || rm -f "$LOG.stderr"
}
trap cleanup EXIT
say() { echo "$*" | tee -a "$LOG"; }

say "# scaling.sh $(date -u +%FT%TZ) commit $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet || echo '+dirty')"
say "# nproc $(nproc); LAYOUTS=$LAYOUTS KEYS=$KEYS C=$C B=$B REP_SHARE=$REP_SHARE WRITERS=$WRITERS REPS=$REPS"
for r in $(seq "$REPS"); do
  order=$LAYOUTS
  ((r % 2)) || order=$(tr ' ' '\n' <<<"$LAYOUTS" | tac | tr '\n' ' ')
  for l in $order; do
    n=${l%%:*} p=${l##*:}
    DIR=$(mktemp -d /tmp/sg-scale.XXXXXX)
    chmod 755 "$DIR"
    "$PARTS" start "$DIR" --servers "$n" --partitions "$p" >/dev/null 2>&1
    URL=$("$PARTS" url "$DIR")
    say "## rep $r: servers=$n partitions=$p (load $(cut -d' ' -f1-3 /proc/loadavg))"
    say "\$ partition_bench --mode=direct --url=$URL --clients=$C --batch=$B --keys=$KEYS --repeat=$REP_SHARE --writers=$WRITERS"
    "$BENCH" --mode=direct --url="$URL" --clients="$C" --batch="$B" --keys="$KEYS" --repeat="$REP_SHARE" \
      --writers="$WRITERS" 2>>"$LOG.stderr" | tee -a "$LOG"
    "$PARTS" stop "$DIR" --clean >/dev/null 2>&1
    DIR=
  done
done
say "# done $(date -u +%FT%TZ)"
