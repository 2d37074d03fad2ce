// core/epoch_summary.h: the false-positive rate by bits per key (the default's choice: bench/RESULTS.md "Epoch
// summaries"), and the costs of a probe (a hit, a miss; summaries bigger than the caches), a build, and the
// Serialize/Parse round trip an instance pays per closed epoch at start.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

#include "core/epoch_summary.h"
#include "tests/core/counter_digest.h"

namespace scangate {
namespace {

using test_support::CounterDigest;

// One summary at design load (1 M keys) per bits-per-key setting (Arg: tenths of a bit); 10 M absent digests
// queried. Counters: the measured FP rate, EstimatedFpRate() from the summary's bits, the probes GeometryFor chose
// and the bytes per key serialized.
void BM_EpochSummaryFp(benchmark::State& state) {
  const double bpk = static_cast<double>(state.range(0)) / 10;
  constexpr std::uint64_t kKeys = 1'000'000, kQueries = 10'000'000;
  for (auto _ : state) {
    EpochSummary s = EpochSummary::ForKeys(kKeys, bpk);
    for (std::uint64_t i = 0; i < kKeys; ++i) s.Add(CounterDigest(i, 1));
    std::uint64_t fp = 0;
    for (std::uint64_t i = 0; i < kQueries; ++i) fp += s.MayContain(CounterDigest(i, 2));
    state.counters["fp_pct"] = 100.0 * static_cast<double>(fp) / kQueries;
    state.counters["est_fp_pct"] = 100.0 * s.EstimatedFpRate();
    state.counters["probes"] = s.probes();
    state.counters["bytes_per_key"] = static_cast<double>(s.bytes()) / kKeys;
  }
}
BENCHMARK(BM_EpochSummaryFp)->DenseRange(100, 200, 10)->Iterations(1)->Unit(benchmark::kMillisecond);

// A probe against a summary of Arg keys at the default geometry: 1 M (2 MB, cache-resident on this machine's
// L2+L3 only in part), 24 M (48 MB: every probe a cache miss). Misses stop at the first clear bit; hits test all.
void Probe(benchmark::State& state, std::uint64_t salt) {
  const auto n = static_cast<std::uint64_t>(state.range(0));
  EpochSummary s = EpochSummary::ForKeys(n);
  for (std::uint64_t i = 0; i < n; ++i) s.Add(CounterDigest(i, 1));
  std::uint64_t i = 0, found = 0;
  for (auto _ : state) {
    found += s.MayContain(CounterDigest(i, salt));
    if (++i == n) i = 0;
  }
  benchmark::DoNotOptimize(found);
}
void BM_EpochSummaryMiss(benchmark::State& state) { Probe(state, 2); }
void BM_EpochSummaryHit(benchmark::State& state) { Probe(state, 1); }
BENCHMARK(BM_EpochSummaryMiss)->Arg(1'000'000)->Arg(24'000'000);
BENCHMARK(BM_EpochSummaryHit)->Arg(1'000'000)->Arg(24'000'000);

// The build of a summary of Arg keys: per key added.
void BM_EpochSummaryAdd(benchmark::State& state) {
  const auto n = static_cast<std::uint64_t>(state.range(0));
  EpochSummary s = EpochSummary::ForKeys(n);
  std::uint64_t i = 0;
  for (auto _ : state) s.Add(CounterDigest(i++, 1));
}
BENCHMARK(BM_EpochSummaryAdd)->Arg(24'000'000);

// Serialize (SHA-256 of the lines) and Parse (copy, SHA-256 check) of a 3 M-key summary (6 MB): bytes per second.
void BM_EpochSummaryRoundTrip(benchmark::State& state) {
  EpochSummary s = EpochSummary::ForKeys(3'000'000);
  for (std::uint64_t i = 0; i < 3'000'000; ++i) s.Add(CounterDigest(i, 1));
  for (auto _ : state) {
    const std::string bytes = s.Serialize();
    auto back = EpochSummary::Parse(bytes);
    benchmark::DoNotOptimize(back);
    state.SetBytesProcessed(state.bytes_processed() + static_cast<std::int64_t>(bytes.size()));
  }
}
BENCHMARK(BM_EpochSummaryRoundTrip)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace scangate

BENCHMARK_MAIN();
