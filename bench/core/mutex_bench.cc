// Micro-benchmarks of core/mutex.h: the annotated Mutex against the std::mutex it wraps and against
// absl::Mutex, on the shape of scangate's hot locks — a short critical section (a counter bump, as a service
// stripe or an IoInbox::Post holds its lock for), uncontended and contended by 2 and 8 threads, and spread over
// 1024 stripes (server/verdict/service.cc). Figures, and why they chose the wrapper over absl::Mutex: bench/RESULTS.md.
#include <benchmark/benchmark.h>

#include <array>
#include <cstdint>
#include <mutex>

#include <absl/synchronization/mutex.h>

#include "core/mutex.h"

namespace scangate {
namespace {

// One lock, one shared counter: uncontended at Threads(1), contended above.
template <class M>
struct Shared {
  M mu;
  std::uint64_t n = 0;
};

template <class M>
Shared<M>& SharedOf() {
  static Shared<M> s;
  return s;
}

// 1024 stripes, each its own cache line, as server/verdict/service.cc's per-key stripe mutexes.
template <class M>
struct alignas(64) Stripe {
  M mu;
  std::uint64_t n = 0;
};
template <class M>
std::array<Stripe<M>, 1024>& StripesOf() {
  static std::array<Stripe<M>, 1024> s;
  return s;
}

void Bump(std::mutex& mu, std::uint64_t& n) {
  const std::lock_guard lock(mu);
  benchmark::DoNotOptimize(++n);
}
void Bump(Mutex& mu, std::uint64_t& n) {
  const MutexLock lock(&mu);
  benchmark::DoNotOptimize(++n);
}
void Bump(absl::Mutex& mu, std::uint64_t& n) {
  const absl::MutexLock lock(&mu);
  benchmark::DoNotOptimize(++n);
}

template <class M>
void BM_OneLock(benchmark::State& state) {
  auto& s = SharedOf<M>();
  for (auto _ : state) Bump(s.mu, s.n);
}

template <class M>
void BM_Striped(benchmark::State& state) {
  auto& stripes = StripesOf<M>();
  // A different walk per thread (odd stride), so threads rarely meet on one stripe.
  std::uint32_t i = static_cast<std::uint32_t>(state.thread_index()) * 97;
  const std::uint32_t stride = 2 * static_cast<std::uint32_t>(state.thread_index()) + 1;
  for (auto _ : state) {
    auto& st = stripes[i & 1023];
    Bump(st.mu, st.n);
    i += stride;
  }
}

BENCHMARK_TEMPLATE(BM_OneLock, std::mutex)->Threads(1)->Threads(2)->Threads(8)->UseRealTime();
BENCHMARK_TEMPLATE(BM_OneLock, Mutex)->Threads(1)->Threads(2)->Threads(8)->UseRealTime();
BENCHMARK_TEMPLATE(BM_OneLock, absl::Mutex)->Threads(1)->Threads(2)->Threads(8)->UseRealTime();
BENCHMARK_TEMPLATE(BM_Striped, std::mutex)->Threads(2)->Threads(8)->UseRealTime();
BENCHMARK_TEMPLATE(BM_Striped, Mutex)->Threads(2)->Threads(8)->UseRealTime();
BENCHMARK_TEMPLATE(BM_Striped, absl::Mutex)->Threads(2)->Threads(8)->UseRealTime();

}  // namespace
}  // namespace scangate

BENCHMARK_MAIN();
