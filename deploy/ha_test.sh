#!/usr/bin/env bash
# One command for the high-availability tests (issue 10): builds scangate and tests/ha, starts the local
# cluster of deploy/cluster.sh in a fresh temp folder on free ports (etcd, two Patroni/PostgreSQL 15 nodes
# in synchronous mode), runs tests/ha/ha_failover_test (switchover, postmaster kill, primary host loss, primary
# host loss onto a standby whose clock is 30 s behind, standby host loss, a scangate instance killed behind HAProxy
# in both ack modes) and tears everything down, whatever happens. Takes ~5 minutes; too heavy for scripts/test.sh.
#
#   deploy/ha_test.sh [--no-build] [gtest flags, e.g. --gtest_filter=HaPostgres.*]
#
# Output: the test log; the "ha:" lines (figures) are repeated at the end.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build/release}

if [[ ${1:-} == --no-build ]]; then
  shift
else
  # Patroni, etcd, HAProxy, and GoogleTest for tests/ha/ha_failover_test (SCANGATE_TESTS).
  "$root/deploy/build_test_binaries.sh" "$build" "build test ha" scangate ha_failover_test
fi

# A block of 30 free loopback ports (cluster.sh uses base .. base+22): deploy/free_port_block.sh.
export HA_PORT_BASE
HA_PORT_BASE=$("$root/deploy/free_port_block.sh" 30)
export HA_DIR
HA_DIR=$(mktemp -d /tmp/scangate-ha.XXXXXX)
# PrimaryHostLossOntoLaggingStandby's preload (cluster.sh node-start --clock-shift copies it into $HA_DIR).
export HA_CLOCK_SHIFT_LIB=$build/tests/clock_shift/libscangate_clock_shift.so
chmod 755 "$HA_DIR"
logs="$build/ha-logs"  # kept after the teardown: Patroni, etcd, HAProxy, PostgreSQL and test logs
cleanup() {
  "$root/deploy/cluster.sh" stop || true
  rm -rf "$logs" && mkdir -p "$logs"
  cp -r "$HA_DIR/logs" "$logs/cluster" 2>/dev/null || true
  for n in node1 node2; do cp -r "$HA_DIR/$n/data/log" "$logs/postgresql-$n" 2>/dev/null || true; done
  cp "$HA_DIR/ha_failover_test.log" "$logs/" 2>/dev/null || true
  rm -rf "$HA_DIR"
  echo "ha_test: logs in $logs" >&2
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "ha_test: cluster in $HA_DIR, ports from $HA_PORT_BASE" >&2
start=$SECONDS
"$root/deploy/cluster.sh" start
echo "ha_test: cluster up in $((SECONDS - start)) s" >&2

# The harness (tests/server/harness.h) finds its database through these files.
mkdir -p "$HA_DIR/env"
"$root/deploy/cluster.sh" url >"$HA_DIR/env/url"
echo $((HA_PORT_BASE + 2)) >"$HA_DIR/env/port"
echo "$HA_DIR/node1/data" >"$HA_DIR/env/pgdata"

log="$HA_DIR/ha_failover_test.log"
status=0
SCANGATE_TEST_PG_DIR="$HA_DIR/env" SCANGATE_SOURCE_DIR="$root" SCANGATE_BINARY_DIR="$build" \
  "$build/tests/ha/ha_failover_test" "$@" 2>&1 | tee "$log" || status=$?
echo
echo "==== figures (ha: lines) ===="
grep -E '^ha: |^\[  (PASSED|FAILED) |^\[  FAILED  \]' "$log" || true
exit "$status"
