// core/utf8.h: strict UTF-8 (RFC 3629) — valid sequences of every length accepted; truncated, overlong,
// surrogate, out-of-range and stray continuation bytes rejected; NUL only when allowed.
#include "core/utf8.h"

#include <string>

#include <gtest/gtest.h>

namespace scangate {
namespace {

using namespace std::string_literals;

TEST(Utf8, AcceptsWellFormed) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("till-7"));
  EXPECT_TRUE(IsValidUtf8("\xC3\xA9"));          // U+00E9
  EXPECT_TRUE(IsValidUtf8("till-\xE2\x82\xAC"));  // U+20AC
  EXPECT_TRUE(IsValidUtf8("\xF0\x9F\x98\x80"));  // U+1F600
  EXPECT_TRUE(IsValidUtf8("\xF4\x8F\xBF\xBF"));  // U+10FFFF, the last code point
  EXPECT_TRUE(IsValidUtf8("\xED\x9F\xBF"));      // U+D7FF, just below the surrogates
}

TEST(Utf8, RejectsMalformed) {
  EXPECT_FALSE(IsValidUtf8("\x80"));              // stray continuation byte
  EXPECT_FALSE(IsValidUtf8("\xC3"));              // truncated at the end
  EXPECT_FALSE(IsValidUtf8("\xE2\x82"));          // truncated three-byte sequence
  EXPECT_FALSE(IsValidUtf8("\xC3(x"));            // bad continuation
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xE0\x80\xAF"));      // overlong, three bytes
  EXPECT_FALSE(IsValidUtf8("\xF0\x80\x80\xAF"));  // overlong, four bytes
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // U+D800, a surrogate
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // U+110000, above the range
  EXPECT_FALSE(IsValidUtf8("\xFF"));              // never valid
}

TEST(Utf8, NulOnlyWhenAllowed) {
  const std::string with_nul = "a\0b"s;
  EXPECT_TRUE(IsValidUtf8(with_nul));
  EXPECT_FALSE(IsValidUtf8(with_nul, /*allow_nul=*/false));
  EXPECT_TRUE(IsValidUtf8("ab", /*allow_nul=*/false));
}

}  // namespace
}  // namespace scangate
