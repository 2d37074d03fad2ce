#!/usr/bin/env bash
# Tests deploy/partitions.sh and sql/proxy/001_scangate_proxy.sql together: a local partitioned store of 2
# servers and 4 partitions in a fresh folder under /tmp, written and read only through the PL/Proxy database.
#   - 200 distinct digests (SHA-256 of test strings, each given twice in the batch) are inserted exactly once;
#     the same batch again answers every one as a duplicate with its first first_seen;
#   - every row lies on the partition its hash names, computed here independently (bytes 4..7 big-endian,
#     & 3), every partition holds some, no digest lies on two partitions, scangate_count() sums to 200;
#   - scangate_lookup finds a present key and no absent one;
#   - kill-server / start-server: while server 0 is down its partitions' keys fail and server 1's are answered;
#     afterwards all are answered again;
#   - move (fenced) of partition 0 to server 1: a proxy session open across it keeps finding the partition's
#     keys (PL/Proxy follows ALTER SERVER), the old copy is gone, no row lost;
#   - stop leaves no PostgreSQL process of the folder, and stop --clean removes it.
#   tests/deploy/partitions_test.sh [source dir]     (ctest: partitions_test)
# Needs postgresql-15 and postgresql-15-plproxy (scripts/deps.sh installs them; partitions.sh start checks).
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
script=$root/deploy/partitions.sh
PGBIN=/usr/lib/postgresql/15/bin

fail() { echo "partitions_test: FAIL: $*" >&2; exit 1; }
dir=$(mktemp -d /tmp/scangate-partitions-test.XXXXXX)
work=$(mktemp -d)
trap '"$script" stop "$dir" --clean || true; rm -rf "$work"' EXIT

echo "== start: 2 servers, 4 partitions in $dir"
"$script" start "$dir" --servers 2 --partitions 4 >/dev/null
[[ $(wc -l <"$dir/map") -eq 4 ]] || fail "DIR/map has $(wc -l <"$dir/map") lines, expected 4"
[[ $(wc -l <"$dir/servers") -eq 2 ]] || fail "DIR/servers has $(wc -l <"$dir/servers") lines, expected 2"
url=$("$script" url "$dir")
proxy() { "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -tA "$url" -c "$1"; }
on_partition() {  # K SQL: runs SQL on partition K's database, found through DIR/map
  local port
  port=$(awk -v k="$1" '$1 == k {print $3}' "$dir/map")
  "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -tA -h 127.0.0.1 -p "$port" -U postgres -d "scangate_p$1" -c "$2"
}

# The keys: 'partitions_test key 1' .. 200, each twice in the batch (a digest given twice counts once).
batch="(SELECT array_agg(sha256(convert_to('partitions_test key ' || (g % 200 + 1), 'UTF8')) ORDER BY g)
          FROM generate_series(0, 399) g),
        (SELECT array_agg('partitions_test'::text) FROM generate_series(0, 399)),
        (SELECT array_agg(0::int8) FROM generate_series(0, 399)), 0"
echo "== scangate_observe through the proxy"
first=$(proxy "SELECT count(*) FILTER (WHERE inserted), count(*), sum(first_seen_us % 1000000) FROM scangate_observe($batch)")
IFS='|' read -r inserted rows seen1 <<<"$first"
[[ $inserted == 200 && $rows == 200 ]] || fail "first batch: $inserted inserted of $rows rows, expected 200 of 200"
again=$(proxy "SELECT count(*) FILTER (WHERE inserted), count(*), sum(first_seen_us % 1000000) FROM scangate_observe($batch)")
IFS='|' read -r inserted rows seen2 <<<"$again"
[[ $inserted == 0 && $rows == 200 ]] || fail "repeated batch: $inserted inserted of $rows rows, expected 0 of 200"
[[ $seen1 == "$seen2" ]] || fail "repeated batch: first_seen changed ($seen1 -> $seen2)"

echo "== placement on the partitions"
python3 - >"$work/expected" <<'PY'
import hashlib
for i in range(1, 201):
    d = hashlib.sha256(f"partitions_test key {i}".encode()).digest()
    print(int.from_bytes(d[4:8], "big") & 3, d[:16].hex())  # the stored form (sql/013: the first 16 bytes)
PY
: >"$work/actual"
for k in 0 1 2 3; do
  misplaced=$(on_partition "$k" "SELECT count(*) FROM scan_keys WHERE scangate_partition_hash(uuid_send(digest)) & 3 <> $k")
  [[ $misplaced == 0 ]] || fail "partition $k holds $misplaced rows whose scangate_partition_hash names another"
  on_partition "$k" "SELECT encode(uuid_send(digest), 'hex') FROM scan_keys" | sed "s/^/$k /" >>"$work/actual"
  n=$(grep -c "^$k " "$work/actual" || true)
  ((n > 0)) || fail "partition $k holds no row (the batch was not split)"
  echo "partition $k: $n rows"
done
dups=$(awk '{print $2}' "$work/actual" | sort | uniq -d)
[[ -z $dups ]] || fail "digests on two partitions: $dups"
if ! diff <(sort "$work/expected") <(sort "$work/actual") >"$work/diff"; then
  fail "rows are not where bytes 4..7 & 3 of their digest say (expected < > actual):
$(head -20 "$work/diff")"
fi
total=$(proxy "SELECT sum(keys) || '|' || count(*) FROM scangate_count()")
[[ $total == "200|4" ]] || fail "scangate_count(): sum|partitions = $total, expected 200|4"

echo "== scangate_lookup"
key() { echo "sha256(convert_to('partitions_test key $1', 'UTF8'))"; }
found=$(proxy "SELECT count(*) FROM scangate_lookup($(key 7)) WHERE digest = $(key 7) AND source = 'partitions_test'")
[[ $found == 1 ]] || fail "scangate_lookup of a present key: $found rows, expected 1"
found=$(proxy "SELECT count(*) FROM scangate_lookup($(key 201))")
[[ $found == 0 ]] || fail "scangate_lookup of an absent key: $found rows, expected 0"

echo "== kill-server 0 / start-server 0"
# A present key per server: its partition from the expected placement, its server from DIR/map.
key_on_server() {
  local i k
  for ((i = 1; i <= 200; i++)); do
    k=$(python3 -c "import hashlib,sys; d=hashlib.sha256(sys.argv[1].encode()).digest(); print(int.from_bytes(d[4:8],'big') & 3)" "partitions_test key $i")
    [[ $(awk -v k="$k" '$1 == k {print $2}' "$dir/map") == "$1" ]] && { echo "$i"; return; }
  done
  fail "no key on server $1"
}
k0=$(key_on_server 0) k1=$(key_on_server 1)
"$script" kill-server "$dir" 0 2>/dev/null
sleep 0.5
if proxy "SELECT count(*) FROM scangate_lookup($(key "$k0"))" >/dev/null 2>&1; then
  fail "a key of server 0 was answered while server 0 was killed"
fi
[[ $(proxy "SELECT count(*) FROM scangate_lookup($(key "$k1"))") == 1 ]] ||
  fail "a key of server 1 was not answered while only server 0 was down"
"$script" start-server "$dir" 0 2>/dev/null
[[ $(proxy "SELECT count(*) FROM scangate_lookup($(key "$k0"))") == 1 ]] ||
  fail "a key of server 0 was not answered after start-server"
[[ $(proxy "SELECT sum(keys) FROM scangate_count()") == 200 ]] || fail "rows lost across kill -9 / restart"

echo "== move partition 0 to server 1, one proxy session across the move"
from=$(awk '$1 == 0 {print $3}' "$dir/map")
k_p0=$(awk '$1 == 0 {print NR; exit}' "$work/expected")  # the first key of partition 0 (line i = key i)
moved=$("$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -tA "$url" 2>&1 <<SQL
SELECT 'before', count(*) FROM scangate_lookup($(key "$k_p0"));
\\! "$script" move "$dir" 0 1 >/dev/null 2>&1 || echo MOVE-FAILED
SELECT 'after', count(*) FROM scangate_lookup($(key "$k_p0"));
SQL
) || fail "lookup across the move failed: $moved"
[[ $moved == *"before|1"*"after|1"* && $moved != *MOVE-FAILED* ]] || fail "lookup across the move: $moved"
[[ $(awk '$1 == 0 {print $2}' "$dir/map") == 1 ]] || fail "DIR/map does not put partition 0 on server 1: $(cat "$dir/map")"
[[ -z $("$PGBIN/psql" -X -tA -h 127.0.0.1 -p "$from" -U postgres -d postgres -c "SELECT datname FROM pg_database WHERE datname LIKE 'scangate_p0%'") ]] ||
  fail "the old copy of partition 0 is still on server 0"
on_partition 0 "SELECT 1" >/dev/null || fail "partition 0 not reachable where the map says"
[[ $(proxy "SELECT sum(keys) FROM scangate_count()") == 200 ]] || fail "rows lost by the move"

echo "== stop"
"$script" stop "$dir"
left=()
for p in /proc/[0-9]*; do
  cwd=$(readlink "$p/cwd" 2>/dev/null) || continue
  [[ $cwd == "$dir"/* ]] && left+=("${p#/proc/}")
done
((${#left[@]} == 0)) || fail "PostgreSQL processes of $dir left after stop: ${left[*]}"
while read -r _ port _; do
  ! "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$port" -t 1 || fail "port $port still answers after stop"
done <"$dir/servers"
"$script" stop "$dir" --clean
[[ ! -e $dir ]] || fail "stop --clean left $dir"
echo "partitions_test: PASS"
