// Digest: the 32-byte fingerprint that stands in for a raw scan key everywhere past the HTTP parser.
// Invariant: raw keys never leave this unit's caller; only SHA-256(key), or HMAC-SHA256(secret, key) when a
// secret is configured, reaches the filter, logs, metrics and the database.
// Use Digester::Sha256() or Digester::HmacSha256(secret) once at start-up and share it across threads.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace scangate {

using Digest = std::array<std::uint8_t, 32>;

// Computes digests with OpenSSL one-shot calls (EVP_Digest for SHA-256, HMAC() for HMAC-SHA256).
// Threading: immutable after construction; every member function is safe to call concurrently,
// copies share the (immutable) fetched algorithm and secret.
class Digester {
 public:
  // Plain SHA-256. Threading: safe to call concurrently. Throws std::runtime_error if OpenSSL lacks SHA-256.
  static Digester Sha256();
  // HMAC-SHA256 keyed by `secret` (copied; wiped with OPENSSL_cleanse when the last copy dies).
  // Threading: safe to call concurrently. Throws std::invalid_argument if `secret` is empty.
  static Digester HmacSha256(std::string_view secret);

  // Digest of `key`. Threading: safe to call concurrently. Throws std::runtime_error on OpenSSL failure.
  Digest operator()(std::string_view key) const;
  // True for HMAC. Threading: safe to call concurrently.
  bool keyed() const { return secret_ != nullptr; }

 private:
  struct Md;  // owns a fetched EVP_MD
  struct Secret;  // owns the secret bytes, cleansed on destruction
  Digester(std::shared_ptr<const Md> md, std::shared_ptr<const Secret> secret)
      : md_(std::move(md)), secret_(std::move(secret)) {}
  std::shared_ptr<const Md> md_;
  std::shared_ptr<const Secret> secret_;  // null for plain SHA-256
};

// 64 lowercase hex characters. Threading: pure function.
std::string ToHex(const Digest& d);
// Parses exactly 64 hex characters (either case); nullopt otherwise. Threading: pure function.
std::optional<Digest> DigestFromHex(std::string_view hex);

}  // namespace scangate
