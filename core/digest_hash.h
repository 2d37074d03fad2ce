// DigestHash: the hash of a Digest for hash tables keyed by digests (the recent set, the journal's pending
// set). Digests are uniform, so 8 of their bytes are as good as all 32; they go through absl::Hash, which is
// seeded per process, so a client who can choose keys (no HMAC secret configured) still cannot aim them at
// one probe sequence. Bytes 8..15: callers pick shards and store routes from other bytes (0..3 route the
// store, 4 the journal's shards, 16..23 the recent set's), so a shard's keys still spread over its table.
// Thread-safe (stateless).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include <absl/hash/hash.h>

#include "core/digest.h"

namespace scangate {

struct DigestHash {
  std::size_t operator()(const Digest& d) const noexcept {
    std::uint64_t w;
    std::memcpy(&w, d.data() + 8, sizeof w);
    return absl::Hash<std::uint64_t>{}(w);
  }
};

}  // namespace scangate
