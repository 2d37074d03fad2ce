// Access control of the client routes (--tokens-file): each line of the file names one accepted bearer token
// by its lowercase hex SHA-256, the terminal it belongs to, and optionally the routes it may use; the service
// keeps only those hashes. Invariant: a presented token is hashed and compared against every stored hash with
// CRYPTO_memcmp (constant time, no early exit), and neither a token nor its hash is ever logged. A
// TokenVerifier is immutable; reloading (SIGHUP) builds a new one and swaps it in (server/http/token_store.h).
// Pure apart from OpenSSL; parsing is fuzzed (tests/fuzz/fuzz_request.cc).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "server/http/request.h"

namespace scangate::server {

// Access control (--tokens-file). Bearer credentials of an Authorization header value (RFC 6750 section 2.1:
// scheme "Bearer", case-insensitive, one or more spaces, a token68). nullopt when the value is absent or
// not of that form; the token is never logged or echoed.
inline constexpr std::size_t kMaxBearerTokenBytes = 4096;  // longer credentials are rejected unhashed
std::optional<std::string_view> BearerToken(std::string_view authorization);
// WWW-Authenticate value of a 401: the realm, plus error="invalid_token" when credentials were presented.
std::string WwwAuthenticate(bool credentials_presented);

using TokenHash = std::array<std::uint8_t, 32>;
inline constexpr std::size_t kMaxTokenHashes = 10'000;  // entries in a tokens file; each check scans all
inline constexpr std::size_t kMaxTerminalIdChars = 64;  // [A-Za-z0-9._-]{1,64}: fits a body "source"
static_assert(kMaxTerminalIdChars <= kMaxSourceChars, "a terminal id is recorded as the source");
inline constexpr std::size_t kDefaultTerminalIdHexChars = 12;  // id of a hash-only line: its hash's first chars

// Client routes a token may use, as bits ("observe", "batch", "lookup" in the file).
inline constexpr std::uint8_t kRouteBitObserve = 1;
inline constexpr std::uint8_t kRouteBitBatch = 2;
inline constexpr std::uint8_t kRouteBitLookup = 4;
// "audit" in the file: /lookup, and its answers name the recording terminal of every record (without it a
// record of another terminal's answers "source": null, "source_hidden": true). Implies lookup.
inline constexpr std::uint8_t kRouteBitAudit = 8;
inline constexpr std::uint8_t kAllClientRoutes = kRouteBitObserve | kRouteBitBatch | kRouteBitLookup;
// A line without routes (and the old hash-only format): observe only — least privilege; a till that sends
// batches or looks packs up says so.
inline constexpr std::uint8_t kDefaultRoutes = kRouteBitObserve;
// The bit of a client route (0 for any other route).
std::uint8_t RouteBit(Route route);
// A comma-separated subset of observe,batch,lookup,audit as bits (audit implies lookup); nullopt for an
// unknown name or an empty entry. Pure; any thread.
std::optional<std::uint8_t> ParseRoutes(std::string_view list);
// [A-Za-z0-9._-]{1,kMaxTerminalIdChars}: a tokens file's terminal id, a client certificate's CN. Any thread.
bool IsTerminalId(std::string_view id);

// One accepted token: its hash, the terminal it names (recorded as the observation's source, the rate
// limit's bucket) and the client routes it may use. Several tokens may name one terminal (rotation).
struct Terminal {
  TokenHash hash{};
  std::string id;
  std::uint8_t routes = kDefaultRoutes;
};

// Why a tokens file is rejected: 1-based line number and what is wrong with it.
struct TokenFileError {
  std::size_t line = 0;
  std::string message;
};

// Parses a tokens file. Per line: `<sha256-hex> [<terminal-id> [<routes>]]`, fields separated by spaces or
// tabs; the hash is 64 lowercase hex chars; the terminal id matches [A-Za-z0-9._-]{1,64} and defaults to the
// hash's first 12 hex chars (the old one-hash-per-line format stays valid); routes is a comma-separated subset
// of observe,batch,lookup,audit (default: observe only; audit implies lookup). sha256sum's "<hash>  -" is read as a hash-only line.
// Surrounding blanks and a CR are ignored; blank lines and lines starting with '#' are comments. At least one
// entry; a hash listed twice is an error (its terminal would be ambiguous). Messages never quote a hash.
std::variant<std::vector<Terminal>, TokenFileError> ParseTokensFile(std::string_view text);

// Immutable after construction; every method is safe to call concurrently.
class TokenVerifier {
 public:
  TokenVerifier() = default;  // disabled: no tokens file
  explicit TokenVerifier(std::vector<Terminal> terminals) : terminals_(std::move(terminals)) {}
  bool enabled() const { return !terminals_.empty(); }
  std::size_t size() const { return terminals_.size(); }
  // The index of the entry whose hash equals SHA-256(`token`), nullopt when none does. Constant time in the
  // token's content and in the position of the match: every entry is compared, the index is selected without
  // branching on the comparison. Throws std::runtime_error on OpenSSL failure.
  std::optional<std::size_t> Verify(std::string_view token) const;
  const Terminal& terminal(std::size_t index) const { return terminals_[index]; }

 private:
  std::vector<Terminal> terminals_;
};

}  // namespace scangate::server
