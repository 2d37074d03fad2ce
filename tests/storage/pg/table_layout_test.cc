// Tests storage/pg/table_layout.h without PostgreSQL: the statements for each layout, the stored form of a digest
// read back in either width (binary: 32 or 16 bytes; text: bytea hex or a uuid) and nothing else, the hex of a digest
// column per layout, and which SQLSTATEs mean "the table changed under the statement".
#include "storage/pg/table_layout.h"

#include <gtest/gtest.h>

#include <string>

namespace scangate::storage {
namespace {

Digest Sample() {
  Digest d{};
  for (std::size_t i = 0; i < d.size(); ++i) d[i] = static_cast<std::uint8_t>(0xf0 - 7 * i);
  return d;
}

TEST(TableLayout, StatementsForEachLayout) {
  const std::string sql = "INSERT INTO scan_keys (digest, {SOURCE}) SELECT encode({SEND}(d), 'hex') FROM unnest($1::{DIGEST}[])";
  EXPECT_EQ(ForLayout(sql, TableLayout::kBytea32),
            "INSERT INTO scan_keys (digest, source) SELECT encode((d), 'hex') FROM unnest($1::bytea[])");
  EXPECT_EQ(ForLayout(sql, TableLayout::kUuid16),
            "INSERT INTO scan_keys (digest, seen_by) SELECT encode(uuid_send(d), 'hex') FROM unnest($1::uuid[])");
  EXPECT_EQ(Substitute("{A}{B}{A}", {{"{A}", "x{B}"}, {"{B}", "y"}}), "xyyxy");  // in order, over the whole text
}

TEST(TableLayout, KeysAndBytesPerLayout) {
  const Digest d = Sample();
  EXPECT_EQ(KeyOf(d, TableLayout::kBytea32), d);
  EXPECT_EQ(KeyOf(d, TableLayout::kUuid16), StoredDigest(d));
  EXPECT_EQ(StoredBytesOf(d, TableLayout::kBytea32).size(), 32u);
  EXPECT_EQ(StoredBytesOf(d, TableLayout::kUuid16), std::string(reinterpret_cast<const char*>(d.data()), 16));
}

// A digest read back is its stored form whatever width the layout returned it in; any other width is refused.
TEST(TableLayout, StoredDigestFromBytesOfEitherWidth) {
  const Digest d = Sample();
  const std::string full(reinterpret_cast<const char*>(d.data()), 32);
  Digest out{};
  ASSERT_TRUE(StoredDigestFromBytes(full, out));
  EXPECT_EQ(out, StoredDigest(d));
  out = Digest{};
  ASSERT_TRUE(StoredDigestFromBytes(full.substr(0, 16), out));
  EXPECT_EQ(out, StoredDigest(d));
  for (const std::size_t n : {0u, 1u, 15u, 17u, 31u, 33u}) EXPECT_FALSE(StoredDigestFromBytes(std::string(n, 'a'), out)) << n;
}

TEST(TableLayout, StoredDigestFromTextOfEitherType) {
  const Digest d = Sample();
  const std::string hex = ToHex(d);
  Digest from_bytea{}, from_uuid{};
  ASSERT_TRUE(StoredDigestFromText("\\x" + hex, from_bytea));
  const std::string uuid =
      hex.substr(0, 8) + "-" + hex.substr(8, 4) + "-" + hex.substr(12, 4) + "-" + hex.substr(16, 4) + "-" + hex.substr(20, 12);
  ASSERT_TRUE(StoredDigestFromText(uuid, from_uuid));
  EXPECT_EQ(from_bytea, StoredDigest(d));
  EXPECT_EQ(from_uuid, StoredDigest(d));
  Digest out{};
  for (const std::string& bad : {hex, "\\x" + hex.substr(0, 62), "\\x" + hex.substr(0, 32), uuid.substr(0, 35),
                                 hex.substr(0, 32) + "----", std::string("\\X") + hex, "\\x" + hex.substr(0, 63) + "G"}) {
    EXPECT_FALSE(StoredDigestFromText(bad, out)) << bad;
  }
  std::string upper = uuid;
  upper[0] = 'F';  // uuid_out and bytea's hex output are lowercase
  EXPECT_FALSE(StoredDigestFromText(upper, out));
}

TEST(TableLayout, HexOfADigestColumn) {
  const Digest d = Sample();
  const std::string hex = ToHex(d);
  Digest out{};
  ASSERT_TRUE(DigestFromLayoutHex(hex, TableLayout::kBytea32, out));
  EXPECT_EQ(out, d);
  ASSERT_TRUE(DigestFromLayoutHex(hex.substr(0, 32), TableLayout::kUuid16, out));
  EXPECT_EQ(out, StoredDigest(d));
  EXPECT_FALSE(DigestFromLayoutHex(hex.substr(0, 32), TableLayout::kBytea32, out));
  EXPECT_FALSE(DigestFromLayoutHex(hex, TableLayout::kUuid16, out));
}

TEST(TableLayout, WhichErrorsMeanTheTableChanged) {
  for (const char* state : {"42703", "42804", "42883", "42P01", "0A000"}) {
    EXPECT_TRUE(IsLayoutChange(pqxx::sql_error("x", "q", state))) << state;
  }
  for (const char* state : {"23505", "22P03", "40P01", "57P01", "42501", "53100"}) {
    EXPECT_FALSE(IsLayoutChange(pqxx::sql_error("x", "q", state))) << state;
  }
}

}  // namespace
}  // namespace scangate::storage
