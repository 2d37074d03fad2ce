#!/usr/bin/env bash
# Installs a test runner's packages and builds its binaries in a release tree with the tests on (ccache when
# present). Used by deploy/ha_test.sh and deploy/partitions_fault_test.sh.
#   deploy/build_test_binaries.sh BUILD_DIR "DEPS SETS" TARGET...
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: build_test_binaries.sh BUILD_DIR "DEPS SETS" TARGET...}
sets=${2:?deps sets}
shift 2
# shellcheck disable=SC2086  # the sets are words
bash "$root/scripts/deps.sh" $sets
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSCANGATE_TESTS=ON "${launcher[@]}" >/dev/null
cmake --build "$build" -j2 --target "$@"
