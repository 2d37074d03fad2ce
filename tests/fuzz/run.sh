#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan) in build/fuzz, replays every committed corpus and
# regression input, then fuzzes for SCANGATE_FUZZ_SECONDS (default 45 s) the request layer and for
# SCANGATE_FUZZ_COPY_SECONDS (default 15 s) the warm load's COPY parser. Any crash, leak, sanitizer report
# or check failure exits non-zero; the crashing input is left in build/fuzz/artifacts/ — copy it into
# tests/fuzz/regressions/ once fixed. Usage: tests/fuzz/run.sh [build dir]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/fuzz}
seconds=${SCANGATE_FUZZ_SECONDS:-45}
CXX=clang++ cmake -S tests/fuzz -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "${SCANGATE_JOBS:-$(nproc)}"
fuzzer="$build/fuzz_request"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
echo "== fuzz: replaying committed corpus and regressions"
shopt -s nullglob
inputs=(tests/fuzz/corpus/* tests/fuzz/regressions/*)
"$fuzzer" -runs=0 "${inputs[@]}" 2>&1 | tail -n 3
echo "== fuzz: ${seconds} s of fuzzing"
work="$build/corpus"
mkdir -p "$work" "$build/artifacts"
"$fuzzer" -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$build/artifacts/" "$work" tests/fuzz/corpus 2>"$build/fuzz.log" || {
  tail -n 60 "$build/fuzz.log"
  echo "fuzz: FAILED (crash input in $build/artifacts/)" >&2
  exit 1
}
grep -E '^(stat::|#[0-9]+ +DONE)' "$build/fuzz.log" || true
echo "fuzz: corpus size $(ls "$work" | wc -l) files"

# The warm load's binary-COPY parser (storage/copy_parser.h): replay its seeds, then SCANGATE_FUZZ_COPY_SECONDS
# (default 15) of fuzzing; same failure handling as above.
copy_seconds=${SCANGATE_FUZZ_COPY_SECONDS:-15}
copy_fuzzer="$build/fuzz_copy_parser"
echo "== fuzz (copy parser): replaying tests/fuzz/copy_corpus"
"$copy_fuzzer" -runs=0 tests/fuzz/copy_corpus/* 2>&1 | tail -n 3
echo "== fuzz (copy parser): ${copy_seconds} s of fuzzing"
copy_work="$build/copy_corpus"
mkdir -p "$copy_work"
"$copy_fuzzer" -max_total_time="$copy_seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$build/artifacts/" "$copy_work" tests/fuzz/copy_corpus 2>"$build/fuzz_copy.log" || {
  tail -n 60 "$build/fuzz_copy.log"
  echo "fuzz (copy parser): FAILED (crash input in $build/artifacts/)" >&2
  exit 1
}
grep -E '^(stat::|#[0-9]+ +DONE)' "$build/fuzz_copy.log" || true
