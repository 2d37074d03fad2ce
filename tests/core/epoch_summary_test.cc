// core/epoch_summary.h: no false negatives (built, round-tripped, over-filled), the false-positive rate at design load
// against the 0.1 % target and against EstimatedFpRate(), the geometry's limits, Parse's refusals, and the byte format
// held by a known answer (every instance must read the summaries any other built).
#include "core/epoch_summary.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "core/digest.h"
#include "tests/core/counter_digest.h"

namespace scangate {
namespace {

using test_support::CounterDigest;

EpochSummary Built(std::uint64_t keys, std::uint64_t sized_for, std::uint64_t salt = 1) {
  EpochSummary s = EpochSummary::ForKeys(sized_for);
  for (std::uint64_t i = 0; i < keys; ++i) s.Add(CounterDigest(i, salt));
  return s;
}

// Every digest added answers "maybe", in the summary and in every copy parsed from its bytes; its stored form (the
// first 16 bytes, as PostgreSQL returns it) is the same key.
TEST(EpochSummary, NoFalseNegatives) {
  constexpr std::uint64_t kKeys = 200'000;
  const EpochSummary s = Built(kKeys, kKeys);
  const auto back = EpochSummary::Parse(s.Serialize());
  ASSERT_TRUE(back.has_value());
  std::uint64_t missed = 0, missed_back = 0, missed_stored = 0;
  for (std::uint64_t i = 0; i < kKeys; ++i) {
    const Digest d = CounterDigest(i, 1);
    missed += !s.MayContain(d);
    missed_back += !back->MayContain(d);
    missed_stored += !back->MayContain(StoredDigest(d));
  }
  EXPECT_EQ(missed, 0u);
  EXPECT_EQ(missed_back, 0u);
  EXPECT_EQ(missed_stored, 0u);
  EXPECT_EQ(back->keys(), kKeys);
}

// Four times the keys it was sized for: the false-positive rate rises (and the estimate says so), nothing is missed.
TEST(EpochSummary, OverFilledStillHasNoFalseNegatives) {
  constexpr std::uint64_t kKeys = 100'000;
  const EpochSummary s = Built(4 * kKeys, kKeys);
  std::uint64_t missed = 0;
  for (std::uint64_t i = 0; i < 4 * kKeys; ++i) missed += !s.MayContain(CounterDigest(i, 1));
  EXPECT_EQ(missed, 0u);
  EXPECT_GT(s.EstimatedFpRate(), 0.01);
}

// At design load the default geometry meets the 0.1 % target, and EstimatedFpRate() (from the bits) agrees with the
// measured rate. Tolerances: 3 binomial sigmas for the sample of absent digests queried.
TEST(EpochSummary, FalsePositiveRateAtDesignLoad) {
  constexpr std::uint64_t kKeys = 200'000, kQueries = 2'000'000;
  constexpr double kTarget = 0.001;
  const EpochSummary s = Built(kKeys, kKeys);
  std::uint64_t fp = 0;
  for (std::uint64_t i = 0; i < kQueries; ++i) fp += s.MayContain(CounterDigest(i, 2));
  const double measured = static_cast<double>(fp) / kQueries;
  const double est = s.EstimatedFpRate();
  const double sigma = std::sqrt(est * (1 - est) / kQueries);
  EXPECT_LE(measured, kTarget + 3 * std::sqrt(kTarget * (1 - kTarget) / kQueries));
  EXPECT_LE(est, kTarget);
  EXPECT_NEAR(measured, est, 0.03 * est + 3 * sigma) << "EstimatedFpRate from the bits";
  EXPECT_GT(measured, 0.0) << "a summary that answers 'absent' to everything would pass the rest";
}

// The default geometry: ~2 bytes per key, one 64-byte line per 32 keys; the probe count the model picks; limits.
TEST(EpochSummary, Geometry) {
  const auto g = EpochSummary::GeometryFor(3'000'000);
  EXPECT_EQ(g.lines, 3'000'000u * 16 / 512);
  EXPECT_EQ(g.probes, 10);
  EXPECT_EQ(EpochSummary::GeometryFor(0).lines, 1u);
  EXPECT_EQ(EpochSummary::GeometryFor(1).lines, 1u);
  EXPECT_LT(EpochSummary::GeometryFor(1'000'000, 10).probes, g.probes);
  EXPECT_THROW(EpochSummary::GeometryFor(1000, 0), std::invalid_argument);
  EXPECT_THROW(EpochSummary::GeometryFor(1000, -1), std::invalid_argument);
  EXPECT_THROW(EpochSummary::GeometryFor(1000, std::nan("")), std::invalid_argument);
  EXPECT_THROW(EpochSummary::GeometryFor(std::uint64_t{1} << 40), std::invalid_argument);  // > 1 GiB
  EXPECT_THROW(EpochSummary(EpochSummary::Geometry{0, 10}), std::invalid_argument);
  EXPECT_THROW(EpochSummary(EpochSummary::Geometry{1, 0}), std::invalid_argument);
  EXPECT_THROW(EpochSummary(EpochSummary::Geometry{1, kEpochSummaryMaxProbes + 1}), std::invalid_argument);
  const EpochSummary s = EpochSummary::ForKeys(3'000'000);
  EXPECT_EQ(s.bytes(), EpochSummary::kHeaderBytes + g.lines * 64);
  EXPECT_EQ(s.Serialize().size(), s.bytes());
}

// Bytes that are not exactly a summary do not parse, each for its reason: the caller then reads the epoch itself.
TEST(EpochSummary, ParseRefusesAnythingElse) {
  const std::string good = Built(1000, 1000).Serialize();
  std::string why;
  ASSERT_TRUE(EpochSummary::Parse(good, &why).has_value()) << why;
  const auto refused = [&](std::string bytes, const std::string& reason) {
    std::string w;
    EXPECT_FALSE(EpochSummary::Parse(bytes, &w).has_value()) << reason;
    EXPECT_NE(w.find(reason), std::string::npos) << w;
  };
  refused("", "shorter than the header");
  refused(good.substr(0, EpochSummary::kHeaderBytes - 1), "shorter than the header");
  refused(good.substr(0, good.size() - 1), "length");
  refused(good + '\0', "length");
  std::string b = good;
  b[0] = 'X';
  refused(b, "magic");
  b = good;
  b[4] = 2;
  refused(b, "version");
  b = good;
  b[5] = 0;
  refused(b, "probes");
  b = good;
  b[5] = kEpochSummaryMaxProbes + 1;
  refused(b, "probes");
  b = good;
  b[good.size() - 7] ^= 0x10;  // one bit of the last line
  refused(b, "SHA-256");
  b = good;
  b[8] ^= 1;  // the key count, in the header
  refused(b, "SHA-256");
}

// The format and the hashing are a contract between instances of different versions: a known input gives these
// bytes (their SHA-256, which tests/core/epoch_summary_known_answer.py computes from the format independently of the
// C++) and these answers. A change here is a new format version (core/epoch_summary.cc).
TEST(EpochSummary, KnownAnswer) {
  EpochSummary s(EpochSummary::Geometry{4, 10});
  Digest d{};
  for (int i = 0; i < 3; ++i) {
    for (std::size_t b = 0; b < d.size(); ++b) d[b] = static_cast<std::uint8_t>(31 * i + 7 * b + 1);
    s.Add(d);
  }
  const std::string bytes = s.Serialize();
  EXPECT_EQ(bytes.size(), 56u + 4 * 64);
  EXPECT_EQ(bytes.substr(0, 8), std::string("SGES\x01\x0a\0\0", 8));
  EXPECT_EQ(ToHex(Digester::Sha256()(bytes)), "74ad0c5745afe252e58eb9cdbc424d558617030f725cfbf3157bd72cfff68f4b");
  EXPECT_TRUE(s.MayContain(d));
  Digest absent{};
  absent[0] = 0xff;
  EXPECT_FALSE(s.MayContain(absent));
}

}  // namespace
}  // namespace scangate
