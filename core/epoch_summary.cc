#include "core/epoch_summary.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <stdexcept>

#include <openssl/evp.h>

namespace scangate {
namespace {

constexpr char kMagic[4] = {'S', 'G', 'E', 'S'};  // ScanGate Epoch Summary
constexpr std::uint8_t kVersion = 1;
constexpr int kLineBits = 512;
constexpr std::uint32_t kProbeStep = 0x9E3779B9u;  // 2^32 / golden ratio: successive probes' bits decorrelate

// Header, little-endian: magic[4] version[1] probes[1] zero[2] keys[8] lines[8] sha256[32] (of the 24 bytes before it
// and the lines). The version names the format AND the hashing (LineOf, the probe sequence): summaries are built by
// one instance and read by every other, so a change to either is a new version, which older binaries refuse
// (tests/core/epoch_summary_test.cc holds a known answer).
constexpr std::size_t kOffVersion = 4, kOffProbes = 5, kOffKeys = 8, kOffLines = 16, kOffSha = 24;
static_assert(kOffSha + 32 == EpochSummary::kHeaderBytes);
static_assert(std::endian::native == std::endian::little, "the byte format is the words' in-memory form");

std::uint64_t Load64(const std::uint8_t* p) {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
std::uint32_t Load32(const std::uint8_t* p) {
  std::uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The line of a digest: bytes 8..15 mapped onto [0, lines) by multiply-shift (no modulo bias worth counting).
std::uint64_t LineOf(const Digest& d, std::uint64_t lines) {
  return static_cast<std::uint64_t>((static_cast<unsigned __int128>(Load64(d.data() + 8)) * lines) >> 64);
}

// Expected false-positive rate of a blocked filter with `lambda` keys per 512-bit line on average and k probes
// (each a uniform bit, with replacement): sum over j ~ Poisson(lambda) of (1 - (1 - 1/512)^(j k))^k. The model
// GeometryFor minimises; tests/core/epoch_summary_test.cc holds the built filters against it.
double ModelFp(double lambda, int k) {
  const double keep = std::log1p(-1.0 / kLineBits);  // ln(1 - 1/512)
  const int j_max = static_cast<int>(lambda + 12 * std::sqrt(lambda) + 40);
  double p = std::exp(-lambda);  // Pois(0)
  double fp = 0;
  for (int j = 0; j <= j_max; ++j) {
    if (j > 0) p *= lambda / j;
    const double bit_set = 1 - std::exp(keep * j * k);
    fp += p * std::pow(bit_set, k);
  }
  return fp;
}

// SHA-256 of the header's first kOffSha bytes and the lines: what the header's last 32 bytes hold.
std::string Sha256(const std::uint8_t* head, const std::uint64_t* words, std::size_t n) {
  struct Free {
    void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
  };
  std::unique_ptr<EVP_MD_CTX, Free> ctx(EVP_MD_CTX_new());
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (ctx == nullptr || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1 ||
      EVP_DigestUpdate(ctx.get(), head, kOffSha) != 1 ||
      EVP_DigestUpdate(ctx.get(), words, n * sizeof(std::uint64_t)) != 1 ||
      EVP_DigestFinal_ex(ctx.get(), out, &len) != 1 || len != 32)
    throw std::runtime_error("EpochSummary: SHA-256 failed");
  return std::string(reinterpret_cast<const char*>(out), len);
}

std::nullopt_t Reject(std::string* why, const char* reason) {
  if (why != nullptr) *why = reason;
  return std::nullopt;
}

}  // namespace

EpochSummary::Geometry EpochSummary::GeometryFor(std::uint64_t expected_keys, double bits_per_key) {
  if (!(bits_per_key > 0) || !std::isfinite(bits_per_key))
    throw std::invalid_argument("EpochSummary: bits per key must be positive");
  const double bits = std::ceil(static_cast<double>(std::max<std::uint64_t>(expected_keys, 1)) * bits_per_key);
  const double lines = std::max(1.0, std::ceil(bits / kLineBits));
  if (lines * kLineBytes + kHeaderBytes > static_cast<double>(kEpochSummaryMaxBytes))
    throw std::invalid_argument("EpochSummary: more than 1 GiB for this many keys");
  Geometry g;
  g.lines = static_cast<std::uint64_t>(lines);
  const double lambda = static_cast<double>(std::max<std::uint64_t>(expected_keys, 1)) / lines;
  double best = 2;
  for (int k = 1; k <= kEpochSummaryMaxProbes; ++k) {
    const double fp = ModelFp(lambda, k);
    if (fp < best) best = fp, g.probes = k;
  }
  return g;
}

EpochSummary::EpochSummary(Geometry g) {
  if (g.lines == 0 || g.probes < 1 || g.probes > kEpochSummaryMaxProbes ||
      g.lines > (kEpochSummaryMaxBytes - kHeaderBytes) / kLineBytes)
    throw std::invalid_argument("EpochSummary: geometry out of range");
  words_.assign(g.lines * kWordsPerLine, 0);
  probes_ = g.probes;
}

void EpochSummary::Add(const Digest& d) {
  std::uint64_t* line = words_.data() + LineOf(d, lines()) * kWordsPerLine;
  std::uint32_t h = Load32(d.data());
  for (int i = 0; i < probes_; ++i, h *= kProbeStep) {
    const std::uint32_t bit = h >> (32 - 9);  // the top 9 bits: a bit of the 512
    line[bit >> 6] |= std::uint64_t{1} << (bit & 63);
  }
  ++keys_;
}

bool EpochSummary::MayContain(const Digest& d) const {
  const std::uint64_t* line = words_.data() + LineOf(d, lines()) * kWordsPerLine;
  std::uint32_t h = Load32(d.data());
  for (int i = 0; i < probes_; ++i, h *= kProbeStep) {
    const std::uint32_t bit = h >> (32 - 9);
    if ((line[bit >> 6] & (std::uint64_t{1} << (bit & 63))) == 0) return false;
  }
  return true;
}

double EpochSummary::EstimatedFpRate() const {
  double sum = 0;
  for (std::size_t l = 0; l < words_.size(); l += kWordsPerLine) {
    int set = 0;
    for (std::size_t w = 0; w < kWordsPerLine; ++w) set += std::popcount(words_[l + w]);
    sum += std::pow(static_cast<double>(set) / kLineBits, probes_);
  }
  return sum / static_cast<double>(lines());
}

std::string EpochSummary::Serialize() const {
  std::string out(kHeaderBytes, '\0');
  std::memcpy(out.data(), kMagic, sizeof kMagic);
  out[kOffVersion] = static_cast<char>(kVersion);
  out[kOffProbes] = static_cast<char>(probes_);
  const std::uint64_t n_lines = lines();
  std::memcpy(out.data() + kOffKeys, &keys_, 8);
  std::memcpy(out.data() + kOffLines, &n_lines, 8);
  const std::string sha = Sha256(reinterpret_cast<const std::uint8_t*>(out.data()), words_.data(), words_.size());
  std::memcpy(out.data() + kOffSha, sha.data(), sha.size());
  out.append(reinterpret_cast<const char*>(words_.data()), words_.size() * sizeof(std::uint64_t));
  return out;
}

std::optional<EpochSummary> EpochSummary::Parse(std::string_view bytes, std::string* why) {
  if (bytes.size() < kHeaderBytes) return Reject(why, "shorter than the header");
  const auto* p = reinterpret_cast<const std::uint8_t*>(bytes.data());
  if (std::memcmp(p, kMagic, sizeof kMagic) != 0) return Reject(why, "not an epoch summary (magic)");
  if (p[kOffVersion] != kVersion) return Reject(why, "unknown format version");
  const int probes = p[kOffProbes];
  if (probes < 1 || probes > kEpochSummaryMaxProbes || p[6] != 0 || p[7] != 0)
    return Reject(why, "probes out of range");
  const std::uint64_t n_lines = Load64(p + kOffLines);
  if (n_lines == 0 || n_lines > (kEpochSummaryMaxBytes - kHeaderBytes) / kLineBytes ||
      bytes.size() != kHeaderBytes + n_lines * kLineBytes)
    return Reject(why, "length does not match the header's line count");
  EpochSummary s;
  s.probes_ = probes;
  s.keys_ = Load64(p + kOffKeys);
  s.words_.resize(n_lines * kWordsPerLine);
  std::memcpy(s.words_.data(), p + kHeaderBytes, n_lines * kLineBytes);
  if (Sha256(p, s.words_.data(), s.words_.size()) != bytes.substr(kOffSha, 32))
    return Reject(why, "the header and lines do not match their SHA-256");
  return s;
}

}  // namespace scangate
