#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan) in build/fuzz, replays every committed corpus and
# regression input, then fuzzes for SCANGATE_FUZZ_SECONDS (default 45 s) the request layer, for
# SCANGATE_FUZZ_COPY_SECONDS (default 15 s) the warm load's COPY parser and for SCANGATE_FUZZ_GS1_SECONDS
# (default 15 s) the GS1 parser. Any crash, leak, sanitizer report or check failure exits non-zero; the crashing
# input is left in build/fuzz/artifacts/ — copy it into tests/fuzz/regressions/ (fuzz_request),
# tests/fuzz/copy_corpus/ (fuzz_copy_parser) or tests/fuzz/gs1_corpus/ (fuzz_gs1) once fixed.
# Usage: tests/fuzz/run.sh [build dir]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/fuzz}
seconds=${SCANGATE_FUZZ_SECONDS:-45}
CXX=clang++ cmake -S tests/fuzz -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "${SCANGATE_JOBS:-$(nproc)}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
shopt -s nullglob

# fuzz TARGET SECONDS SEEDS WORK LOG INPUT...: replays the committed INPUTs, then fuzzes TARGET for SECONDS from
# the SEEDS dir with a work corpus WORK; any crash fails the run (the crashing input is left in $build/artifacts/).
fuzz() {
  local name=$1 fuzzer="$build/$1" secs=$2 seeds=$3 work=$4 log=$5
  shift 5
  echo "== fuzz $name: replaying committed inputs"
  "$fuzzer" -runs=0 "$@" 2>&1 | tail -n 3
  echo "== fuzz $name: ${secs} s of fuzzing"
  mkdir -p "$work" "$build/artifacts"
  "$fuzzer" -max_total_time="$secs" -max_len=4096 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$build/artifacts/" "$work" "$seeds" 2>"$log" || {
    tail -n 60 "$log"
    echo "fuzz $name: FAILED (crash input in $build/artifacts/)" >&2
    exit 1
  }
  grep -E '^(stat::|#[0-9]+ +DONE)' "$log" || true
  echo "fuzz $name: corpus size $(ls "$work" | wc -l) files"
}

# The request layer (server/http/request.h, server/http/auth.h).
fuzz fuzz_request "$seconds" tests/fuzz/corpus "$build/corpus" "$build/fuzz.log" tests/fuzz/corpus/* tests/fuzz/regressions/*
# The warm load's binary-COPY parser (storage/pg/copy_parser.h).
fuzz fuzz_copy_parser "${SCANGATE_FUZZ_COPY_SECONDS:-15}" tests/fuzz/copy_corpus "$build/copy_corpus" \
  "$build/fuzz_copy.log" tests/fuzz/copy_corpus/*
# The GS1 element-string / Digital Link parser (core/gs1.h, --keys=gs1).
fuzz fuzz_gs1 "${SCANGATE_FUZZ_GS1_SECONDS:-15}" tests/fuzz/gs1_corpus "$build/gs1_corpus" "$build/fuzz_gs1.log" \
  tests/fuzz/gs1_corpus/*
