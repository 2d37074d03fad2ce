// Tests storage/pg/pg_array.h: the exact bytes of PostgreSQL's binary array format (array_send), without a
// server. That the server accepts them is proven by store_test (every batch is sent this way).
#include "storage/pg/pg_array.h"

#include <gtest/gtest.h>

#include <string>

namespace scangate::storage {
namespace {

std::string Bytes(std::initializer_list<int> bytes) {
  std::string s;
  for (const int b : bytes) s += static_cast<char>(b);
  return s;
}

// Header: ndim 1, flags, element OID, dimension length, lower bound 1 — all int32 big-endian.
std::string Header(bool has_nulls, std::uint32_t oid, std::uint32_t n) {
  auto be = [](std::uint32_t v) { return Bytes({int(v >> 24 & 255), int(v >> 16 & 255), int(v >> 8 & 255), int(v & 255)}); };
  return be(1) + be(has_nulls ? 1 : 0) + be(oid) + be(n) + be(1);
}

TEST(PgBinaryArray, ByteaElementsAreLengthPrefixed) {
  PgBinaryArray a(kOidBytea);
  a.Add(std::string("\x00\xff", 2));
  a.Add("abc");
  EXPECT_EQ(a.size(), 2u);
  EXPECT_EQ(std::string(a.Finish()), Header(false, 17, 2) + Bytes({0, 0, 0, 2, 0, 255}) + Bytes({0, 0, 0, 3}) + "abc");
}

TEST(PgBinaryArray, NullIsMinusOneAndSetsTheFlag) {
  PgBinaryArray a(kOidText);
  a.Add("x");
  a.AddNull();
  a.Add("");  // an empty string is an element of length 0, not NULL
  EXPECT_EQ(std::string(a.Finish()),
            Header(true, 25, 3) + Bytes({0, 0, 0, 1}) + "x" + Bytes({255, 255, 255, 255}) + Bytes({0, 0, 0, 0}));
}

TEST(PgBinaryArray, Int8IsBigEndianTwosComplement) {
  PgBinaryArray a(kOidInt8);
  a.AddInt8(0x0102030405060708);
  a.AddInt8(-2);
  EXPECT_EQ(std::string(a.Finish()), Header(false, 20, 2) + Bytes({0, 0, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8}) +
                                         Bytes({0, 0, 0, 8, 255, 255, 255, 255, 255, 255, 255, 254}));
  PgBinaryArray t(kOidText);
  EXPECT_THROW(t.AddInt8(1), std::logic_error);
}

TEST(PgBinaryArray, Int4IsBigEndianTwosComplement) {
  PgBinaryArray a(kOidInt4);
  a.AddInt4(0x01020304);
  a.AddNull();
  a.AddInt4(-2);
  EXPECT_EQ(std::string(a.Finish()), Header(true, 23, 3) + Bytes({0, 0, 0, 4, 1, 2, 3, 4}) +
                                         Bytes({255, 255, 255, 255}) + Bytes({0, 0, 0, 4, 255, 255, 255, 254}));
  PgBinaryArray t(kOidInt8);
  EXPECT_THROW(t.AddInt4(1), std::logic_error);
}

TEST(PgBinaryArray, EmptyArrayHasNoDimensions) {
  PgBinaryArray a(kOidBytea);
  EXPECT_EQ(std::string(a.Finish()), Bytes({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 17}));
}

// Finish() may be called, more elements added, and Finish() called again (the header follows).
TEST(PgBinaryArray, FinishTwice) {
  PgBinaryArray a(kOidBytea);
  a.Add("a");
  EXPECT_EQ(std::string(a.Finish()), Header(false, 17, 1) + Bytes({0, 0, 0, 1}) + "a");
  a.AddNull();
  EXPECT_EQ(std::string(a.Finish()), Header(true, 17, 2) + Bytes({0, 0, 0, 1}) + "a" + Bytes({255, 255, 255, 255}));
}

// Dimension length above 255 exercises every header byte order position that matters for batches.
TEST(PgBinaryArray, LargeCountIsBigEndian) {
  PgBinaryArray a(kOidBytea);
  for (int i = 0; i < 4096 + 3; ++i) a.Add("");
  const std::string out(a.Finish());
  ASSERT_EQ(out.size(), 20u + 4 * (4096 + 3));
  EXPECT_EQ(out.substr(12, 4), Bytes({0, 0, 0x10, 0x03}));
}

}  // namespace
}  // namespace scangate::storage
