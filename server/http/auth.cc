#include "server/http/auth.h"

#include <algorithm>
#include <stdexcept>

#include <openssl/crypto.h>
#include <openssl/evp.h>

namespace scangate::server {

namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // upper case is rejected: the file format is lowercase (sha256sum's output)
}

std::string_view TrimBlank(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::variant<std::vector<TokenHash>, TokenFileError> ParseTokenHashes(std::string_view text) {
  std::vector<TokenHash> out;
  std::size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    const std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    line = TrimBlank(line);
    if (line.empty() || line.front() == '#') continue;
    // `sha256sum` prints "<hash>  -": accept that trailing "  -" too, nothing else.
    if (line.size() > 64 && TrimBlank(line.substr(64)) == "-") line = line.substr(0, 64);
    if (line.size() != 64) {
      return TokenFileError{line_no, "expected 64 lowercase hex characters (a SHA-256), got " +
                                         std::to_string(line.size()) + " characters"};
    }
    TokenHash h{};
    for (std::size_t i = 0; i < h.size(); ++i) {
      const int hi = HexValue(line[2 * i]);
      const int lo = HexValue(line[2 * i + 1]);
      if (hi < 0 || lo < 0) return TokenFileError{line_no, "expected lowercase hex digits 0-9a-f only"};
      h[i] = static_cast<std::uint8_t>(hi * 16 + lo);
    }
    if (out.size() == kMaxTokenHashes) {
      return TokenFileError{line_no, "more than " + std::to_string(kMaxTokenHashes) + " token hashes"};
    }
    out.push_back(h);
  }
  // Found by the fuzzer (tests/fuzz/regressions/tokens-empty-file): an empty file was reported as "line 0".
  if (out.empty()) return TokenFileError{std::max<std::size_t>(line_no, 1), "the file holds no token hash"};
  return out;
}

bool TokenVerifier::Verify(std::string_view token) const {
  TokenHash h{};
  unsigned int len = 0;
  if (EVP_Digest(token.data(), token.size(), h.data(), &len, EVP_sha256(), nullptr) != 1 || len != h.size()) {
    throw std::runtime_error("SHA-256 of a bearer token failed (OpenSSL)");
  }
  // No early exit: the time taken does not depend on which entry (if any) matches.
  int matched = 0;
  for (const TokenHash& stored : hashes_) matched |= static_cast<int>(CRYPTO_memcmp(stored.data(), h.data(), h.size()) == 0);
  return matched != 0;
}

}  // namespace scangate::server
