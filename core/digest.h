// Digest: the 32-byte fingerprint that stands in for a raw scan key everywhere past the HTTP parser.
// Invariant: raw keys never leave this unit's caller; only SHA-256(key), or HMAC-SHA256(secret, key) when a
// secret is configured, reaches the filter, logs, metrics and the database.
// Use Digester::Sha256() or Digester::HmacSha256(secret) once at start-up and share it across threads.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

namespace scangate {

using Digest = std::array<std::uint8_t, 32>;

// Computes digests with OpenSSL EVP digest contexts. The SHA-256 EVP_MD is fetched once at construction (no
// per-call algorithm lookup by name). For HMAC-SHA256 (RFC 2104) the constructor also precomputes two SHA-256
// states that have absorbed key-block XOR ipad and key-block XOR opad (a key longer than the 64-byte block is
// hashed first); a call copies them into a per-thread scratch context, so it hashes only the message and the
// 32-byte inner digest (~4x cheaper than OpenSSL 3's one-shot HMAC(), see bench/RESULTS.md "Digest cost").
// Threading: immutable after construction; every member function is safe to call concurrently from any number
// of threads. Copies share the immutable precomputed states (shared_ptr to const); the only mutable OpenSSL
// object is one thread_local scratch EVP_MD_CTX per thread, never shared between threads.
class Digester {
 public:
  // Plain SHA-256. Threading: safe to call concurrently. Throws std::runtime_error if OpenSSL lacks SHA-256.
  static Digester Sha256();
  // HMAC-SHA256 keyed by `secret`. Only the two precomputed pad states are kept; the key-block copies are wiped
  // with OPENSSL_cleanse. Threading: safe to call concurrently. Throws std::invalid_argument if `secret` is
  // empty, std::runtime_error on OpenSSL failure.
  static Digester HmacSha256(std::string_view secret);

  // Digest of `key`. Threading: safe to call concurrently. Throws std::runtime_error on OpenSSL failure.
  Digest operator()(std::string_view key) const;
  // True for HMAC. Threading: safe to call concurrently.
  bool keyed() const { return hmac_ != nullptr; }

 private:
  struct Md;    // owns the fetched EVP_MD (SHA-256)
  struct Hmac;  // owns the precomputed inner/outer SHA-256 states (immutable after construction)
  Digester(std::shared_ptr<const Md> md, std::shared_ptr<const Hmac> hmac)
      : md_(std::move(md)), hmac_(std::move(hmac)) {}
  std::shared_ptr<const Md> md_;
  std::shared_ptr<const Hmac> hmac_;  // null for plain SHA-256
};

// The stored form of a digest (issue 45). PostgreSQL keeps only a digest's first kStoredDigestBytes bytes (a uuid:
// a fixed 16 bytes, no varlena header), so a digest read back from it (warm start, the follower) carries only those;
// the answers still show the full digest computed from the key. Everything that meets such digests keys on the same
// prefix: the Bloom filter's bit positions and shard, the recent set (core/) and every comparison in storage/.
// Two keys whose digests share the prefix are one key: the later one's first observation would be answered
// "duplicate". For n keys the probability that any two share it is ~n^2 / 2^129: 1.5e-15 at 10^12 keys (the full
// 256 bits: ~4e-54); storage/README.md "Table layout" states it for invariant 2.
inline constexpr std::size_t kStoredDigestBytes = 16;

// `d` with every byte past the stored prefix zero: the digest exactly as PostgreSQL holds it. Pure.
inline Digest StoredDigest(const Digest& d) {
  Digest s{};
  for (std::size_t i = 0; i < kStoredDigestBytes; ++i) s[i] = d[i];
  return s;
}

// A digest PostgreSQL returned in binary — 32 bytes (the layout before sql/013) or 16 (its uuid) — as its stored
// form in `out`. False for any other length (`out` then unspecified). Threading: pure function.
inline bool StoredDigestFromBytes(std::string_view bytes, Digest& out) {
  if (bytes.size() != std::tuple_size_v<Digest> && bytes.size() != kStoredDigestBytes) return false;
  out = Digest{};
  for (std::size_t i = 0; i < kStoredDigestBytes; ++i) out[i] = static_cast<std::uint8_t>(bytes[i]);
  return true;
}

// 64 lowercase hex characters. Threading: pure function.
std::string ToHex(const Digest& d);
// Parses exactly 64 hex characters (either case); nullopt otherwise. Threading: pure function.
std::optional<Digest> DigestFromHex(std::string_view hex);

}  // namespace scangate
