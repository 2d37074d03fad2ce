// server/http/ascii.h: the case-insensitive compare of HTTP tokens (ASCII letters only: no locale, no other byte
// folded) and the OWS trim (space and tab only; a CR or NUL is content, not whitespace).
#include "server/http/ascii.h"

#include <gtest/gtest.h>

namespace scangate::server {
namespace {

TEST(Ascii, EqualsIgnoringAsciiCaseFoldsLettersOnly) {
  EXPECT_TRUE(EqualsIgnoringAsciiCase("Application/JSON", "application/json"));
  EXPECT_TRUE(EqualsIgnoringAsciiCase("", ""));
  EXPECT_FALSE(EqualsIgnoringAsciiCase("chunked", "chunke"));
  EXPECT_FALSE(EqualsIgnoringAsciiCase("chunked ", "chunked"));
  // '@' (0x40) and '`' (0x60) differ by the case bit but are not letters; neither are '[' and '{'.
  EXPECT_FALSE(EqualsIgnoringAsciiCase("@", "`"));
  EXPECT_FALSE(EqualsIgnoringAsciiCase("[", "{"));
  // Bytes above 0x7F compare as they are (no Latin-1 folding: "\xC9" is not "\xE9").
  EXPECT_FALSE(EqualsIgnoringAsciiCase("\xC9", "\xE9"));
  EXPECT_TRUE(EqualsIgnoringAsciiCase("\xC9", "\xC9"));
}

TEST(Ascii, TrimOwsRemovesSpaceAndTabAtBothEndsOnly) {
  struct Case {
    std::string_view in, want;
  };
  const Case cases[] = {
      {" \t chunked\t ", "chunked"}, {"a b", "a b"}, {" \t ", ""}, {"", ""},
      {"\rchunked\r", "\rchunked\r"},                           // CR is content
      {std::string_view("\0x\0", 3), std::string_view("\0x\0", 3)},  // so is NUL
  };
  for (const Case& c : cases) EXPECT_EQ(TrimOws(c.in), c.want) << "[" << c.in << "]";
}

}  // namespace
}  // namespace scangate::server
