#include "core/digest.h"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>

#include <cstring>
#include <stdexcept>
#include <tuple>

namespace scangate {
namespace {

constexpr std::size_t kSha256BlockBytes = 64;   // RFC 2104 "B" for SHA-256
constexpr std::size_t kSha256DigestBytes = 32;  // RFC 2104 "L" for SHA-256
constexpr unsigned char kIpad = 0x36;
constexpr unsigned char kOpad = 0x5c;
static_assert(std::tuple_size_v<Digest> == kSha256DigestBytes);

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

struct MdFree {
  void operator()(EVP_MD* md) const { EVP_MD_free(md); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};
using MdPtr = std::unique_ptr<EVP_MD, MdFree>;
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, MdCtxFree>;

// Wipes a stack buffer holding key material on every exit path.
template <std::size_t N>
struct CleansedBytes {
  unsigned char bytes[N] = {};
  CleansedBytes() = default;
  CleansedBytes(const CleansedBytes&) = delete;
  CleansedBytes& operator=(const CleansedBytes&) = delete;
  ~CleansedBytes() { OPENSSL_cleanse(bytes, N); }
};

// The calling thread's scratch context, reused across calls (one EVP_MD_CTX_new per thread, not per call).
// Threading: each thread gets its own; it never escapes the calling operator() invocation.
EVP_MD_CTX* ScratchCtx() {
  thread_local MdCtxPtr ctx;
  if (ctx == nullptr) {
    ctx.reset(EVP_MD_CTX_new());
    if (ctx == nullptr) throw std::runtime_error(OpenSslError("EVP_MD_CTX_new failed"));
  }
  return ctx.get();
}

// Starts from a copy of `from` (a precomputed pad state), absorbs `data`, writes the 32-byte digest to `out`.
void HashFrom(EVP_MD_CTX* scratch, const EVP_MD_CTX* from, const void* data, std::size_t size, unsigned char* out) {
  unsigned int len = 0;
  if (EVP_MD_CTX_copy_ex(scratch, from) != 1 || EVP_DigestUpdate(scratch, data, size) != 1 ||
      EVP_DigestFinal_ex(scratch, out, &len) != 1 || len != kSha256DigestBytes) {
    throw std::runtime_error(OpenSslError("HMAC-SHA256 digest step failed"));
  }
}

}  // namespace

struct Digester::Md {
  // Fetched once; every call passes it explicitly, so no call looks the algorithm up by name.
  MdPtr md;
  Md() : md(EVP_MD_fetch(nullptr, "SHA256", nullptr)) {
    if (md == nullptr) throw std::runtime_error(OpenSslError("EVP_MD_fetch(SHA256) failed"));
    if (EVP_MD_get_block_size(md.get()) != static_cast<int>(kSha256BlockBytes) ||
        EVP_MD_get_size(md.get()) != static_cast<int>(kSha256DigestBytes)) {
      throw std::runtime_error("EVP_MD_fetch(SHA256) returned an unexpected block or digest size");
    }
  }
};

// RFC 2104: HMAC(K, m) = H((K0 ^ opad) || H((K0 ^ ipad) || m)), K0 = K (or H(K) when longer than the block)
// zero-padded to the block. `inner` and `outer` have absorbed exactly one block, K0 ^ ipad and K0 ^ opad.
// Never modified after construction: operator() only reads them (EVP_MD_CTX_copy_ex's source is const).
struct Digester::Hmac {
  MdCtxPtr inner;
  MdCtxPtr outer;
  Hmac(const EVP_MD* md, std::string_view secret) : inner(EVP_MD_CTX_new()), outer(EVP_MD_CTX_new()) {
    if (inner == nullptr || outer == nullptr) throw std::runtime_error(OpenSslError("EVP_MD_CTX_new failed"));
    CleansedBytes<kSha256BlockBytes> k0;
    if (secret.size() > kSha256BlockBytes) {
      unsigned int len = 0;
      if (EVP_Digest(secret.data(), secret.size(), k0.bytes, &len, md, nullptr) != 1 || len != kSha256DigestBytes) {
        throw std::runtime_error(OpenSslError("EVP_Digest(SHA256) of the HMAC secret failed"));
      }
    } else {
      std::memcpy(k0.bytes, secret.data(), secret.size());
    }
    Absorb(inner.get(), md, k0.bytes, kIpad);
    Absorb(outer.get(), md, k0.bytes, kOpad);
  }

 private:
  static void Absorb(EVP_MD_CTX* ctx, const EVP_MD* md, const unsigned char* k0, unsigned char pad_byte) {
    CleansedBytes<kSha256BlockBytes> padded;
    for (std::size_t i = 0; i < kSha256BlockBytes; ++i) padded.bytes[i] = k0[i] ^ pad_byte;
    if (EVP_DigestInit_ex2(ctx, md, nullptr) != 1 || EVP_DigestUpdate(ctx, padded.bytes, kSha256BlockBytes) != 1) {
      throw std::runtime_error(OpenSslError("HMAC-SHA256 key setup failed"));
    }
  }
};

Digester Digester::Sha256() { return Digester(std::make_shared<const Md>(), nullptr); }

Digester Digester::HmacSha256(std::string_view secret) {
  if (secret.empty()) throw std::invalid_argument("HMAC-SHA256 digest secret must not be empty");
  auto md = std::make_shared<const Md>();
  auto hmac = std::make_shared<const Hmac>(md->md.get(), secret);
  return Digester(std::move(md), std::move(hmac));
}

Digest Digester::operator()(std::string_view key) const {
  Digest out;
  EVP_MD_CTX* scratch = ScratchCtx();
  if (hmac_ == nullptr) {
    unsigned int len = 0;
    if (EVP_DigestInit_ex2(scratch, md_->md.get(), nullptr) != 1 ||
        EVP_DigestUpdate(scratch, key.data(), key.size()) != 1 || EVP_DigestFinal_ex(scratch, out.data(), &len) != 1 ||
        len != out.size()) {
      throw std::runtime_error(OpenSslError("SHA-256 digest failed"));
    }
  } else {
    unsigned char inner_digest[kSha256DigestBytes];
    HashFrom(scratch, hmac_->inner.get(), key.data(), key.size(), inner_digest);
    HashFrom(scratch, hmac_->outer.get(), inner_digest, sizeof inner_digest, out.data());
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
