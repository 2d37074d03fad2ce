#!/usr/bin/env bash
# bench/follow/idle_cost.sh — what the peers' watermark costs PostgreSQL when nothing else happens (issue 42): two
# --ack=filter instances following each other on a throwaway PostgreSQL, idle for IDLE_S (30) seconds; prints the
# CPU seconds PostgreSQL's processes used meanwhile (their utime + stime from /proc), for each binary of BINS
# (default: build/release/server/scangate; e.g. BINS="build/base/server/scangate build/release/server/scangate" for
# the binary before the watermark beside it). The per-key cost under load is that figure divided by the keys per second.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bins=${BINS:-$root/build/release/server/scangate}
idle=${IDLE_S:-30}
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pg_cpu() {  # CPU seconds of every process of the cluster whose data dir is $1
  local ticks total=0 pid
  ticks=$(getconf CLK_TCK)
  for pid in $(pgrep -f "postgres.*$1" || true) $(pgrep -P "$(head -1 "$1/postmaster.pid")" || true); do
    [[ -r /proc/$pid/stat ]] || continue
    total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat")))
  done
  awk -v t="$total" -v k="$ticks" 'BEGIN{printf "%.2f", t / k}'
}
for bin in $bins; do
  dir=$(mktemp -d /tmp/scangate-idle-cost.XXXXXX)
  chmod 755 "$dir"
  pg_port=$(port)
  bash "$root/scripts/pg.sh" start "$dir/pg" "$pg_port" >/dev/null
  url=$(bash "$root/scripts/pg.sh" url "$dir/pg" "$pg_port")
  pids=()
  for who in a b; do
    flags=(--port "$(port)" --threads 1 --database-url "$url" --ack filter --journal-dir "$dir/j-$who")
    "$bin" "${flags[@]}" >"$dir/$who.log" 2>&1 &
    pids+=($!)
  done
  sleep 5
  before=$(pg_cpu "$dir/pg")
  sleep "$idle"
  after=$(pg_cpu "$dir/pg")
  kill "${pids[@]}"; wait "${pids[@]}" 2>/dev/null || true
  bash "$root/scripts/pg.sh" stop "$dir/pg" >/dev/null || true
  cpu=$(awk -v a="$after" -v b="$before" 'BEGIN{printf "%.2f", a - b}')
  echo "$bin: PostgreSQL CPU $cpu s over $idle s idle (two instances)"
  rm -rf "$dir"
done
