#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs every test.
#   1. release build (GCC, Release, warnings are errors: SCANGATE_WERROR=ON), through ccache, of target
#      release_check: everything but the executables of the tests step 4 alone runs; ctest runs the tests of labels
#      unit, core, concurrency, docs and deploy (the optimised code of every unit, the binary's command line, the
#      deploy files; the optimised binary serves end to end in step 2). The storage, integration and hardening
#      tests run once, in step 4, against the sanitized code: the same tests and more checks (they took 330 s
#      here, measured)
#   2. the run command from a fresh mode-700 clone of HEAD (tests/scripts/run_test.sh); its build of the product
#      finds the release build's units in ccache
#   3. ThreadSanitizer build (clang) of core/, storage/ and server/; the filter, store and service concurrency tests
#   4. AddressSanitizer + UndefinedBehaviorSanitizer build (clang; at nice 10, beside step 3's tests, which mostly
#      wait) of everything but benchmarks, with clang's
#      thread-safety analysis (SCANGATE_THREAD_SAFETY: -Wthread-safety -Werror: a guarded member touched without
#      its lock fails the build); the whole ctest suite (unit, storage, integration, hardening) against the
#      sanitized scangate binary, but for the scripts of label `deploy` (they run no sanitized code). The
#      black-box tests' executables (service_*, dashboard_test, hardening_*: they link no product code, they start
#      scangate and talk to it over TCP) are step 1's, not built again (SCANGATE_BLACKBOX_TESTS_FROM)
#   5. libFuzzer (clang, ASan+UBSan; started beside step 3's tests, waited for at the end) over the request
#      parsing layer: replay tests/fuzz/{corpus,regressions},
#      then SCANGATE_FUZZ_SECONDS (default 35) of fuzzing; then a whole session's framing (tests/fuzz/framing_corpus,
#      SCANGATE_FUZZ_FRAMING_SECONDS, default 20, under -malloc_limit_mb); then the warm load's COPY parser
#      (tests/fuzz/copy_corpus, SCANGATE_FUZZ_COPY_SECONDS, default 10); then the GS1 parser (tests/fuzz/gs1_corpus,
#      SCANGATE_FUZZ_GS1_SECONDS, default 10): 75 s of fuzzing in all; any crash or out-of-memory fails
# Each step prints its wall time and the CPU time of its processes (user + system, all cores), and the run ends
# with a table of them. SCANGATE_SKIP_RUN=1 / SCANGATE_SKIP_ASAN=1 / SCANGATE_SKIP_FUZZ=1 skip steps 2 / 4 / 5
# (local use only; skipping 4 skips the thread-safety analysis too).
# The system suites (the package, systemd, the container image, HA, partitions under faults) are not here:
# deploy/system_test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${SCANGATE_JOBS:-$(nproc)}
# ctest's jobs: twice the cores. The integration tests mostly wait (sockets, timers, fsync); the few that keep the
# cores busy count as 3 (PROCESSORS in tests/CMakeLists.txt). The ThreadSanitizer tests run with $jobs: with twice
# as many they took as long (134 s / 136 s: store_test alone is 105-149 s), measured.
ctest_jobs=${SCANGATE_CTEST_JOBS:-$((2 * jobs))}

# step_begin NAME / step_end: the step's wall time and the CPU time (user + system) of the processes it waited
# for (this shell's cutime + cstime in /proc/$$/stat), printed and kept for the closing table. PostgreSQL
# servers detach from their starter (pg_ctl), so their CPU is not in the figure.
ticks=$(getconf CLK_TCK)
steps=()
child_cpu() { awk -v t="$ticks" '{ printf "%d", ($16 + $17) * 100 / t }' "/proc/$$/stat"; }  # centiseconds
step_begin() { step_name=$1; step_wall=$SECONDS; step_cpu=$(child_cpu); echo "== $1"; }
step_end() {
  local wall=$((SECONDS - step_wall)) cpu=$(( ($(child_cpu) - step_cpu) / 100 ))
  steps+=("$(printf '%-44s %5d s wall %6d s CPU' "$step_name" "$wall" "$cpu")")
  echo "== $step_name took $wall s (CPU $cpu s)"
}
total_wall=$SECONDS

# The build packages and the tests' (GoogleTest, Google Benchmark, clang, Chromium, ...); not the HA ones: the HA
# tests are deploy/ha_test.sh's, not ctest's.
step_begin "packages (scripts/deps.sh build test)"
bash scripts/deps.sh build test
step_end

# ccache (scripts/deps.sh test) for the release build and the run command's fresh clone (step 2), which compiles
# the product again with the same compiler and flags but -Werror (scripts/run.sh does not make warnings errors):
# ccache leaves -Werror out of the hash (CCACHE_IGNOREOPTIONS), and CCACHE_BASEDIR makes the paths relative to
# each build folder, so the clone (tests/scripts/run_test.sh clones under build/) finds what the release build
# compiled. The cache is emptied at every start: a result never comes from an earlier run (a unit cached by a
# build without -Werror could otherwise hide a warning from a later one with it). The sanitizer trees do not use
# it: nothing compiles their units twice.
release_launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_DIR=$PWD/build/ccache CCACHE_BASEDIR=$PWD CCACHE_IGNOREOPTIONS='-Werror -Wno-error=*' \
    CCACHE_MAXSIZE=4G CCACHE_NOHASHDIR=1
  rm -rf "$CCACHE_DIR"
  release_launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi

step_begin "release build"
# Release (-O3): the build type users and bench/run.sh build, and the one whose optimiser finds the most
# warnings (tests/ at SCANGATE_TEST_OPT, -O1: CMakeLists.txt); the sanitizer builds below are clang at -O1. Tests
# and benchmarks on explicitly: scripts/run.sh may have configured build/release without them. (The benchmarks
# here, not in the clang ASan tree: there they cost 82 s of CPU against 63 s at GCC -O3, measured from the ninja
# logs — bench/http's Beast servers, 60 s of it, compile slower under clang with ASan.)
# Target release_check (CMakeLists.txt), not all: what this step's tests run, the black-box test executables
# step 4 runs (SCANGATE_BLACKBOX_TESTS_FROM), the benchmarks and tests/ha's and tests/partitions' binaries
# (compiled nowhere else), the product. Left out: tests/storage's PostgreSQL tests (store_test, expiry_test,
# lookup_test, ...: no release label; step 4 builds and runs them), ~79 s of the build's 1 165 s of CPU (~40 s
# wall, from ci17's ninja log). So GCC -Werror no longer compiles those test files: clang does in step 4,
# with -Werror (and -Wthread-safety), and in step 3 for those it runs. A test of these labels whose executable
# is left out fails ("Not Run"); the PostgreSQL tests are left out only while they carry no release label.
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DSCANGATE_WERROR=ON -DSCANGATE_TESTS=ON \
  -DSCANGATE_BENCH=ON "${release_launcher[@]}" >/dev/null
cmake --build build/release -j "$jobs" --target release_check
step_end
step_begin "release tests (unit, core, concurrency, docs, deploy)"
# The rest (storage, integration, hardening) run in step 4, against the sanitized code.
ctest --test-dir build/release --output-on-failure -j "$ctest_jobs" --timeout 900 \
  -L '^(unit|core|concurrency|docs|deploy)$'  # tests/CMakeLists.txt's SCANGATE_RELEASE_LABELS
step_end

if [[ ${SCANGATE_SKIP_RUN:-0} != 1 ]]; then
  step_begin "run command from a fresh clone"
  if ((${#release_launcher[@]})); then
    CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_C_COMPILER_LAUNCHER=ccache bash tests/scripts/run_test.sh
    ccache --show-stats | grep -E '^(Cacheable calls|  Hits|  Misses)' || true
  else
    bash tests/scripts/run_test.sh
  fi
  step_end
fi

# The sanitizer builds: clang (2-7x faster than GCC 12 to compile with ASan+UBSan: measured: bench/RESULTS-history.md),
# -O1 (the sanitizers' documented level) and line tables only (what their stack traces print).
san_opt="-O1 -gline-tables-only -DNDEBUG"

step_begin "ThreadSanitizer build (core/, storage/, server/)"
# Only the concurrency tests and what they run are built: the filter's, the recent set's, core/mutex.h's, the
# store's queue and writers (store_test, against the throwaway PostgreSQL), the service's stripes and write-behind
# ordering (service_concurrency_test drives the TSan-built scangate binary, which inherits TSAN_OPTIONS; a report
# makes it exit 66 and the test fail), the journal's flusher against its appenders (journal_test), the
# single-writer metric counters under a concurrent scrape, PgClock's sequence lock (pg_clock_test), the rate
# limiter's shards, the body budget's atomic and
# the tokens' SIGHUP swap.
CC=clang CXX=clang++ cmake -S . -B build/tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$san_opt" -DSCANGATE_SANITIZE=thread -DSCANGATE_CORE_ONLY=OFF \
  -DSCANGATE_BENCH=OFF -DSCANGATE_WERROR=ON >/dev/null
cmake --build build/tsan -j "$jobs" --target filter_concurrency_test recent_set_test mutex_test store_test service_concurrency_test brin_summarizer_test expiry_test background_loop_test journal_drain_test partitioned_store_test \
  pg_clock_test journal_test server_metrics_test server_rate_limit_test server_body_budget_test server_token_store_test scangate
step_end

# The fuzzers and the ASan+UBSan build run beside the ThreadSanitizer tests, at nice 10: those tests mostly wait
# (62 s of CPU in 136 s on 2 cores, measured), so the build takes what they leave and the tests keep their pace.
# (The other way round does not pay: the ASan+UBSan tests keep both cores busy — a build beside them at nice 10
# got ~15 % of the CPU, and the tests took 635 s instead of 517 s.) The fuzzers are time-boxed
# (SCANGATE_FUZZ_*SECONDS) and single-threaded. Their output is printed, and their failure fails the run, at the
# end; the build's output is printed when it is waited for.
fuzz_pid=
fuzz_log=$PWD/build/fuzz-run.log
if [[ ${SCANGATE_SKIP_FUZZ:-0} != 1 ]]; then
  mkdir -p build
  (
    start=$SECONDS
    nice -n 10 bash tests/fuzz/run.sh build/fuzz
    echo "== libFuzzer ran $((SECONDS - start)) s beside the sanitizer steps"
  ) >"$fuzz_log" 2>&1 &
  fuzz_pid=$!
fi
asan_pid=
asan_log=$PWD/build/asan-build.log
trap 'for p in $fuzz_pid $asan_pid; do pkill -P "$p" 2>/dev/null; kill "$p" 2>/dev/null; done' EXIT
if [[ ${SCANGATE_SKIP_ASAN:-0} != 1 ]]; then
  mkdir -p build
  (
    start=$SECONDS
    # clang, with the thread-safety analysis (SCANGATE_THREAD_SAFETY: -Wthread-safety -Werror): every
    # ABSL_GUARDED_BY member sits on a core/mutex.h Mutex, so touching one without its lock held fails this build.
    CC=clang CXX=clang++ cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$san_opt" -DSCANGATE_SANITIZE=address -DSCANGATE_THREAD_SAFETY=ON \
      -DSCANGATE_BENCH=OFF -DSCANGATE_DEPLOY_TESTS=OFF -DSCANGATE_WERROR=ON \
      -DSCANGATE_BLACKBOX_TESTS_FROM="$PWD/build/release" >/dev/null
    nice -n 10 cmake --build build/asan -j "$jobs"
    echo "== the ASan+UBSan build took $((SECONDS - start)) s (beside the ThreadSanitizer tests, nice 10)"
  ) >"$asan_log" 2>&1 &
  asan_pid=$!
fi

step_begin "ThreadSanitizer tests"
# scripts/tsan.supp silences uninstrumented third-party libraries only (libpq, libpqxx, OpenSSL), never
# project code; each entry says why.
# Reports go to files (log_path), so a race inside a scangate process started by a test is not lost in
# that process's log: any report file fails the step.
tsan_logs=$PWD/build/tsan/reports
rm -rf "$tsan_logs" && mkdir -p "$tsan_logs"
tsan_rc=0
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/scripts/tsan.supp log_path=$tsan_logs/tsan" \
  ctest --test-dir build/tsan --output-on-failure -j "$jobs" --timeout 900 \
  -R '^(FilterConcurrency\..*|RecentSetConcurrency\..*|Mutex\..*|CondVar\..*|Metrics\.SingleWriterCountersUnderConcurrentScrape|store_test|store_outage_test|service_concurrency_test|brin_summarizer_test|expiry_test|BackgroundLoop\..*|journal_drain_test|journal_test|partitioned_store_test|RateLimiter\..*|BodyBudget\..*|TokenStoreTest\..*|PgClock\.ConcurrentReadersSeeWholeReadings)$' \
  || tsan_rc=$?
if compgen -G "$tsan_logs/tsan.*" >/dev/null; then
  cat "$tsan_logs"/tsan.*
  echo "== ThreadSanitizer reported the races above"
  exit 1
fi
[[ $tsan_rc == 0 ]] || exit "$tsan_rc"
step_end

if [[ ${SCANGATE_SKIP_ASAN:-0} != 1 ]]; then
  step_begin "ASan+UBSan build (+ thread-safety analysis): waiting for it"
  asan_rc=0
  wait "$asan_pid" || asan_rc=$?
  asan_pid=
  cat "$asan_log"
  if [[ $asan_rc != 0 ]]; then
    echo "== the ASan+UBSan build failed (exit $asan_rc)"
    exit "$asan_rc"
  fi
  step_end
  step_begin "ASan+UBSan tests"
  # LeakSanitizer suppressions: third-party only, each documented in scripts/lsan.supp.
  # Label `deploy` (tests/deploy: scripts over promtool and deploy/partitions.sh) runs no sanitized code: it ran
  # in the release step.
  ASAN_OPTIONS="detect_leaks=1:halt_on_error=1" \
  LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0" \
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    ctest --test-dir build/asan --output-on-failure -j "$ctest_jobs" --timeout 1200 -LE '^deploy$'
  step_end
fi

if [[ -n $fuzz_pid ]]; then
  step_begin "libFuzzer (request parsing, framing, COPY parser, GS1): waiting for it"
  fuzz_rc=0
  wait "$fuzz_pid" || fuzz_rc=$?
  fuzz_pid=
  cat "$fuzz_log"
  if [[ $fuzz_rc != 0 ]]; then
    echo "== libFuzzer failed (exit $fuzz_rc)"
    exit "$fuzz_rc"
  fi
  step_end
fi
echo "== step times"
printf '%s\n' "${steps[@]}"
echo "== all tests passed in $((SECONDS - total_wall)) s"
