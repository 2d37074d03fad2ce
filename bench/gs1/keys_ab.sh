#!/usr/bin/env bash
# bench/gs1/keys_ab.sh — issue 24's end-to-end cell: the same GS1 DataMatrix strings (bench/observe.lua with
# BENCH_KEYS=gs1: ]d2 01 <GTIN> 17 <expiry> 10 <lot> <GS> 21 <serial>, all new) against --keys=raw (the string
# is the key) and --keys=gs1 (parsed, the pack's identity is the key, lot and expiry recorded), side by side in
# both ack modes, alternating, REPS times (default 3), each cell bench/cpu_per_request.sh BIN MODE 256 SECONDS
# (default 10) on an emptied table.
#   SG_URL=postgresql://... bench/gs1/keys_ab.sh [BIN]
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=${1:-$ROOT/build/release/server/scangate}
: "${SG_URL:?set SG_URL (scripts/pg.sh start DIR PORT; scripts/pg.sh url DIR PORT)}"
export SG_TRUNCATE=1 BENCH_KEYS=gs1
for rep in $(seq "${REPS:-3}"); do
  for mode in commit filter; do
    for keys in raw gs1; do
      echo "== rep=$rep mode=$mode keys=$keys repeat=0"
      SG_EXTRA="--keys=$keys" REPEAT=0 "$ROOT/bench/cpu_per_request.sh" "$BIN" "$mode" 256 "${SECONDS_PER_CELL:-10}"
    done
  done
done
