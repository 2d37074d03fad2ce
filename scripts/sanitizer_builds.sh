#!/usr/bin/env bash
# The test command's two sanitizer builds, one after the other: ThreadSanitizer (build/tsan: the concurrency tests and
# what they run), then AddressSanitizer + UndefinedBehaviorSanitizer (build/asan: everything but the benchmarks, with
# clang's thread-safety analysis), unless SCANGATE_SKIP_ASAN=1.
#   scripts/sanitizer_builds.sh STATUS_DIR
# For each tree it writes STATUS_DIR/<tree>.log (the build's output), then STATUS_DIR/<tree>.done: the exit status,
# the wall seconds and the CPU seconds (user + system, all cores) of the build, on one line, written whole (mv), so
# a reader that sees the file sees all of it. scripts/test.sh starts it beside the release tests at the lowest
# priority and waits for each .done file before that tree's tests; it stops at the first failed build.
set -uo pipefail
cd "$(dirname "$0")/.." || exit
status=$1
jobs=${SCANGATE_JOBS:-$(nproc)}
ticks=$(getconf CLK_TCK)
child_cpu() { awk -v t="$ticks" '{ printf "%d", ($16 + $17) * 100 / t }' "/proc/$$/stat"; }  # centiseconds

# The sanitizer builds: clang (2-7x faster than GCC 12 to compile with ASan+UBSan: measured:
# bench/RESULTS-history.md), -O1 (the sanitizers' documented level) and line tables only (what their stack traces
# print).
san_opt="-O1 -gline-tables-only -DNDEBUG"

# ThreadSanitizer: only the concurrency tests and what they run are built: the filter's, the recent set's,
# core/mutex.h's, the store's queue and writers (store_test, against the throwaway PostgreSQL), the service's stripes
# and write-behind ordering (service_concurrency_test drives the TSan-built scangate binary, which inherits
# TSAN_OPTIONS; a report makes it exit 66 and the test fail), the journal's flusher against its appenders
# (journal_test), the single-writer metric counters under a concurrent scrape, PgClock's sequence lock
# (pg_clock_test), the rate limiter's shards, the body budget's atomic and the tokens' SIGHUP swap.
build_tsan() {
  CC=clang CXX=clang++ cmake -S . -B build/tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$san_opt" -DSCANGATE_SANITIZE=thread -DSCANGATE_CORE_ONLY=OFF \
    -DSCANGATE_BENCH=OFF -DSCANGATE_WERROR=ON >/dev/null &&
    cmake --build build/tsan -j "$jobs" --target filter_concurrency_test recent_set_test mutex_test store_test \
      service_concurrency_test brin_summarizer_test expiry_test background_loop_test journal_drain_test \
      partitioned_store_test pg_clock_test journal_test server_metrics_test server_rate_limit_test \
      server_body_budget_test server_token_store_test scangate
}

# ASan+UBSan, with the thread-safety analysis (SCANGATE_THREAD_SAFETY: -Wthread-safety -Werror): every
# ABSL_GUARDED_BY member sits on a core/mutex.h Mutex, so touching one without its lock held fails this build.
# Label `deploy` (tests/deploy) runs no sanitized code, so its tests are not configured (SCANGATE_DEPLOY_TESTS=OFF).
build_asan() {
  CC=clang CXX=clang++ cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$san_opt" -DSCANGATE_SANITIZE=address -DSCANGATE_THREAD_SAFETY=ON \
    -DSCANGATE_BENCH=OFF -DSCANGATE_DEPLOY_TESTS=OFF -DSCANGATE_WERROR=ON >/dev/null &&
    cmake --build build/asan -j "$jobs"
}

trees=(tsan)
[[ ${SCANGATE_SKIP_ASAN:-0} == 1 ]] || trees+=(asan)
for tree in "${trees[@]}"; do
  start=$SECONDS cpu=$(child_cpu) rc=0
  "build_$tree" >"$status/$tree.log" 2>&1 || rc=$?
  echo "$rc $((SECONDS - start)) $((($(child_cpu) - cpu) / 100))" >"$status/$tree.done.tmp"
  mv "$status/$tree.done.tmp" "$status/$tree.done"
  ((rc == 0)) || exit "$rc"
done
