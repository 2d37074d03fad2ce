// Access control of the observe routes (--tokens-file): the file holds one lowercase hex SHA-256 per line
// of each accepted bearer token; the service keeps only those hashes. Invariant: a presented token is hashed
// and compared against every stored hash with CRYPTO_memcmp (constant time, no early exit), and neither a
// token nor its hash is ever logged. Pure apart from OpenSSL; parsing is fuzzed (tests/fuzz/fuzz_request.cc).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace scangate::server {

using TokenHash = std::array<std::uint8_t, 32>;
inline constexpr std::size_t kMaxTokenHashes = 10'000;  // entries in a tokens file; each check scans all

// Why a tokens file is rejected: 1-based line number and what is wrong with it.
struct TokenFileError {
  std::size_t line = 0;
  std::string message;
};

// Parses a tokens file: per line one 64-char lowercase hex SHA-256, surrounding spaces/tabs and a CR
// ignored; blank lines and lines starting with '#' (after spaces) are comments. At least one hash.
std::variant<std::vector<TokenHash>, TokenFileError> ParseTokenHashes(std::string_view text);

// Immutable after construction; Verify is safe to call concurrently.
class TokenVerifier {
 public:
  TokenVerifier() = default;  // disabled: no tokens file
  explicit TokenVerifier(std::vector<TokenHash> hashes) : hashes_(std::move(hashes)) {}
  bool enabled() const { return !hashes_.empty(); }
  // SHA-256 of `token` equals one of the stored hashes. Constant time in the token's content and position
  // of the match: every entry is compared. Throws std::runtime_error on OpenSSL failure.
  bool Verify(std::string_view token) const;

 private:
  std::vector<TokenHash> hashes_;
};

}  // namespace scangate::server
