#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan) in build/fuzz, replays every committed corpus and
# regression input, then fuzzes for SCANGATE_FUZZ_SECONDS (default 35 s) the request layer, for
# SCANGATE_FUZZ_FRAMING_SECONDS (default 20 s) a whole session's framing (request line, headers, chunked bodies with
# extensions and trailers, pipelining, PROXY v2), for SCANGATE_FUZZ_COPY_SECONDS (default 10 s) the warm load's COPY
# parser and for SCANGATE_FUZZ_GS1_SECONDS (default 10 s) the GS1 parser: 75 s in all, as before the framing target
# (issue 43) took 20 s from the others. Every target runs under a memory limit (-rss_limit_mb; the framing target
# also -malloc_limit_mb: no single allocation past 8 MB, where its largest legitimate one is a 1 MiB batch body).
# Any crash, leak, out-of-memory, sanitizer report or check failure exits non-zero; the crashing input is left in
# build/fuzz/artifacts/ — copy it into tests/fuzz/regressions/ (fuzz_request), tests/fuzz/framing_corpus/
# (fuzz_framing), tests/fuzz/copy_corpus/ (fuzz_copy_parser) or tests/fuzz/gs1_corpus/ (fuzz_gs1) once fixed.
# Usage: tests/fuzz/run.sh [build dir]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/fuzz}
seconds=${SCANGATE_FUZZ_SECONDS:-35}
CXX=clang++ cmake -S tests/fuzz -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "${SCANGATE_JOBS:-$(nproc)}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
shopt -s nullglob

# fuzz TARGET SECONDS SEEDS WORK LOG LIMITS INPUT...: replays the committed INPUTs, then fuzzes TARGET for SECONDS
# from the SEEDS dir with a work corpus WORK and libFuzzer's LIMITS (input length, memory); any crash fails the run
# (the crashing input is left in $build/artifacts/).
fuzz() {
  local name=$1 fuzzer="$build/$1" secs=$2 seeds=$3 work=$4 log=$5 limits=$6
  shift 6
  echo "== fuzz $name: replaying committed inputs"
  # shellcheck disable=SC2086 # LIMITS is a list of options
  "$fuzzer" -runs=0 $limits "$@" 2>&1 | tail -n 3
  echo "== fuzz $name: ${secs} s of fuzzing"
  mkdir -p "$work" "$build/artifacts"
  # shellcheck disable=SC2086
  "$fuzzer" -max_total_time="$secs" $limits -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$build/artifacts/" "$work" "$seeds" 2>"$log" || {
    tail -n 60 "$log"
    echo "fuzz $name: FAILED (crash input in $build/artifacts/)" >&2
    exit 1
  }
  grep -E '^(stat::|#[0-9]+ +DONE)' "$log" || true
  echo "fuzz $name: corpus size $(ls "$work" | wc -l) files"
}

limits="-max_len=4096 -rss_limit_mb=2048"
# The request layer (server/http/request.h, server/http/auth.h).
fuzz fuzz_request "$seconds" tests/fuzz/corpus "$build/corpus" "$build/fuzz.log" "$limits" \
  tests/fuzz/corpus/* tests/fuzz/regressions/*
# A whole session's framing (server/http/request_parser.h, the session's bounded read buffer, PROXY v2): inputs up
# to 32 KiB, so that a chunk-size line or trailer section can outgrow the 8 KiB buffer.
fuzz fuzz_framing "${SCANGATE_FUZZ_FRAMING_SECONDS:-20}" tests/fuzz/framing_corpus "$build/framing_corpus" \
  "$build/fuzz_framing.log" "-max_len=32768 -rss_limit_mb=1024 -malloc_limit_mb=8" tests/fuzz/framing_corpus/*
# The warm load's binary-COPY parser (storage/pg/copy_parser.h).
fuzz fuzz_copy_parser "${SCANGATE_FUZZ_COPY_SECONDS:-10}" tests/fuzz/copy_corpus "$build/copy_corpus" \
  "$build/fuzz_copy.log" "$limits" tests/fuzz/copy_corpus/*
# The GS1 element-string / Digital Link parser (core/gs1.h, --keys=gs1).
fuzz fuzz_gs1 "${SCANGATE_FUZZ_GS1_SECONDS:-10}" tests/fuzz/gs1_corpus "$build/gs1_corpus" "$build/fuzz_gs1.log" \
  "$limits" tests/fuzz/gs1_corpus/*
