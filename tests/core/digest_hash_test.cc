// core/digest_hash.h: DigestEq is exactly array equality and DigestLess exactly bytea (memcmp) order — on
// random digests and on pairs that differ in a single byte at every position, in both directions, including
// bytes with the high bit set (a signed compare would get those wrong).
#include "core/digest_hash.h"

#include <cstring>
#include <random>

#include <gtest/gtest.h>

namespace scangate {
namespace {

Digest Random(std::mt19937_64& rng) {
  Digest d;
  for (auto& b : d) b = static_cast<std::uint8_t>(rng());
  return d;
}

int Sign(int v) { return (v > 0) - (v < 0); }

void ExpectAgreesWithMemcmp(const Digest& a, const Digest& b) {
  const int m = Sign(std::memcmp(a.data(), b.data(), a.size()));
  EXPECT_EQ(DigestLess{}(a, b), m < 0);
  EXPECT_EQ(DigestLess{}(b, a), m > 0);
  EXPECT_EQ(DigestEq{}(a, b), m == 0);
  EXPECT_EQ(DigestEq{}(a, b), a == b);
}

TEST(DigestCompare, RandomPairsAgreeWithMemcmp) {
  std::mt19937_64 rng(20261201);
  for (int i = 0; i < 100000; ++i) ExpectAgreesWithMemcmp(Random(rng), Random(rng));
}

TEST(DigestCompare, OneByteApartAtEveryPosition) {
  std::mt19937_64 rng(7);
  for (std::size_t pos = 0; pos < 32; ++pos) {
    for (const auto& [lo, hi] : {std::pair{0x00, 0x01}, std::pair{0x7f, 0x80}, std::pair{0x00, 0xff},
                                std::pair{0xfe, 0xff}}) {
      SCOPED_TRACE(testing::Message() << "byte " << pos << ": " << lo << " vs " << hi);
      Digest a = Random(rng);
      Digest b = a;
      a[pos] = static_cast<std::uint8_t>(lo);
      b[pos] = static_cast<std::uint8_t>(hi);
      ExpectAgreesWithMemcmp(a, b);
      EXPECT_TRUE(DigestLess{}(a, b));
      EXPECT_FALSE(DigestEq{}(a, b));
      // An earlier byte decides over every later one.
      if (pos + 1 < 32) {
        Digest c = a, e = b;
        c[pos + 1] = 0xff;
        e[pos + 1] = 0x00;
        ExpectAgreesWithMemcmp(c, e);
        EXPECT_TRUE(DigestLess{}(c, e));
      }
    }
  }
  const Digest z = Random(rng);
  ExpectAgreesWithMemcmp(z, z);
  EXPECT_FALSE(DigestLess{}(z, z));
}

}  // namespace
}  // namespace scangate
