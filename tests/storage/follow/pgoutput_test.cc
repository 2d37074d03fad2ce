// StreamReader (storage/follow/pgoutput.h) over hand-built replication messages in pgoutput's protocol version 1:
// a transaction's inserted and updated digests of scan_keys come out at its commit with its end LSN and time,
// another table's rows are ignored (every table named scan_keys is followed: the epochs' switch), keepalives report the server's position, and a malformed message or a row
// without a digest (bytea hex of 32 bytes, or sql/013's uuid) is an error, never an empty transaction. Digests come
// out in their stored form (core/digest.h). Also ParseLsn and the status update's layout.
#include "storage/follow/pgoutput.h"

#include <string>

#include <gtest/gtest.h>

namespace scangate::storage {
namespace {

constexpr std::int64_t kPgEpochUs = 946'684'800'000'000;

void Be(std::string& out, std::uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out += static_cast<char>(v >> (8 * i));
}
std::string XLogData(const std::string& pgoutput) {
  std::string m = "w";
  Be(m, 0x100, 8);
  Be(m, 0x200, 8);
  Be(m, 0, 8);
  return m + pgoutput;
}
std::string Begin() {
  std::string m = "B";
  Be(m, 0x1000, 8);
  Be(m, 0, 8);
  Be(m, 42, 4);
  return XLogData(m);
}
std::string Relation(std::uint32_t oid, const std::string& name) {
  std::string m = "R";
  Be(m, oid, 4);
  m += std::string("public") + '\0' + name + '\0';
  m += 'd';
  Be(m, 1, 2);
  m += '\1';
  m += std::string("digest") + '\0';
  Be(m, 17, 4);
  Be(m, 0xFFFFFFFF, 4);
  return XLogData(m);
}
std::string Tuple(const std::string& digest_text) {
  std::string t;
  Be(t, 1, 2);
  t += 't';
  Be(t, digest_text.size(), 4);
  return t + digest_text;
}
std::string Insert(std::uint32_t oid, const std::string& digest_text) {
  std::string m = "I";
  Be(m, oid, 4);
  m += 'N';
  return XLogData(m + Tuple(digest_text));
}
std::string Update(std::uint32_t oid, const std::string& digest_text) {
  std::string m = "U";
  Be(m, oid, 4);
  m += 'N';
  return XLogData(m + Tuple(digest_text));
}
std::string Commit(std::uint64_t end_lsn, std::int64_t unix_us) {
  std::string m = "C";
  m += '\0';
  Be(m, 0x1000, 8);
  Be(m, end_lsn, 8);
  Be(m, static_cast<std::uint64_t>(unix_us - kPgEpochUs), 8);
  return XLogData(m);
}
std::string HexText(std::uint8_t fill) {
  static const char* kHex = "0123456789abcdef";
  std::string s = "\\x";
  for (int i = 0; i < 32; ++i) {
    s += kHex[fill >> 4];
    s += kHex[fill & 15];
  }
  return s;
}

TEST(StreamReader, ATransactionsDigestsComeOutAtItsCommit) {
  StreamReader r;
  StreamEvent ev;
  for (const std::string& m : {Begin(), Relation(7, "scan_keys"), Relation(9, "other"), Insert(7, HexText(0xab)),
                               Insert(9, HexText(0x11)), Update(7, HexText(0xcd))}) {
    ASSERT_FALSE(r.Read(m, ev).has_value());
    EXPECT_EQ(ev.kind, StreamEvent::Kind::kNone);
  }
  ASSERT_FALSE(r.Read(Commit(0x5000, 1'700'000'000'000'000), ev).has_value());
  ASSERT_EQ(ev.kind, StreamEvent::Kind::kCommit);
  EXPECT_EQ(ev.lsn, 0x5000u);
  EXPECT_EQ(ev.commit_time_us, 1'700'000'000'000'000);
  ASSERT_EQ(ev.digests.size(), 2u) << "another table's row was followed, or one of scan_keys' lost";
  EXPECT_EQ(ev.digests[0][0], 0xab);
  EXPECT_EQ(ev.digests[1][15], 0xcd);
  EXPECT_EQ(ev.digests[1][31], 0) << "not the stored form";
  // The next transaction starts empty.
  ASSERT_FALSE(r.Read(Begin(), ev).has_value());
  ASSERT_FALSE(r.Read(Commit(0x6000, 1'700'000'000'000'001), ev).has_value());
  EXPECT_TRUE(ev.digests.empty());
}

// sql/013's table publishes its digest as a uuid: the same stored form as the old table's bytea of the same digest.
TEST(StreamReader, UuidDigestsAreTheStoredForm) {
  StreamReader r;
  StreamEvent ev;
  for (const std::string& m : {Begin(), Relation(7, "scan_keys"), Insert(7, HexText(0xab)),
                               Insert(7, "abababab-abab-abab-abab-abababababab"), Update(7, "00112233-4455-6677-8899-aabbccddeeff")}) {
    ASSERT_FALSE(r.Read(m, ev).has_value()) << m;
  }
  ASSERT_FALSE(r.Read(Commit(0x5000, 1'700'000'000'000'000), ev).has_value());
  ASSERT_EQ(ev.digests.size(), 3u);
  EXPECT_EQ(ev.digests[0], ev.digests[1]) << "a bytea and a uuid of one digest differ";
  EXPECT_EQ(ev.digests[2][0], 0x00);
  EXPECT_EQ(ev.digests[2][15], 0xff);
  EXPECT_EQ(ev.digests[2][16], 0);
  for (const char* bad : {"abababab-abab-abab-abab-ababababab", "abababababababababababababababababab",
                          "abababab-abab-abab-abab-abababababaX"}) {
    EXPECT_TRUE(r.Read(Insert(7, bad), ev).has_value()) << bad;
  }
}

// An epochs' switch (sql/019): the open table scan_keys (oid 7) is renamed to a closed epoch and another table
// (oid 8) becomes scan_keys. Both tables' rows under the name scan_keys are followed, in one transaction and after;
// a table whose latest Relation message names it otherwise (the closed epoch, renamed) is not.
TEST(StreamReader, FollowsEveryTableNamedScanKeysAcrossASwitch) {
  StreamReader r;
  StreamEvent ev;
  for (const std::string& m : {Begin(), Relation(7, "scan_keys"), Insert(7, HexText(0x01)), Relation(8, "scan_keys"),
                               Insert(8, HexText(0x02)), Insert(7, HexText(0x03))}) {
    ASSERT_FALSE(r.Read(m, ev).has_value());
  }
  ASSERT_FALSE(r.Read(Commit(0x5000, 1'700'000'000'000'000), ev).has_value());
  ASSERT_EQ(ev.digests.size(), 3u) << "a row of one of the two tables named scan_keys was not followed";
  for (const std::string& m : {Begin(), Relation(7, "scan_keys_e00000000000000a1"), Insert(7, HexText(0x04)),
                               Insert(8, HexText(0x05))}) {
    ASSERT_FALSE(r.Read(m, ev).has_value());
  }
  ASSERT_FALSE(r.Read(Commit(0x6000, 1'700'000'000'000'001), ev).has_value());
  ASSERT_EQ(ev.digests.size(), 1u) << "the renamed table's row was followed, or the open one's lost";
  EXPECT_EQ(ev.digests[0][0], 0x05);
}

TEST(StreamReader, KeepaliveReportsTheServersPosition) {
  StreamReader r;
  StreamEvent ev;
  std::string k = "k";
  Be(k, 0xABCDEF, 8);
  Be(k, 0, 8);
  k += '\1';
  ASSERT_FALSE(r.Read(k, ev).has_value());
  EXPECT_EQ(ev.kind, StreamEvent::Kind::kKeepalive);
  EXPECT_EQ(ev.lsn, 0xABCDEFu);
  EXPECT_TRUE(ev.reply_requested);
}

TEST(StreamReader, MalformedMessagesAreErrors) {
  StreamReader r;
  StreamEvent ev;
  ASSERT_FALSE(r.Read(Relation(7, "scan_keys"), ev).has_value());
  EXPECT_TRUE(r.Read("", ev).has_value());
  EXPECT_TRUE(r.Read("x123", ev).has_value());
  EXPECT_TRUE(r.Read("k12", ev).has_value());
  EXPECT_TRUE(r.Read(XLogData("Z"), ev).has_value());
  EXPECT_TRUE(r.Read(Insert(7, "\\x00ff"), ev).has_value()) << "a short digest";
  EXPECT_TRUE(r.Read(Insert(7, HexText(0xab).substr(0, 40)), ev).has_value());
  std::string cut = Insert(7, HexText(0xab));
  EXPECT_TRUE(r.Read(cut.substr(0, cut.size() - 3), ev).has_value()) << "a truncated tuple";
  std::string c = Commit(1, kPgEpochUs);
  EXPECT_TRUE(r.Read(c.substr(0, c.size() - 1), ev).has_value());
}

TEST(StreamReader, LsnAndStatusUpdate) {
  EXPECT_EQ(ParseLsn("0/16B3748"), 0x16B3748u);
  EXPECT_EQ(ParseLsn("1A/0"), 0x1Aull << 32);
  EXPECT_FALSE(ParseLsn("16B3748").has_value());
  EXPECT_FALSE(ParseLsn("0/").has_value());
  EXPECT_FALSE(ParseLsn("0/xyz").has_value());
  const std::string u = StandbyStatusUpdate(0x0102030405060708ull, kPgEpochUs + 5, true);
  ASSERT_EQ(u.size(), 1u + 8 * 4 + 1);
  EXPECT_EQ(u[0], 'r');
  EXPECT_EQ(u[1], '\1');
  EXPECT_EQ(u[8], '\x08');
  EXPECT_EQ(u[32], '\x05');  // the send time: µs since 2000-01-01
  EXPECT_EQ(u[33], '\1');
}

}  // namespace
}  // namespace scangate::storage
