// DigestHash: the hash of a Digest for hash tables keyed by digests (the recent set, the journal's pending
// set, the store's pending write-behind digests and a batch's de-duplication). Digests are uniform, so 8 of
// their bytes are as good as all 32; they go through absl::Hash, which is seeded per process, so a client who
// can choose keys (no HMAC secret configured) still cannot aim them at one probe sequence. Bytes 8..15: callers
// pick shards and store routes from other bytes (0..3 route the store, 4 the journal's shards, 0..7 the recent
// set's), so a shard's keys still spread over its table.
// DigestEq / DigestLess: equality and bytea order (unsigned bytes, first byte most significant) of two
// digests in 8-byte word compares, inlined; std::equal_to<Digest> and memcmp() call into libc per probe
// or comparison (~1.8 % of the server's CPU in the journal profile at 256 connections, bench/RESULTS-history.md
// "Digest compares inlined").
// Thread-safe (stateless).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <absl/hash/hash.h>

#include "core/digest.h"

namespace scangate {

// Both take a Digest or any shorter prefix of one held as std::array<std::uint8_t, N> (N a multiple of 8, at least
// 16): the recent set keys on the 16-byte stored form (core/recent_set.cc).
struct DigestHash {
  template <std::size_t N>
  std::size_t operator()(const std::array<std::uint8_t, N>& d) const noexcept {
    static_assert(N >= 16, "bytes 8..15 are hashed");
    std::uint64_t w;
    std::memcpy(&w, d.data() + 8, sizeof w);
    return absl::Hash<std::uint64_t>{}(w);
  }
};

struct DigestEq {
  template <std::size_t N>
  bool operator()(const std::array<std::uint8_t, N>& a, const std::array<std::uint8_t, N>& b) const noexcept {
    static_assert(N % 8 == 0, "compared in 8-byte words");
    std::uint64_t diff = 0;
    for (std::size_t i = 0; i < N; i += 8) {  // a constant trip count: unrolled
      std::uint64_t x, y;
      std::memcpy(&x, a.data() + i, sizeof x);
      std::memcpy(&y, b.data() + i, sizeof y);
      diff |= x ^ y;
    }
    return diff == 0;
  }
};

struct DigestLess {
  bool operator()(const Digest& a, const Digest& b) const noexcept {
    for (std::size_t i = 0; i < a.size(); i += 8) {
      std::uint64_t x, y;
      std::memcpy(&x, a.data() + i, sizeof x);
      std::memcpy(&y, b.data() + i, sizeof y);
      if (x != y) return __builtin_bswap64(x) < __builtin_bswap64(y);  // little-endian loads: compare as big
    }
    return false;
  }
};

}  // namespace scangate
