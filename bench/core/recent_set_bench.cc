// Micro-benchmarks of core/recent_set.h: memory per key in steady state (heap bytes from mallinfo2 after
// filling the set many times over its bound, so both generations of every shard are full) and the cost of a
// hit, a miss and an insert. The README's memory formula for --recent-keys comes from BM_RecentSetMemory.
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <cstring>
#include <memory>
#include <vector>

#include "core/recent_set.h"
#include "tests/core/counter_digest.h"

namespace scangate {
namespace {

Digest DigestOf(std::uint64_t n, std::uint64_t salt = 0) { return test_support::CounterDigest(n, salt); }

// Every entry holds a request's record (a till sending an Idempotency-Key with every scan): the layout is fixed,
// so the figure is the same without one.
Recorder RecorderOf(std::uint64_t i) {
  RequestRecord r{};
  std::memcpy(r.data(), &i, sizeof i);
  return Recorder::Of(r);
}

std::size_t HeapBytes() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;  // in use from the arenas + mmapped blocks
}

// Arg: --recent-keys. Fills with 3 x the bound (every shard rotated, both generations full at the end).
void BM_RecentSetMemory(benchmark::State& state) {
  const auto capacity = static_cast<std::uint64_t>(state.range(0));
  for (auto _ : state) {
    const std::size_t before = HeapBytes();
    auto s = std::make_unique<RecentSet>(capacity);
    const std::uint64_t n = 3 * s->bound();
    for (std::uint64_t i = 0; i < n; ++i) {
      s->InsertConcurrently(DigestOf(i), static_cast<std::int64_t>(i), RecorderOf(i));
    }
    const std::size_t after = HeapBytes();
    state.counters["keys_held"] = static_cast<double>(s->size());
    state.counters["bound"] = static_cast<double>(s->bound());
    state.counters["shards"] = s->shards();
    state.counters["heap_MB"] = static_cast<double>(after - before) / 1e6;
    state.counters["bytes_per_key_of_capacity"] = static_cast<double>(after - before) / static_cast<double>(capacity);
    state.counters["bytes_per_key_held"] = static_cast<double>(after - before) / static_cast<double>(s->size());
  }
}
BENCHMARK(BM_RecentSetMemory)->Arg(65'536)->Arg(1'048'576)->Arg(4'194'304)->Iterations(1)->Unit(benchmark::kMillisecond);

// Lookups of held keys (hits), of keys never inserted (misses), and inserts of fresh keys into a full set
// (rotations amortised), at the default --recent-keys.
constexpr std::uint64_t kDefaultKeys = 1'048'576;
RecentSet& Full() {
  static std::unique_ptr<RecentSet> s = [] {
    auto set = std::make_unique<RecentSet>(kDefaultKeys);
    for (std::uint64_t i = 0; i < kDefaultKeys / 2; ++i) set->InsertConcurrently(DigestOf(i), 1, RecorderOf(i));
    return set;
  }();
  return *s;
}

void BM_RecentSetFindHit(benchmark::State& state) {
  RecentSet& s = Full();
  std::uint64_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(s.FindConcurrently(DigestOf(i++ % (kDefaultKeys / 2))));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RecentSetFindHit)->Threads(1)->Threads(2)->UseRealTime();

void BM_RecentSetFindMiss(benchmark::State& state) {
  RecentSet& s = Full();
  std::uint64_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(s.FindConcurrently(DigestOf(i++, 77)));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RecentSetFindMiss)->Threads(1)->Threads(2)->UseRealTime();

void BM_RecentSetInsert(benchmark::State& state) {
  RecentSet s(kDefaultKeys);
  std::uint64_t i = 0;
  for (auto _ : state) {
    s.InsertConcurrently(DigestOf(i, 5), 1, RecorderOf(i));
    ++i;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RecentSetInsert);

}  // namespace
}  // namespace scangate

BENCHMARK_MAIN();
