// Fixed-bucket histograms of storage/'s metrics (batch sizes, commit and fsync times, journal group sizes):
// per-bucket counts kept under the owner's lock, rendered as Prometheus-style cumulative (le, count) pairs
// with a final +Inf bucket. Not thread-safe by themselves: the caller holds whatever guards `counts`.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace scangate::storage {

// Counts `v` in the first bucket whose upper bound is >= v (the last slot, index N, is +Inf).
template <std::size_t N>
void ObserveInBucket(const std::array<double, N>& bounds, std::array<std::uint64_t, N + 1>& counts, double v) {
  std::size_t i = 0;
  while (i < N && v > bounds[i]) ++i;
  ++counts[i];
}

// Cumulative (le, count) pairs of per-bucket `counts`, ending with (+Inf, total).
template <std::size_t N>
std::vector<std::pair<double, std::uint64_t>> CumulativeBuckets(const std::array<double, N>& bounds,
                                                                const std::array<std::uint64_t, N + 1>& counts) {
  std::vector<std::pair<double, std::uint64_t>> out;
  out.reserve(N + 1);
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < N; ++i) {
    sum += counts[i];
    out.emplace_back(bounds[i], sum);
  }
  out.emplace_back(std::numeric_limits<double>::infinity(), sum + counts[N]);
  return out;
}

}  // namespace scangate::storage
