#!/usr/bin/env bash
# bench/clock_step/side_by_side.sh MODE BIN... — bench/cpu_per_request.sh MODE 256 10 for every binary, three rounds,
# each round in another order (the first cell of a round reads slower while the machine settles: a fixed order
# biases the comparison). Needs SG_URL (and SG_TRUNCATE=1 to compare like with like), as cpu_per_request.sh.
set -euo pipefail
MODE=${1:?MODE}; shift
(($# > 0)) || { echo "usage: $0 MODE BIN..." >&2; exit 2; }
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bins=("$@")
n=${#bins[@]}
for round in 0 1 2; do
  for ((i = 0; i < n; i++)); do
    if ((round == 1)); then j=$((n - 1 - i)); else j=$(((i + round) % n)); fi
    echo "== round $((round + 1)) ${bins[$j]}"
    nice -n -10 "$ROOT/bench/cpu_per_request.sh" "${bins[$j]}" "$MODE" 256 10
  done
done
