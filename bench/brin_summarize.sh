#!/usr/bin/env bash
# bench/brin_summarize.sh — PostgreSQL log lines and BRIN summarization under load (storage/README.md
# "BRIN summarization"): a fresh cluster, one scangate (ack=commit), wrk all-new for SECONDS, then counts the
# "request for BRIN range summarization ... was not recorded" LOG lines and the log bytes written meanwhile,
# and prints scangate's scangate_brin_* metrics and the rows/heap pages.
#   bench/brin_summarize.sh NAME BIN PORT SECONDS      e.g. bench/brin_summarize.sh after build/release/server/scangate 55622 60
# The cluster stays in /tmp/brin-NAME (stop it with scripts/pg.sh stop /tmp/brin-NAME).
set -euo pipefail
N=${1:?NAME}; BIN=$(realpath "${2:?BIN}"); PGPORT_=${3:?PORT}; D=${4:?SECONDS}
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rm -rf "/tmp/brin-$N"; scripts/pg.sh start "/tmp/brin-$N" "$PGPORT_" >/dev/null
URL=$(scripts/pg.sh url "/tmp/brin-$N" "$PGPORT_")
P=$((20000 + RANDOM % 10000))
"$BIN" --port "$P" --threads 2 --database-url "$URL" --ack commit >"/tmp/brin-$N-server.log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null' EXIT
for _ in $(seq 100); do curl -fs "http://127.0.0.1:$P/readyz" >/dev/null && break; sleep 0.1; done
L0=$(wc -c <"/tmp/brin-$N/server.log")
BENCH_COUNT_STATUS=0 wrk -t2 -c256 -d"${D}s" --timeout 5s -s bench/observe.lua "http://127.0.0.1:$P" -- 0 0 | grep -E "Requests/sec"
L1=$(wc -c <"/tmp/brin-$N/server.log")
echo "$N: not-recorded lines: $(grep -c 'was not recorded' "/tmp/brin-$N/server.log" || true); log bytes during load: $((L1 - L0))"
curl -s "http://127.0.0.1:$P/metrics" | grep "^scangate_brin" || true
psql "$URL" -Atc "SELECT 'rows ' || count(*) || ', heap pages ' || pg_relation_size('scan_keys') / 8192 FROM scan_keys"
