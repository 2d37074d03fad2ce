// Core micro-benchmarks: digest cost, filter observe cost (L2-resident and 256 MiB filters, 1 and 2
// threads, single and batch API), one random cache-miss latency for comparison (pointer chase over a
// 256 MiB random cycle), and the measured FP table of the blocked layout against its model and the
// standard Bloom formula, and the GS1 parser's cost per key (--keys=gs1) for a few spellings of one pack.
// Figures and the commands that produced them: bench/RESULTS.md.
#include <benchmark/benchmark.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/digest.h"
#include "core/filter.h"
#include "core/gs1.h"
#include "core/time_format.h"

namespace scangate {
namespace {

constexpr std::size_t kL2FilterBytes = 512 << 10;    // both generations; the machine's L2 is 1 MiB per core
constexpr std::size_t kBigFilterBytes = 256u << 20;  // both generations
constexpr std::size_t kChaseBytes = 256u << 20;
constexpr std::size_t kHugePage = 2u << 20;
constexpr std::size_t kRing = 4096;                  // precomputed digests per thread (128 KiB)
constexpr std::size_t kBatch = 64;                   // digests per batch call

std::uint64_t SplitMix64(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Precomputed uniform digests; each pass over the ring XORs a fresh per-pass constant into every word so
// the keys stay fresh (never seen) without computing new digests inside the timed loop.
class DigestRing {
 public:
  explicit DigestRing(std::uint64_t seed) : seed_(seed), ring_(kRing) {
    for (auto& d : ring_)
      for (int w = 0; w < 4; ++w) {
        const std::uint64_t v = SplitMix64(seed_);
        std::memcpy(d.data() + 8 * w, &v, 8);
      }
    NewPass();
  }
  Digest Next() {
    Digest d = ring_[i_];
    std::uint64_t w[4];
    std::memcpy(w, d.data(), 32);
    for (int j = 0; j < 4; ++j) w[j] ^= tweak_[j];
    std::memcpy(d.data(), w, 32);
    if (++i_ == kRing) {
      i_ = 0;
      NewPass();
    }
    return d;
  }

 private:
  void NewPass() {
    for (auto& t : tweak_) t = SplitMix64(seed_);
  }
  std::uint64_t seed_;
  std::vector<Digest> ring_;
  std::size_t i_ = 0;
  std::uint64_t tweak_[4] = {};
};

// Capacity that makes a filter of about `bytes` (both generations) at the default fp_target.
FilterOptions OptionsForBytes(std::size_t bytes) {
  FilterOptions o;
  o.fp_target = 0.01;
  o.shards = 64;
  o.window = std::chrono::hours(24);
  o.capacity = 1'000'000;
  const FilterGeometry g = FilterGeometry::For(o);
  o.capacity = static_cast<std::uint64_t>(double(bytes) * 8 / 2 / g.bits_per_key);
  return o;
}

ShardedFilter& FilterOfSize(int which) {
  static std::once_flag once[2];
  static std::unique_ptr<ShardedFilter> filters[2];
  std::call_once(once[which], [&] {
    filters[which] = std::make_unique<ShardedFilter>(OptionsForBytes(which == 0 ? kL2FilterBytes : kBigFilterBytes));
  });
  return *filters[which];
}

// Repetition statistic: on a shared, oversubscribed machine the minimum is the least disturbed figure.
double Min(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

void SetFilterCounters(benchmark::State& state, const ShardedFilter& f) {
  using benchmark::Counter;  // kAvgThreads: the same figure from every thread, not summed
  state.counters["filter_MiB"] = Counter(double(f.geometry().memory_bytes) / (1 << 20), Counter::kAvgThreads);
  state.counters["bits_per_key"] = Counter(f.geometry().bits_per_key, Counter::kAvgThreads);
  state.counters["k"] = Counter(f.geometry().k, Counter::kAvgThreads);
}

// Digest cost. BM_DigestSha256 / BM_DigestHmacSha256 time core/digest.h's Digester; the *_Ref variants call
// OpenSSL directly with the alternatives measured against it, so before/after appear side by side in one run:
//   Sha256_Ref_EvpDigestFetched   EVP_Digest with a pre-fetched EVP_MD (Digester's path before 2026-11-29)
//   Sha256_Ref_EvpDigestByName    EVP_Digest with EVP_sha256() (implicit fetch by name each call)
//   Hmac_Ref_OneShotHMAC          HMAC() one-shot, pre-fetched EVP_MD (Digester's path before 2026-11-29;
//                                 OpenSSL 3 routes it through EVP_Q_mac, which fetches "HMAC" by name per call)
//   Hmac_Ref_MacCtxDup            EVP_MAC_CTX_dup of a pre-keyed EVP_MAC_CTX, update, final, free
//   Hmac_Ref_MdCtxCopyStack       Digester's pad-state copies, but a fresh EVP_MD_CTX per call (no thread_local)
constexpr char kBenchSecret[] = "a 32-byte secret for benchmarks!";

// Runs `digest` over a typical 29-byte scan key whose last byte changes every iteration.
template <typename F>
void RunDigestLoop(benchmark::State& state, F&& digest) {
  std::string key = "terminal-0042:scan:0123456789";  // 29 bytes, typical scan key
  std::size_t i = 0;
  for (auto _ : state) {
    key[key.size() - 1] = static_cast<char>('0' + (i++ % 10));
    benchmark::DoNotOptimize(digest(key));
  }
  state.SetItemsProcessed(state.iterations());
}

void CheckSsl(int rc) {
  if (rc != 1) std::abort();
}

struct EvpMdFree {
  void operator()(EVP_MD* p) const { EVP_MD_free(p); }
};
struct EvpMdCtxFree {
  void operator()(EVP_MD_CTX* p) const { EVP_MD_CTX_free(p); }
};
struct EvpMacFree {
  void operator()(EVP_MAC* p) const { EVP_MAC_free(p); }
};
struct EvpMacCtxFree {
  void operator()(EVP_MAC_CTX* p) const { EVP_MAC_CTX_free(p); }
};
using EvpMdPtr = std::unique_ptr<EVP_MD, EvpMdFree>;
using EvpMdCtxPtr = std::unique_ptr<EVP_MD_CTX, EvpMdCtxFree>;

void BM_DigestSha256(benchmark::State& state) {
  const Digester sha = Digester::Sha256();
  RunDigestLoop(state, [&](std::string_view k) { return sha(k); });
}
BENCHMARK(BM_DigestSha256)->ComputeStatistics("min", Min);

void BM_DigestSha256_Ref_EvpDigestFetched(benchmark::State& state) {
  const EvpMdPtr md(EVP_MD_fetch(nullptr, "SHA256", nullptr));
  RunDigestLoop(state, [&](std::string_view k) {
    Digest out;
    unsigned int len = 0;
    CheckSsl(EVP_Digest(k.data(), k.size(), out.data(), &len, md.get(), nullptr));
    return out;
  });
}
BENCHMARK(BM_DigestSha256_Ref_EvpDigestFetched)->ComputeStatistics("min", Min);

void BM_DigestSha256_Ref_EvpDigestByName(benchmark::State& state) {
  RunDigestLoop(state, [&](std::string_view k) {
    Digest out;
    unsigned int len = 0;
    CheckSsl(EVP_Digest(k.data(), k.size(), out.data(), &len, EVP_sha256(), nullptr));
    return out;
  });
}
BENCHMARK(BM_DigestSha256_Ref_EvpDigestByName)->ComputeStatistics("min", Min);

void BM_DigestHmacSha256(benchmark::State& state) {
  const Digester mac = Digester::HmacSha256(kBenchSecret);
  RunDigestLoop(state, [&](std::string_view k) { return mac(k); });
}
BENCHMARK(BM_DigestHmacSha256)->ComputeStatistics("min", Min)->Threads(1)->Threads(2);

void BM_DigestHmacSha256_Ref_OneShotHMAC(benchmark::State& state) {
  const EvpMdPtr md(EVP_MD_fetch(nullptr, "SHA256", nullptr));
  RunDigestLoop(state, [&](std::string_view k) {
    Digest out;
    unsigned int len = 0;
    if (HMAC(md.get(), kBenchSecret, int(sizeof kBenchSecret - 1), reinterpret_cast<const unsigned char*>(k.data()),
             k.size(), out.data(), &len) == nullptr)
      std::abort();
    return out;
  });
}
BENCHMARK(BM_DigestHmacSha256_Ref_OneShotHMAC)->ComputeStatistics("min", Min);

void BM_DigestHmacSha256_Ref_MacCtxDup(benchmark::State& state) {
  const std::unique_ptr<EVP_MAC, EvpMacFree> mac(EVP_MAC_fetch(nullptr, "HMAC", nullptr));
  const std::unique_ptr<EVP_MAC_CTX, EvpMacCtxFree> keyed(EVP_MAC_CTX_new(mac.get()));
  char digest_name[] = "SHA256";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest_name, 0),
                               OSSL_PARAM_construct_end()};
  CheckSsl(EVP_MAC_init(keyed.get(), reinterpret_cast<const unsigned char*>(kBenchSecret), sizeof kBenchSecret - 1,
                        params));
  RunDigestLoop(state, [&](std::string_view k) {
    Digest out;
    std::size_t len = 0;
    const std::unique_ptr<EVP_MAC_CTX, EvpMacCtxFree> ctx(EVP_MAC_CTX_dup(keyed.get()));
    CheckSsl(EVP_MAC_update(ctx.get(), reinterpret_cast<const unsigned char*>(k.data()), k.size()));
    CheckSsl(EVP_MAC_final(ctx.get(), out.data(), &len, out.size()));
    return out;
  });
}
BENCHMARK(BM_DigestHmacSha256_Ref_MacCtxDup)->ComputeStatistics("min", Min);

void BM_DigestHmacSha256_Ref_MdCtxCopyStack(benchmark::State& state) {
  const EvpMdPtr md(EVP_MD_fetch(nullptr, "SHA256", nullptr));
  const EvpMdCtxPtr inner(EVP_MD_CTX_new()), outer(EVP_MD_CTX_new());
  unsigned char pad[64] = {};
  std::memcpy(pad, kBenchSecret, sizeof kBenchSecret - 1);
  for (auto& b : pad) b ^= 0x36;
  CheckSsl(EVP_DigestInit_ex2(inner.get(), md.get(), nullptr));
  CheckSsl(EVP_DigestUpdate(inner.get(), pad, sizeof pad));
  for (auto& b : pad) b ^= 0x36 ^ 0x5c;
  CheckSsl(EVP_DigestInit_ex2(outer.get(), md.get(), nullptr));
  CheckSsl(EVP_DigestUpdate(outer.get(), pad, sizeof pad));
  RunDigestLoop(state, [&](std::string_view k) {
    Digest out, mid;
    unsigned int len = 0;
    const EvpMdCtxPtr ctx(EVP_MD_CTX_new());
    CheckSsl(EVP_MD_CTX_copy_ex(ctx.get(), inner.get()));
    CheckSsl(EVP_DigestUpdate(ctx.get(), k.data(), k.size()));
    CheckSsl(EVP_DigestFinal_ex(ctx.get(), mid.data(), &len));
    CheckSsl(EVP_MD_CTX_copy_ex(ctx.get(), outer.get()));
    CheckSsl(EVP_DigestUpdate(ctx.get(), mid.data(), mid.size()));
    CheckSsl(EVP_DigestFinal_ex(ctx.get(), out.data(), &len));
    return out;
  });
}
BENCHMARK(BM_DigestHmacSha256_Ref_MdCtxCopyStack)->ComputeStatistics("min", Min);

// Baseline: producing a fresh digest from the precomputed ring (included in the observe figures).
void BM_RingOnly(benchmark::State& state) {
  DigestRing ring(1 + state.thread_index());
  for (auto _ : state) benchmark::DoNotOptimize(ring.Next());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RingOnly)->ComputeStatistics("min", Min);

// Observe fresh keys (each a kDefinitelyNew insert: load, fetch_or, previous-generation load), with the
// filter's own capacity rotations amortised in. Arg: 0 = L2-resident filter, 1 = 256 MiB filter.
void BM_Observe(benchmark::State& state) {
  ShardedFilter& f = FilterOfSize(static_cast<int>(state.range(0)));
  DigestRing ring(100 + state.thread_index() + 10 * state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(f.ObserveConcurrently(ring.Next()));
  state.SetItemsProcessed(state.iterations());
  SetFilterCounters(state, f);
}
BENCHMARK(BM_Observe)->Arg(0)->Arg(1)->Threads(1)->Threads(2)->UseRealTime()->ComputeStatistics("min", Min);

// Observe keys already present (the load-only path: no write). Same filters.
void BM_ObserveSeen(benchmark::State& state) {
  ShardedFilter& f = FilterOfSize(static_cast<int>(state.range(0)));
  std::uint64_t seed = 7000 + state.thread_index();
  std::vector<Digest> keys(1 << 16);
  for (auto& d : keys)
    for (int w = 0; w < 4; ++w) {
      const std::uint64_t v = SplitMix64(seed);
      std::memcpy(d.data() + 8 * w, &v, 8);
    }
  f.InsertBatchConcurrently(keys);
  std::size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(f.ObserveConcurrently(keys[i++ & (keys.size() - 1)]));
  state.SetItemsProcessed(state.iterations());
  SetFilterCounters(state, f);
}
BENCHMARK(BM_ObserveSeen)->Arg(0)->Arg(1)->Threads(1)->UseRealTime()->ComputeStatistics("min", Min);

// Batch API on fresh keys: kBatch digests per call, prefetched before the atomic ops.
void BM_ObserveBatch(benchmark::State& state) {
  ShardedFilter& f = FilterOfSize(static_cast<int>(state.range(0)));
  DigestRing ring(200 + state.thread_index() + 10 * state.range(0));
  std::vector<Digest> in(kBatch);
  std::vector<Probe> out(kBatch);
  for (auto _ : state) {
    for (auto& d : in) d = ring.Next();
    f.ObserveBatchConcurrently(in, out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
  state.counters["ns_per_key"] = benchmark::Counter(double(state.iterations() * kBatch),
                                                    benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  SetFilterCounters(state, f);
}
BENCHMARK(BM_ObserveBatch)->Arg(0)->Arg(1)->Threads(1)->Threads(2)->UseRealTime()->ComputeStatistics("min", Min);

// Floor of one fresh-key observe: a single locked fetch_or (lock cmpxchg loop) on an L1-resident word,
// returning the prior value as ObserveConcurrently needs it.
void BM_LockedFetchOr(benchmark::State& state) {
  std::atomic<std::uint64_t> word{0};
  std::uint64_t i = 0, sum = 0;
  for (auto _ : state) sum += word.fetch_or(std::uint64_t{1} << (i++ & 63)) & 1;
  benchmark::DoNotOptimize(sum);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_LockedFetchOr)->ComputeStatistics("min", Min);

// One random cache miss: a dependent pointer chase over a random cycle of 64-byte nodes spanning 256 MiB
// (Sattolo's algorithm: one cycle through every node). Arg: 1 = huge pages advised (as the filter's
// arrays are), 0 = 4 KiB pages (adds a TLB miss per step).
void BM_RandomMissChase(benchmark::State& state) {
  const bool huge = state.range(0) != 0;
  const std::size_t nodes = kChaseBytes / 64;
  auto* mem = static_cast<std::uint64_t*>(std::aligned_alloc(kHugePage, kChaseBytes));
  if (mem == nullptr) {
    state.SkipWithError("allocation failed");
    return;
  }
  madvise(mem, kChaseBytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  std::vector<std::uint32_t> perm(nodes);
  std::iota(perm.begin(), perm.end(), 0u);
  std::mt19937_64 rng(42);
  for (std::size_t i = nodes - 1; i > 0; --i) {
    std::uniform_int_distribution<std::size_t> pick(0, i - 1);
    std::swap(perm[i], perm[pick(rng)]);
  }
  for (std::size_t i = 0; i < nodes; ++i) mem[i * 8] = perm[i];
  std::uint64_t idx = 0;
  for (auto _ : state) {
    idx = mem[idx * 8];
    benchmark::DoNotOptimize(idx);
  }
  state.SetItemsProcessed(state.iterations());
  std::free(mem);
}
BENCHMARK(BM_RandomMissChase)->Arg(1)->Arg(0)->ComputeStatistics("min", Min);

// Measured FP of ONE generation at design load vs the blocked model and the standard Bloom formula at its
// optimal k, at 8/12/16/20 bits per key. Arg: bits per key.
void BM_FpTable(benchmark::State& state) {
  const double bits = double(state.range(0));
  double best = 1;
  for (std::uint32_t k = 1; k <= kMaxBitsPerWordK; ++k) best = std::min(best, BlockedBloomFp(64.0 / bits, k));
  FilterOptions o;
  o.capacity = 1 << 20;
  o.shards = 64;
  o.fp_target = 1 - (1 - best) * (1 - best) * (1 + 1e-12);  // per-generation share == model at `bits`
  std::uint64_t seed = 99;
  for (auto _ : state) {
    ShardedFilter f(o);
    const FilterGeometry& g = f.geometry();
    const std::uint64_t fill = g.capacity_per_shard - f.insert_count_batch();  // ~design load, no rotation
    std::vector<std::uint64_t> per_shard(g.shards, 0);
    std::uint64_t remaining = fill * g.shards;
    while (remaining > 0) {
      Digest d;
      for (int w = 0; w < 4; ++w) {
        const std::uint64_t v = SplitMix64(seed);
        std::memcpy(d.data() + 8 * w, &v, 8);
      }
      auto& n = per_shard[f.ShardOf(d)];
      if (n == fill) continue;
      ++n, --remaining;
      f.InsertConcurrently(d);
    }
    constexpr int kQueries = 4'000'000;
    int pos = 0;
    for (int i = 0; i < kQueries; ++i) {
      Digest d;
      for (int w = 0; w < 4; ++w) {
        const std::uint64_t v = SplitMix64(seed);
        std::memcpy(d.data() + 8 * w, &v, 8);
      }
      pos += f.MayContain(d);
    }
    const double measured = double(pos) / kQueries;
    const double lambda = double(fill) / double(g.words_per_generation_per_shard);
    const double model = BlockedBloomFp(lambda, g.k);
    const auto k_std = static_cast<std::uint32_t>(std::max(1.0, std::round(g.bits_per_key * std::log(2.0))));
    state.counters["bits_per_key"] = g.bits_per_key;
    state.counters["k"] = g.k;
    state.counters["fp_measured_pct"] = 100 * measured;
    state.counters["fp_model_pct"] = 100 * model;
    state.counters["ratio"] = measured / model;
    state.counters["sigma_pct"] = 100 * std::sqrt(model * (1 - model) / kQueries);
    state.counters["fp_standard_pct"] = 100 * StandardBloomFp(g.bits_per_key, k_std);
    state.counters["k_standard"] = k_std;
  }
}
BENCHMARK(BM_FpTable)->Arg(8)->Arg(12)->Arg(16)->Arg(20)->Iterations(1)->Unit(benchmark::kMillisecond);

// first_seen of every "duplicate" answer: the digits written in place vs the gmtime_r + snprintf it replaced.
void BM_Rfc3339Micros(benchmark::State& state) {
  std::int64_t us = 1'796'000'000'000'000;
  for (auto _ : state) benchmark::DoNotOptimize(Rfc3339Micros(us += 1'234'567));
}
BENCHMARK(BM_Rfc3339Micros)->ComputeStatistics("min", Min);

void BM_Rfc3339Micros_Ref_Snprintf(benchmark::State& state) {
  std::int64_t us = 1'796'000'000'000'000;
  for (auto _ : state) {
    us += 1'234'567;
    const auto t = static_cast<std::time_t>(us / 1'000'000);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                  tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(us % 1'000'000));
    benchmark::DoNotOptimize(std::string(buf));
  }
}
BENCHMARK(BM_Rfc3339Micros_Ref_Snprintf)->ComputeStatistics("min", Min);

// --keys=gs1: one Parse per key (issue 24's target: well under 1 µs). Arg picks the spelling: 0 a DataMatrix
// element string with GS, 1 the bare 01+21 string, 2 the parenthesised form, 3 a Digital Link with query
// attributes and a GTIN-13 to pad. The serial changes every iteration so no branch predictor learns one key.
void BM_Gs1Parse(benchmark::State& state) {
  static const char* const kSpellings[] = {
      // One literal in two pieces: "\x1d21..." would read as the escape \x1d21. Parenthesised for clang's
      // -Wstring-concatenation (an array of literals where a comma may be missing).
      ("]d2010036141403000817271231100LOT42\x1d" "21SN000000"),
      "010036141403000821SN000000",
      "(01)00361414030008(17)271231(10)0LOT42(21)SN000000",
      "https://id.gs1.org/01/4006381333931/21/SN000000?17=271231&10=0LOT42",
  };
  std::string scan = kSpellings[state.range(0)];
  const std::size_t digit = scan.find("SN000000") + 7;
  unsigned n = 0;
  for (auto _ : state) {
    scan[digit] = static_cast<char>('0' + n++ % 10);
    auto r = gs1::Parse(scan, 2026);
    benchmark::DoNotOptimize(r);
  }
  if (!std::holds_alternative<gs1::Pack>(gs1::Parse(scan, 2026))) state.SkipWithError("spelling did not parse");
}
BENCHMARK(BM_Gs1Parse)->DenseRange(0, 3)->ComputeStatistics("min", Min);

}  // namespace
}  // namespace scangate

BENCHMARK_MAIN();
