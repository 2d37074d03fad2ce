// CounterDigest: uniform-looking digests from a counter, for tests and benchmarks of core/ units that need many
// distinct digests cheaply and reproducibly (no SHA-256 per key). Distinct (n, salt) give distinct digests:
// bytes 24..31 carry n itself; the rest is splitmix64 of (n, salt), uniform per 8-byte word.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/digest.h"

namespace scangate::test_support {

inline Digest CounterDigest(std::uint64_t n, std::uint64_t salt = 0) {
  Digest d{};
  std::uint64_t x = n * 0x9E3779B97F4A7C15ull ^ (salt + 0x1234567);
  for (std::size_t w = 0; w < 4; ++w) {
    x += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    std::memcpy(d.data() + 8 * w, &z, sizeof z);
  }
  std::memcpy(d.data() + 24, &n, sizeof n);  // keeps digests of distinct n distinct
  return d;
}

}  // namespace scangate::test_support
