#include "server/http/auth.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <stdexcept>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "server/http/ascii.h"

namespace scangate::server {

namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // upper case is rejected: the file format is lowercase (sha256sum's output)
}

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

std::string_view TrimBlank(std::string_view s) {
  while (!s.empty() && IsBlank(s.front())) s.remove_prefix(1);
  while (!s.empty() && (IsBlank(s.back()) || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// The next blank-separated field of `s` (which it consumes); empty at the end.
std::string_view NextField(std::string_view& s) {
  while (!s.empty() && IsBlank(s.front())) s.remove_prefix(1);
  std::size_t n = 0;
  while (n < s.size() && !IsBlank(s[n])) ++n;
  const std::string_view f = s.substr(0, n);
  s.remove_prefix(n);
  return f;
}

bool IsTerminalIdChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '-';
}

}  // namespace

std::optional<std::string_view> BearerToken(std::string_view authorization) {
  constexpr std::string_view kScheme = "bearer";
  if (authorization.size() <= kScheme.size()) return std::nullopt;
  if (!EqualsIgnoringAsciiCase(authorization.substr(0, kScheme.size()), kScheme)) return std::nullopt;
  std::string_view rest = authorization.substr(kScheme.size());
  if (rest.front() != ' ') return std::nullopt;
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\t')) rest.remove_suffix(1);
  if (rest.empty() || rest.size() > kMaxBearerTokenBytes) return std::nullopt;
  // token68 = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
  std::size_t i = 0;
  auto token_char = [](unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/';
  };
  while (i < rest.size() && token_char(static_cast<unsigned char>(rest[i]))) ++i;
  if (i == 0) return std::nullopt;
  while (i < rest.size() && rest[i] == '=') ++i;
  if (i != rest.size()) return std::nullopt;
  return rest;
}

std::string WwwAuthenticate(bool credentials_presented) {
  return credentials_presented ? R"(Bearer realm="scangate", error="invalid_token")" : R"(Bearer realm="scangate")";
}

bool IsTerminalId(std::string_view id) {
  return !id.empty() && id.size() <= kMaxTerminalIdChars && std::all_of(id.begin(), id.end(), IsTerminalIdChar);
}

std::optional<std::uint8_t> ParseRoutes(std::string_view s) {
  std::uint8_t bits = 0;
  while (true) {
    const std::size_t comma = s.find(',');
    const std::string_view name = s.substr(0, comma);
    if (name == "observe") bits |= kRouteBitObserve;
    else if (name == "batch") bits |= kRouteBitBatch;
    else if (name == "lookup") bits |= kRouteBitLookup;
    else if (name == "audit") bits |= kRouteBitLookup | kRouteBitAudit;
    else return std::nullopt;
    if (comma == std::string_view::npos) return bits;
    s.remove_prefix(comma + 1);
  }
}

std::uint8_t RouteBit(Route route) {
  switch (route) {
    case Route::kObserve: return kRouteBitObserve;
    case Route::kObserveBatch: return kRouteBitBatch;
    case Route::kLookup: return kRouteBitLookup;
    default: return 0;
  }
}

std::variant<std::vector<Terminal>, TokenFileError> ParseTokensFile(std::string_view text) {
  std::vector<Terminal> out;
  std::set<TokenHash> seen;
  std::size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    const std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    line = TrimBlank(line);
    if (line.empty() || line.front() == '#') continue;
    const std::string_view hex = NextField(line);
    if (hex.size() != 64) {
      return TokenFileError{line_no, "expected 64 lowercase hex characters (a SHA-256) first, got " +
                                         std::to_string(hex.size()) + " characters"};
    }
    Terminal t;
    for (std::size_t i = 0; i < t.hash.size(); ++i) {
      const int hi = HexValue(hex[2 * i]);
      const int lo = HexValue(hex[2 * i + 1]);
      if (hi < 0 || lo < 0) return TokenFileError{line_no, "expected lowercase hex digits 0-9a-f only"};
      t.hash[i] = static_cast<std::uint8_t>(hi * 16 + lo);
    }
    std::string_view id = NextField(line);
    // `sha256sum` prints "<hash>  -": a hash-only line.
    if (id == "-" && TrimBlank(line).empty()) id = {};
    if (id.empty()) {
      t.id = std::string(hex.substr(0, kDefaultTerminalIdHexChars));
    } else {
      if (!IsTerminalId(id)) {
        return TokenFileError{line_no, "the terminal id must be 1-" + std::to_string(kMaxTerminalIdChars) +
                                           " characters of A-Z a-z 0-9 . _ -"};
      }
      t.id = std::string(id);
    }
    if (const std::string_view routes = NextField(line); !routes.empty()) {
      const auto bits = ParseRoutes(routes);
      if (!bits) {
        return TokenFileError{line_no, "routes must be a comma-separated list of observe, batch, lookup, audit"};
      }
      t.routes = *bits;
    }
    if (!NextField(line).empty()) {
      return TokenFileError{line_no, "expected at most three fields: <sha256-hex> <terminal-id> <routes>"};
    }
    if (out.size() == kMaxTokenHashes) {
      return TokenFileError{line_no, "more than " + std::to_string(kMaxTokenHashes) + " token hashes"};
    }
    if (!seen.insert(t.hash).second) return TokenFileError{line_no, "this token hash is listed on an earlier line"};
    out.push_back(std::move(t));
  }
  // Found by the fuzzer (tests/fuzz/regressions/tokens-empty-file): an empty file was reported as "line 0".
  if (out.empty()) return TokenFileError{std::max<std::size_t>(line_no, 1), "the file holds no token hash"};
  return out;
}

std::optional<std::size_t> TokenVerifier::Verify(std::string_view token) const {
  TokenHash h{};
  unsigned int len = 0;
  if (EVP_Digest(token.data(), token.size(), h.data(), &len, EVP_sha256(), nullptr) != 1 || len != h.size()) {
    throw std::runtime_error("SHA-256 of a bearer token failed (OpenSSL)");
  }
  // No early exit and no branch on a comparison: the time taken does not depend on which entry (if any)
  // matches. Hashes are unique (ParseTokensFile), so at most one entry contributes its index + 1.
  std::size_t found = 0;
  for (std::size_t i = 0; i < terminals_.size(); ++i) {
    const std::size_t equal = static_cast<std::size_t>(CRYPTO_memcmp(terminals_[i].hash.data(), h.data(), h.size()) == 0);
    found |= (i + 1) & (std::size_t{0} - equal);  // all-ones mask when equal
  }
  if (found == 0) return std::nullopt;
  return found - 1;
}

}  // namespace scangate::server
