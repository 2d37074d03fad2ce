// KeyReader (server/verdict/scan_key.h): raw keys are digested as sent; --keys=gs1 digests a pack's canonical
// identity, digests its lot, turns its expiry into a date and the pack's horizon (end of the expiry month plus
// the grace, from a fake clock's year), keys the recent set by (identity, lot, expiry), and refuses a string that
// is not a pack with a 400 naming the AI. Mismatch compares only fields both sides carry.
#include "server/verdict/scan_key.h"

#include <chrono>
#include <string>
#include <cstdint>
#include <cstring>
#include <vector>
#include <string_view>
#include <variant>

#include <gtest/gtest.h>

namespace scangate::server {
namespace {

using std::chrono::days;
using std::chrono::sys_days;

constexpr char kGs = '\x1d';

// An element string, then the next one after a group separator (FNC1). Built by append: GCC 12 at -O1 warns
// (-Warray-bounds, a false positive) on chains of std::string operator+ once this file's tests inline enough.
std::string Gs1(std::string_view head, std::string_view next) {
  std::string s;
  s.reserve(head.size() + 1 + next.size());
  s.append(head);
  s.push_back(kGs);
  s.append(next);
  return s;
}

std::int64_t UsOf(sys_days d) {
  return std::chrono::duration_cast<std::chrono::microseconds>(d.time_since_epoch()).count();
}

// 2026-12-01T12:00:00Z.
std::int64_t FakeNow() { return UsOf(sys_days(std::chrono::year(2026) / 12 / 1)) + 12ll * 3600 * 1'000'000; }

KeyReader Gs1Reader(std::chrono::seconds grace = std::chrono::hours(24 * 365)) {
  return KeyReader(Digester::Sha256(), KeysMode::kGs1, grace, true, FakeNow);
}

ScanKey Ok(const KeyReader& r, std::string_view key) {
  auto v = r.Read(key);
  if (auto* p = std::get_if<Problem>(&v)) {
    ADD_FAILURE() << "refused: " << p->ai << ": " << p->detail;
    return {};
  }
  return std::get<ScanKey>(v);
}

TEST(KeyReader, RawDigestsTheKeyAsSent) {
  const KeyReader r(Digester::Sha256(), KeysMode::kRaw, std::chrono::seconds(0), true, FakeNow);
  const ScanKey k = Ok(r, "(01)00361414030008(21)X");
  EXPECT_EQ(k.digest, Digester::Sha256()("(01)00361414030008(21)X"));
  EXPECT_EQ(k.recent_digest, k.digest);
  EXPECT_FALSE(k.attrs.lot);
  EXPECT_FALSE(k.attrs.expiry);
  EXPECT_EQ(k.attrs.keep_until_us, 0);
}

TEST(KeyReader, Gs1DigestsTheCanonicalIdentityWithTheConfiguredDigester) {
  const Digester hmac = Digester::HmacSha256("secret");
  const KeyReader r(hmac, KeysMode::kGs1, std::chrono::seconds(0), true, FakeNow);
  const ScanKey a = Ok(r, Gs1("]d2010036141403000817271231100LOT42", "21SN0001"));
  const ScanKey b = Ok(r, "https://id.gs1.org/01/00361414030008/21/SN0001?17=271231");
  EXPECT_EQ(a.digest, hmac("010036141403000821SN0001"));
  EXPECT_EQ(b.digest, a.digest);
  ASSERT_TRUE(a.attrs.lot);
  EXPECT_EQ(*a.attrs.lot, hmac("100LOT42")) << "the lot is digested under its AI, never kept raw";
  EXPECT_FALSE(b.attrs.lot);
}

// Expiry 2027-12-31 -> the date; horizon = 2028-01-01T00:00Z + grace. Day 00 is the month's last day.
TEST(KeyReader, ExpirySetsThePacksHorizon) {
  const KeyReader r = Gs1Reader(std::chrono::hours(24 * 10));
  const ScanKey k = Ok(r, "010036141403000817271231" "21SN1");
  ASSERT_TRUE(k.attrs.expiry);
  EXPECT_EQ(*k.attrs.expiry, (sys_days(std::chrono::year(2027) / 12 / 31) - sys_days()).count());
  EXPECT_EQ(k.attrs.keep_until_us, UsOf(sys_days(std::chrono::year(2028) / 1 / 1) + days(10)));
  const ScanKey feb = Ok(r, "010036141403000817280200" "21SN1");  // 2028-02-00: the 29th (leap year)
  ASSERT_TRUE(feb.attrs.expiry);
  EXPECT_EQ(*feb.attrs.expiry, (sys_days(std::chrono::year(2028) / 2 / 29) - sys_days()).count());
  EXPECT_EQ(feb.attrs.keep_until_us, UsOf(sys_days(std::chrono::year(2028) / 3 / 1) + days(10)));
  const ScanKey none = Ok(r, "010036141403000821SN1");
  EXPECT_EQ(none.attrs.keep_until_us, 0) << "no expiry: --retention applies";
  // --retention=off: nothing expires, packs included; the expiry is still recorded (mismatches).
  const KeyReader off(Digester::Sha256(), KeysMode::kGs1, std::chrono::hours(240), false, FakeNow);
  const ScanKey kept = Ok(off, "010036141403000817271231" "21SN1");
  EXPECT_EQ(kept.attrs.keep_until_us, 0);
  EXPECT_TRUE(kept.attrs.expiry);
}

// The century of YY comes from the clock: from 2026, "76" is 2076 (within +50 years), "77" is 1977.
TEST(KeyReader, CenturyFollowsTheClock) {
  const KeyReader r = Gs1Reader();
  const ScanKey a = Ok(r, "010036141403000817760101" "21SN1");
  const ScanKey b = Ok(r, "010036141403000817770101" "21SN1");
  ASSERT_TRUE(a.attrs.expiry && b.attrs.expiry);
  EXPECT_EQ(*a.attrs.expiry, (sys_days(std::chrono::year(2076) / 1 / 1) - sys_days()).count());
  EXPECT_EQ(*b.attrs.expiry, (sys_days(std::chrono::year(1977) / 1 / 1) - sys_days()).count());
}

TEST(KeyReader, NotAPackIsA400NamingTheAi) {
  const KeyReader r = Gs1Reader();
  auto v = r.Read("010036141403000721SN1");  // check digit 7, not 8
  ASSERT_TRUE(std::holds_alternative<Problem>(v));
  const Problem& p = std::get<Problem>(v);
  EXPECT_EQ(p.status, 400u);
  EXPECT_EQ(p.slug, "invalid-gs1");
  EXPECT_EQ(p.ai, "01");
  EXPECT_NE(p.detail.find("01"), std::string::npos) << "the detail names the AI: " << p.detail;
  EXPECT_EQ(p.detail.find("SN1"), std::string::npos) << "the key is never echoed: " << p.detail;
  auto missing = r.Read("010036141403000817271231");
  ASSERT_TRUE(std::holds_alternative<Problem>(missing));
  EXPECT_EQ(std::get<Problem>(missing).ai, "21");
}

// The recent set's key: the identity alone without attributes; otherwise one per (lot, expiry), so a hit
// means "recorded with these attributes".
TEST(KeyReader, RecentDigestSeparatesAttributes) {
  const KeyReader r = Gs1Reader();
  const ScanKey bare = Ok(r, "010036141403000821SN1");
  const ScanKey lot_a = Ok(r, Gs1("010036141403000821SN1", "10A"));
  const ScanKey lot_b = Ok(r, Gs1("010036141403000821SN1", "10B"));
  const ScanKey lot_a_exp = Ok(r, Gs1("010036141403000817271231" "21SN1", "10A"));
  EXPECT_EQ(bare.recent_digest, bare.digest);
  EXPECT_EQ(lot_a.digest, bare.digest);
  EXPECT_NE(lot_a.recent_digest, bare.recent_digest);
  EXPECT_NE(lot_a.recent_digest, lot_b.recent_digest);
  EXPECT_NE(lot_a.recent_digest, lot_a_exp.recent_digest);
  EXPECT_EQ(r.RecentDigest(lot_a.digest, lot_a.attrs), lot_a.recent_digest);
  // The horizon is not part of it: the same pack read later (another clock) keys the same entry.
  storage::PackAttrs no_horizon = lot_a_exp.attrs;
  no_horizon.keep_until_us = 0;
  EXPECT_EQ(r.RecentDigest(lot_a_exp.digest, no_horizon), lot_a_exp.recent_digest);
}

TEST(KeyReader, MismatchComparesFieldsBothSidesCarry) {
  const KeyReader r = Gs1Reader();
  const auto a = Ok(r, Gs1("010036141403000817271231" "21SN1", "10A")).attrs;
  const auto b_lot = Ok(r, Gs1("010036141403000817271231" "21SN1", "10B")).attrs;
  const auto b_exp = Ok(r, Gs1("010036141403000817271130" "21SN1", "10A")).attrs;
  const auto both = Ok(r, Gs1("010036141403000817271130" "21SN1", "10B")).attrs;
  const auto bare = Ok(r, "010036141403000821SN1").attrs;
  EXPECT_EQ(KeyReader::Mismatch(a, a), 0);
  EXPECT_EQ(KeyReader::Mismatch(b_lot, a), kMismatchLot);
  EXPECT_EQ(KeyReader::Mismatch(b_exp, a), kMismatchExpiry);
  EXPECT_EQ(KeyReader::Mismatch(both, a), kMismatchLot | kMismatchExpiry);
  EXPECT_EQ(KeyReader::Mismatch(bare, a), 0) << "a scan without lot or expiry contradicts nothing";
  EXPECT_EQ(KeyReader::Mismatch(a, bare), 0) << "nor does a record without them";
}

// Idempotency-Key (issue 34): the record depends on the scope, the key and the digester's secret, and no other
// (scope, key) split of the same bytes gives the same record.
TEST(KeyReader, RequestIdSeparatesScopeKeyAndSecret) {
  const KeyReader plain(Digester::Sha256(), KeysMode::kRaw, std::chrono::seconds(0));
  const KeyReader keyed(Digester::HmacSha256("secret"), KeysMode::kRaw, std::chrono::seconds(0));
  const storage::RequestId a = plain.RequestIdOf("source:till-1", "r-1");
  EXPECT_EQ(a, plain.RequestIdOf("source:till-1", "r-1"));
  EXPECT_NE(a, plain.RequestIdOf("source:till-2", "r-1"));
  EXPECT_NE(a, plain.RequestIdOf("source:till-1", "r-2"));
  EXPECT_NE(plain.RequestIdOf("ab", "c"), plain.RequestIdOf("a", "bc"));
  EXPECT_NE(a, keyed.RequestIdOf("source:till-1", "r-1"));
}

// The record is a stored format (PostgreSQL's request column, the journal): the first 16 bytes of the digest of
// "scangate-idempotency-v1", then scope and key, each after its little-endian 32-bit length. Spelled out here
// independently, for a short pair and for the longest key with a scope past the stack buffer.
TEST(KeyReader, RequestIdIsItsDocumentedBytes) {
  const Digester sha = Digester::Sha256();
  const KeyReader reader(sha, KeysMode::kRaw, std::chrono::seconds(0));
  const auto spelled = [&](std::string_view scope, std::string_view key) {
    std::vector<char> in;
    const std::string_view domain = "scangate-idempotency-v1";
    in.insert(in.end(), domain.begin(), domain.end());
    for (const std::string_view part : {scope, key}) {
      const auto n = static_cast<std::uint32_t>(part.size());
      in.push_back(static_cast<char>(n & 0xff));
      in.push_back(static_cast<char>((n >> 8) & 0xff));
      in.push_back(static_cast<char>((n >> 16) & 0xff));
      in.push_back(static_cast<char>((n >> 24) & 0xff));
      in.insert(in.end(), part.begin(), part.end());
    }
    const Digest d = sha(std::string_view(in.data(), in.size()));
    storage::RequestId id{};
    std::memcpy(id.data(), d.data(), id.size());
    return id;
  };
  EXPECT_EQ(reader.RequestIdOf("source:till-1", "r-1"), spelled("source:till-1", "r-1"));
  const std::string long_scope = "address:" + std::string(400, 'a');
  const std::string longest_key(255, 'k');
  EXPECT_EQ(reader.RequestIdOf(long_scope, longest_key), spelled(long_scope, longest_key));
}

}  // namespace
}  // namespace scangate::server
