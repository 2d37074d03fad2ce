#!/usr/bin/env bash
# bench/follow/profile_walsenders.sh — where PostgreSQL's CPU for the followers goes (issue 32): two --ack=filter
# instances following one throwaway PostgreSQL, wrk loads A with all-new keys (256 connections, 25 s), and from
# the 6th second `perf record -e cpu-clock -g` samples both walsenders for 10 s. Writes $PERF_OUT
# (default /tmp/walsenders.perf.data); read it with `perf report -i ... --no-children --sort dso,symbol`.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${PERF_OUT:-/tmp/walsenders.perf.data}
bin=$root/build/release/server/scangate
dir=$(mktemp -d /tmp/scangate-prof.XXXXXX); chmod 755 "$dir"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pg_port=$(port); a_port=$(port); b_port=$(port)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; bash "$root/scripts/pg.sh" stop "$dir/pg" >/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
bash "$root/scripts/pg.sh" start "$dir/pg" "$pg_port" >/dev/null
url=$(bash "$root/scripts/pg.sh" url "$dir/pg" "$pg_port")
for who in a b; do
  p=$a_port; [[ $who == b ]] && p=$b_port
  "$bin" --port "$p" --threads 2 --database-url "$url" --ack filter --journal-dir "$dir/j-$who" >"$dir/$who.log" 2>&1 &
  pids+=($!)
done
for p in $a_port $b_port; do for _ in $(seq 100); do curl -fs "127.0.0.1:$p/readyz" >/dev/null && break; sleep 0.1; done; done
wrk -t2 -c256 -d25s --timeout 5s -s "$root/bench/observe.lua" "http://127.0.0.1:$a_port" -- 0 0 >"$dir/wrk.log" 2>&1 &
wpid=$!
sleep 6
ws=$(pgrep -f 'postgres: walsender' | tr '\n' ',' | sed 's/,$//')
echo "walsenders: $ws"
perf record -e cpu-clock -F 999 -g -p "$ws" -o "$out" -- sleep 10 >/dev/null 2>&1 || true
wait $wpid || true
grep BENCH_SUMMARY "$dir/wrk.log" | cut -c1-120
