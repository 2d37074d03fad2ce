// Unit tests of server/http/unicode_nfc.h: ASCII and composed text are NFC; decomposed (NFD) spellings,
// combining marks in non-canonical order and compatibility-free but non-NFC singletons are not.
#include "server/http/unicode_nfc.h"

#include <gtest/gtest.h>

#include <string>

namespace scangate::server {
namespace {

TEST(UnicodeNfc, AsciiIsNfc) {
  EXPECT_TRUE(IsNfc(""));
  EXPECT_TRUE(IsNfc("0036141403000821SN0001"));
  EXPECT_TRUE(IsNfc(std::string(512, 'x')));
}

TEST(UnicodeNfc, ComposedIsNfcDecomposedIsNot) {
  EXPECT_TRUE(IsNfc("caf\xC3\xA9"));            // "café" with U+00E9
  EXPECT_FALSE(IsNfc("cafe\xCC\x81"));          // "cafe" + U+0301 COMBINING ACUTE ACCENT (NFD of the same)
  EXPECT_TRUE(IsNfc("\xE6\x97\xA5\xE6\x9C\xAC"));  // CJK: NFC
  EXPECT_TRUE(IsNfc("\xED\x95\x9C"));           // U+D55C HANGUL SYLLABLE HAN (precomposed)
  EXPECT_FALSE(IsNfc("\xE1\x84\x92\xE1\x85\xA1\xE1\x86\xAB"));  // the same syllable as conjoining jamo
  EXPECT_FALSE(IsNfc("\xE2\x84\xAB"));          // U+212B ANGSTROM SIGN: a singleton, NFC is U+00C5
  EXPECT_TRUE(IsNfc("\xC3\x85"));               // U+00C5
  // Two combining marks of different classes in non-canonical order (dot below, class 220, belongs first).
  EXPECT_FALSE(IsNfc("q\xCC\x87\xCC\xA3"));     // q + U+0307 + U+0323
  EXPECT_TRUE(IsNfc("q\xCC\xA3\xCC\x87"));      // q + U+0323 + U+0307 (canonical order, no composite)
  EXPECT_TRUE(IsNfc("\xF0\x9F\x98\x80"));       // U+1F600: outside the BMP, no decomposition
}

TEST(UnicodeNfc, LongestKeyFits) {
  std::string key;
  while (key.size() + 2 <= 512) key += "\xC3\xA9";  // 256 × U+00E9: 512 bytes
  EXPECT_TRUE(IsNfc(key));
  key.resize(508);      // 254 × U+00E9
  key += "e\xCC\x81";  // ... then a decomposed é: 511 bytes
  EXPECT_FALSE(IsNfc(key));
}

}  // namespace
}  // namespace scangate::server
