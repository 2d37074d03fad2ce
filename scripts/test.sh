#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs every test.
#   1. release build (RelWithDebInfo) of everything; ctest runs unit, storage and integration tests
#      (the integration tests start their own throwaway PostgreSQL)
#   2. ThreadSanitizer build of core/ and its concurrency tests
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh

jobs=${SCANGATE_JOBS:-$(nproc)}
echo "== release build"
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build/release -j "$jobs"
echo "== release tests"
ctest --test-dir build/release --output-on-failure -j "$jobs" --timeout 900

echo "== ThreadSanitizer build of core/"
cmake -S . -B build/tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSCANGATE_SANITIZE=thread \
  -DSCANGATE_CORE_ONLY=ON -DSCANGATE_BENCH=OFF >/dev/null
cmake --build build/tsan -j "$jobs"
echo "== ThreadSanitizer tests"
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
  ctest --test-dir build/tsan --output-on-failure -j "$jobs" --timeout 900
echo "== all tests passed"
