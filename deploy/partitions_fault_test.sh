#!/usr/bin/env bash
# One command for the exactness of the partitioned exact store under faults (issue 23, item 4): builds scangate
# and tests/partitions, starts the local cluster of deploy/partitions.sh in a fresh temp folder on free ports
# (a PL/Proxy proxy database and 4 partition servers holding 8 partitions), runs
# tests/partitions/partition_fault_test — for --ack=commit and --ack=filter: Exactness (2 instances, fresh keys
# and 25 % repeats, ~20 s; every key new once, every row on the partition its hash names, no digest on two
# partitions) and KillOnePartitionServer (kill -9 of server 1's postmaster for 5 s under load: only its
# partitions' keys get retryable 503s, the others keep being answered, nothing acknowledged lost) — and tears
# everything down, whatever happens. Takes ~2.5 minutes after the build; too heavy for scripts/test.sh.
#
#   deploy/partitions_fault_test.sh [--no-build] [gtest flags, e.g. --gtest_filter='*Kill*commit']
#
# Output: the test log; the "partitions:" lines (figures) are repeated at the end. Logs (PostgreSQL's, the
# test's, the map) are kept in build/release/partitions-logs/; a recorded run: deploy/results/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build/release}

if [[ ${1:-} == --no-build ]]; then
  shift
else
  # GoogleTest (SCANGATE_TESTS) and PL/Proxy for the proxy database of deploy/partitions.sh.
  "$root/deploy/build_test_binaries.sh" "$build" "build test partitions" scangate partition_fault_test
fi

# 5 consecutive free loopback ports (proxy + 4 servers), and room to spare: deploy/free_port_block.sh.
port_base=$("$root/deploy/free_port_block.sh" 10)
dir=$(mktemp -d /tmp/scangate-partitions.XXXXXX)
chmod 755 "$dir"
logs="$build/partitions-logs"  # kept after the teardown
cleanup() {
  "$root/deploy/partitions.sh" stop "$dir" || true
  rm -rf "$logs" && mkdir -p "$logs"
  cp "$dir"/map "$dir"/servers "$dir"/proxy_url "$logs/" 2>/dev/null || true
  for d in "$dir"/proxy "$dir"/s*; do
    [[ -d $d/data ]] || continue
    cp "$d/data/server.log" "$logs/postgresql-$(basename "$d").log" 2>/dev/null || true
    cp -r "$d/data/log" "$logs/postgresql-$(basename "$d")" 2>/dev/null || true
  done
  cp "$dir/partition_fault_test.log" "$logs/" 2>/dev/null || true
  rm -rf "$dir"
  echo "partitions_fault_test: logs in $logs" >&2
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "partitions_fault_test: cluster in $dir, ports from $port_base" >&2
start=$SECONDS
"$root/deploy/partitions.sh" start "$dir" --servers 4 --partitions 8 --port "$port_base" >/dev/null
echo "partitions_fault_test: cluster up in $((SECONDS - start)) s" >&2
"$root/deploy/partitions.sh" status "$dir" >&2

# The harness (tests/server/harness.h) wants a database environment; --partitions replaces --database-url
# for the keys, and the proxy database is the natural one to name.
mkdir -p "$dir/env"
"$root/deploy/partitions.sh" url "$dir" >"$dir/env/url"
echo "$port_base" >"$dir/env/port"
echo "$dir/proxy/data" >"$dir/env/pgdata"

log="$dir/partition_fault_test.log"
status=0
SCANGATE_PARTITIONS_DIR="$dir" SCANGATE_TEST_PG_DIR="$dir/env" SCANGATE_SOURCE_DIR="$root" \
  SCANGATE_BINARY_DIR="$build" "$build/tests/partitions/partition_fault_test" "$@" 2>&1 | tee "$log" ||
  status=$?
echo
echo "==== figures (partitions: lines) ===="
grep -E '^partitions: |^\[  (PASSED|FAILED) |^\[  FAILED  \]' "$log" || true
exit "$status"
