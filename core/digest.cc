#include "core/digest.h"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <stdexcept>

namespace scangate {
namespace {

std::string OpenSslError(const char* what) {
  std::string msg = what;
  if (unsigned long e = ERR_get_error(); e != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    msg += ": ";
    msg += buf;
  }
  return msg;
}

}  // namespace

struct Digester::Md {
  // Fetched once: EVP_Digest/HMAC with a pre-fetched EVP_MD skip the per-call algorithm lookup.
  EVP_MD* md = nullptr;
  Md() : md(EVP_MD_fetch(nullptr, "SHA256", nullptr)) {
    if (md == nullptr) throw std::runtime_error(OpenSslError("EVP_MD_fetch(SHA256) failed"));
  }
  ~Md() { EVP_MD_free(md); }
  Md(const Md&) = delete;
  Md& operator=(const Md&) = delete;
};

struct Digester::Secret {
  std::string bytes;
  explicit Secret(std::string_view s) : bytes(s) {}
  ~Secret() { OPENSSL_cleanse(bytes.data(), bytes.size()); }
  Secret(const Secret&) = delete;
  Secret& operator=(const Secret&) = delete;
};

Digester Digester::Sha256() { return Digester(std::make_shared<const Md>(), nullptr); }

Digester Digester::HmacSha256(std::string_view secret) {
  if (secret.empty()) throw std::invalid_argument("HMAC-SHA256 digest secret must not be empty");
  return Digester(std::make_shared<const Md>(), std::make_shared<const Secret>(secret));
}

Digest Digester::operator()(std::string_view key) const {
  Digest out;
  unsigned int len = 0;
  if (secret_ == nullptr) {
    if (EVP_Digest(key.data(), key.size(), out.data(), &len, md_->md, nullptr) != 1 || len != out.size()) {
      throw std::runtime_error(OpenSslError("EVP_Digest(SHA256) failed"));
    }
  } else {
    // HMAC() is the one-shot API (not deprecated in OpenSSL 3; the HMAC_CTX family is).
    const auto* k = reinterpret_cast<const unsigned char*>(secret_->bytes.data());
    const auto* m = reinterpret_cast<const unsigned char*>(key.data());
    if (HMAC(md_->md, k, static_cast<int>(secret_->bytes.size()), m, key.size(), out.data(), &len) == nullptr ||
        len != out.size()) {
      throw std::runtime_error(OpenSslError("HMAC(SHA256) failed"));
    }
  }
  return out;
}

std::string ToHex(const Digest& d) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s(d.size() * 2, '\0');
  for (std::size_t i = 0; i < d.size(); ++i) {
    s[2 * i] = kHex[d[i] >> 4];
    s[2 * i + 1] = kHex[d[i] & 0xf];
  }
  return s;
}

std::optional<Digest> DigestFromHex(std::string_view hex) {
  Digest d;
  if (hex.size() != d.size() * 2) return std::nullopt;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (std::size_t i = 0; i < d.size(); ++i) {
    const int hi = nibble(hex[2 * i]);
    const int lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    d[i] = static_cast<std::uint8_t>(hi << 4 | lo);
  }
  return d;
}

}  // namespace scangate
