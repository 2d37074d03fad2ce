#!/usr/bin/env bash
# bench/follow/run.sh — the follower's window and lag (issue 32), two --ack=filter instances on one throwaway
# PostgreSQL: bench/follow/window.py idle, then again while wrk loads instance A with all-new keys (256
# connections, BENCH_LOAD_S seconds). Prints window.py's lines for both. Needs build/release/server/scangate.
# BENCH_MAX_COMMIT_LAG: both instances' --max-commit-lag (default 1s; 0 = unbounded, the behaviour before it).
# BENCH_FOLLOW: both instances' --follow (default on = poll; logical).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${SCANGATE_BIN:-$root/build/release/server/scangate}
dir=$(mktemp -d /tmp/scangate-follow-bench.XXXXXX)
chmod 755 "$dir"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pg_port=$(port); a_port=$(port); b_port=$(port)
cleanup() {
  kill "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  bash "$root/scripts/pg.sh" stop "$dir/pg" || true
  rm -rf "$dir"
}
pids=()
trap cleanup EXIT
bash "$root/scripts/pg.sh" start "$dir/pg" "$pg_port"
url=$(bash "$root/scripts/pg.sh" url "$dir/pg" "$pg_port")
for who in a b; do
  p=$a_port; [[ $who == b ]] && p=$b_port
  "$bin" --port "$p" --threads 2 --database-url "$url" --ack filter --journal-dir "$dir/j-$who" \
    --max-commit-lag "${BENCH_MAX_COMMIT_LAG:-1s}" --follow "${BENCH_FOLLOW:-on}" >"$dir/$who.log" 2>&1 &
  pids+=($!)
done
for p in $a_port $b_port; do
  for _ in $(seq 100); do curl -fs "127.0.0.1:$p/readyz" >/dev/null && break; sleep 0.1; done
done
echo "== idle"
python3 "$root/bench/follow/window.py" "$a_port" "$b_port" "${BENCH_KEYS:-200}"
echo "== while wrk loads A (256 connections, all-new)"
wrk -t2 -c256 -d"${BENCH_LOAD_S:-60}"s --timeout 5s -s "$root/bench/observe.lua" "http://127.0.0.1:$a_port" -- 0 0 \
  >"$dir/wrk.log" 2>&1 &
wrk_pid=$!
sleep 2
python3 "$root/bench/follow/window.py" "$a_port" "$b_port" "${BENCH_KEYS:-100}"
wait "$wrk_pid" || true
grep '^BENCH_SUMMARY' "$dir/wrk.log" | sed 's/^/wrk: /'
# A's side of the window: its new keys decided in PostgreSQL because its journal's oldest uncommitted record was
# older than --max-commit-lag, and its journal records (the fast path).
curl -fs "127.0.0.1:$a_port/stats" | python3 -c '
import json, sys
s = json.load(sys.stdin)
print("A: journal records %d, commit_lag_fallbacks %d, follower fallbacks %d" % (
    s["journal"]["records"], s["follower"]["commit_lag_fallbacks"], s["follower"]["fallbacks"]))'

