// Black-box tests of --keys=gs1 (issue 24) against the real binary and PostgreSQL: one pack spelled the ways
// scanners spell it is one key (one `new`, then `duplicate`, with the digest of its canonical identity
// "01" + GTIN-14 + "21" + serial); a string that is not a pack is a 400 invalid-gs1 naming the AI, and nothing
// of its request is recorded; a repeat with another lot or expiry is a `duplicate` with "mismatch", counted and
// logged by digest only, on /observe, /observe/batch and /lookup; a pack with an expiry date (AI 17) is kept
// until the end of its expiry month plus --expiry-grace, past --retention, and a pack without one follows
// --retention. Both ack modes where it matters (--ack=filter decides every pack in PostgreSQL).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "harness.h"

namespace scangate::it {
namespace {

namespace json = boost::json;

constexpr std::string_view kGtin = "00361414030008";  // the GTIN-14 (check digit 8)
constexpr char kGs = '\x1d';

std::int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A serial unique to this run (GS1 character set 82: letters and digits are safe). No '1' in it, so no tail of it
// reads as AI 10 or 17: a serial ending in "10x" with no lot and no GS after it is refused (issue 33).
std::string FreshSerial() {
  std::string s = "S" + RandomHex(6);
  for (char& c : s) c = c == '1' ? 'g' : c;
  return s;
}

// The digest the service must answer with: SHA-256 of the canonical identity.
std::string IdentityHex(std::string_view gtin14, const std::string& serial) {
  return Sha256Hex("01" + std::string(gtin14) + "21" + serial);
}

// The five spellings of one pack (lot 0LOT42, expiry 2027-12-31) with `serial`, and three more.
std::vector<std::string> Spellings(const std::string& serial) {
  const std::string g(kGtin);
  return {
      "]d201" + g + "17271231100LOT42" + kGs + "21" + serial,
      "]d201" + g + "21" + serial + kGs + "17271231100LOT42",
      "(01)" + g + "(17)271231(10)0LOT42(21)" + serial,
      "01" + g + "21" + serial,
      "https://id.gs1.org/01/" + g + "/21/" + serial + "?17=271231",
      // GTIN-13 in a Digital Link (the GTIN-14 without its leading zero), with the lot as a path qualifier.
      "https://example.com/01/" + g.substr(1) + "/10/0LOT42/21/" + serial + "?17=271231",
      // Any AI order, no symbology identifier, FNC1 only where a variable-length field ends.
      "17271231" "21" + serial + kGs + "01" + g + "100LOT42",
      "]C1" "01" + g + "21" + serial,
  };
}

using Seen = ObserveAnswer;
Seen Observe(HttpClient& c, const std::string& key) { return ObserveKey(c, key); }

double Metric(HttpClient& c, std::string_view name) { return ScrapeMetric(c, name); }

class Gs1 : public ::testing::TestWithParam<const char*> {
 protected:
  bool filter() const { return std::string(GetParam()) == "filter"; }
  std::vector<std::string> Flags(std::vector<std::string> more = {}) const {
    std::vector<std::string> f{std::string("--ack=") + GetParam(), "--keys=gs1", "--capacity=100000"};
    f.insert(f.end(), more.begin(), more.end());
    return f;
  }
};

// Every spelling of one pack is the same key: the first `new`, every other `duplicate`, all with the digest
// of the canonical identity; PostgreSQL holds one row of it. --ack=filter decides packs in PostgreSQL, so its
// `new` is `via: exact`.
TEST_P(Gs1, SpellingsOfOnePackAreOneKey) {
  ScangateProcess server(Flags());
  ASSERT_TRUE(server.Start());
  HttpClient c(server.port());
  Pg pg;
  const std::string serial = FreshSerial();
  const std::string hex = IdentityHex(kGtin, serial);
  const std::vector<std::string> spellings = Spellings(serial);
  for (std::size_t i = 0; i < spellings.size(); ++i) {
    const Seen s = Observe(c, spellings[i]);
    EXPECT_EQ(s.status, i == 0 ? 201 : 200) << "spelling " << i << ": " << s.text;
    EXPECT_EQ(s.verdict, i == 0 ? "new" : "duplicate") << "spelling " << i << ": " << s.text;
    EXPECT_EQ(s.digest, hex) << "spelling " << i;
    EXPECT_TRUE(s.mismatch.empty()) << "spelling " << i << ": " << s.text;
    if (i == 0 && filter()) {
      EXPECT_EQ(s.via, "exact") << "with --ack=filter a pack's `new` comes from PostgreSQL: " << s.text;
    }
  }
  EXPECT_EQ(pg.CountDigest(hex), 1);
  EXPECT_EQ(pg.CountDigest(Sha256Hex(spellings[0])), 0) << "the raw string must not be the key";

  // A batch of the spellings of a second pack: one `new`, the rest `duplicate`, one digest.
  const std::string serial2 = FreshSerial();
  const HttpResponse r = c.Post("/observe/batch", BatchBody(Spellings(serial2)));
  ASSERT_EQ(r.status, 200) << r;
  int news = 0;
  const json::object body = r.json();
  for (const auto& v : body.at("results").as_array()) {
    const json::object& o = v.as_object();
    news += o.at("verdict").as_string() == "new" ? 1 : 0;
    EXPECT_EQ(o.at("digest").as_string(), IdentityHex(kGtin, serial2));
    EXPECT_FALSE(o.contains("mismatch")) << r;
  }
  EXPECT_EQ(news, 1) << r;
  EXPECT_EQ(server.Stop(), 0);
}

// A string that is not a pack: 400 invalid-gs1 naming the AI; the key is never echoed; a batch holding one
// is refused whole and records none of its keys.
TEST_P(Gs1, InvalidPacksAreRefusedNamingTheAi) {
  ScangateProcess server(Flags());
  ASSERT_TRUE(server.Start());
  HttpClient c(server.port());
  const std::string serial = FreshSerial();
  const std::string g(kGtin);
  struct Case {
    std::string key;
    std::string ai;
  };
  const std::vector<Case> cases = {
      {"01" + g.substr(0, 13) + "7" + "21" + serial, "01"},              // bad check digit
      {"01" + g + "17271231", "21"},                                     // no serial
      {"21" + serial, "01"},                                             // no GTIN
      {"01" + g + "17271331" + "21" + serial, "17"},                     // month 13
      {"01" + g + "21" + serial + "X123456789012345678", "21"},           // serial over 20 characters
      {"(01)" + g + "(21)" + serial + "(89)123", "89"},                 // unknown AI
      {"01" + g + "21" + serial + "1727123110LOT", "21"},                // a dropped GS: expiry + lot in the serial
      {"01" + g + "21" + serial + "(10)LOT", "21"},                      // '(' in a value
  };
  for (const Case& k : cases) {
    const HttpResponse r = c.Post("/observe", ObserveBody(k.key));
    EXPECT_TRUE(IsProblem(r, 400, "invalid-gs1")) << r;
    const json::object o = r.json();
    ASSERT_TRUE(o.contains("ai")) << r;
    EXPECT_EQ(o.at("ai").as_string(), k.ai) << r;
    EXPECT_EQ(r.body.find(serial), std::string::npos) << "the key's text must not be echoed: " << r;
  }
  const std::string good = "01" + g + "21" + FreshSerial();
  const HttpResponse b = c.Post("/observe/batch", BatchBody({good, cases[0].key}));
  EXPECT_TRUE(IsProblem(b, 400, "invalid-gs1")) << b;
  EXPECT_NE(b.body.find("keys[1]"), std::string::npos) << b;
  EXPECT_EQ(Observe(c, good).verdict, "new") << "the refused batch recorded its valid key";
  EXPECT_EQ(server.Log().find(serial), std::string::npos) << "a serial reached the log";
  EXPECT_EQ(server.Stop(), 0);
}

// A repeat with another lot or expiry is a `duplicate` flagged "mismatch" (on /observe, /observe/batch and
// /lookup), counted per field and logged with the digest only; a repeat that leaves a field out does not
// contradict it. The recent set is on (the default): an identical repeat is answered from it, a differing one
// must still reach the record.
TEST_P(Gs1, MismatchesAreFlagged) {
  ScangateProcess server(Flags());
  ASSERT_TRUE(server.Start());
  HttpClient c(server.port());
  const std::string serial = FreshSerial();
  const std::string g(kGtin);
  const std::string hex = IdentityHex(kGtin, serial);
  auto pack = [&](const std::string& lot, const std::string& exp) {
    std::string k = "01" + g + "21" + serial;
    if (!exp.empty()) k += std::string(1, kGs) + "17" + exp;
    if (!lot.empty()) k += std::string(1, kGs) + "10" + lot;
    return k;
  };
  const double lot0 = Metric(c, "scangate_pack_mismatches_total{field=\"lot\"}");
  const double exp0 = Metric(c, "scangate_pack_mismatches_total{field=\"expiry\"}");
  EXPECT_EQ(Observe(c, pack("LOTA", "280131")).verdict, "new");
  const Seen same = Observe(c, pack("LOTA", "280131"));
  EXPECT_EQ(same.verdict, "duplicate") << same.text;
  EXPECT_TRUE(same.mismatch.empty()) << same.text;
  const Seen lot = Observe(c, pack("LOTB", "280131"));
  EXPECT_EQ(lot.verdict, "duplicate") << lot.text;
  EXPECT_EQ(lot.mismatch, std::vector<std::string>{"lot"}) << lot.text;
  const Seen exp = Observe(c, pack("LOTA", "280228"));
  EXPECT_EQ(exp.mismatch, std::vector<std::string>{"expiry"}) << exp.text;
  const Seen both = Observe(c, pack("LOTC", "290100"));
  EXPECT_EQ(both.mismatch, (std::vector<std::string>{"lot", "expiry"})) << both.text;
  const Seen bare = Observe(c, pack("", ""));
  EXPECT_EQ(bare.verdict, "duplicate") << bare.text;
  EXPECT_TRUE(bare.mismatch.empty()) << "a scan without lot and expiry contradicts nothing: " << bare.text;
  // Repeating the mismatching scan: still flagged (the record keeps the first scan's lot).
  EXPECT_EQ(Observe(c, pack("LOTB", "280131")).mismatch, std::vector<std::string>{"lot"});

  const HttpResponse b = c.Post("/observe/batch", BatchBody({pack("LOTA", "280131"), pack("LOTZ", "280131")}));
  ASSERT_EQ(b.status, 200) << b;
  const json::object b_body = b.json();
  const json::array& results = b_body.at("results").as_array();
  EXPECT_FALSE(results.at(0).as_object().contains("mismatch")) << b;
  ASSERT_TRUE(results.at(1).as_object().contains("mismatch")) << b;
  EXPECT_EQ(results.at(1).as_object().at("mismatch").as_array().at(0).as_string(), "lot") << b;

  // Two scans of one fresh pack in one batch: the first is recorded, the second contradicts it.
  const std::string serial2 = FreshSerial();
  const std::string p2a = "01" + g + "21" + serial2 + kGs + "10LOTX";
  const std::string p2b = "01" + g + "21" + serial2 + kGs + "10LOTY";
  const HttpResponse b2 = c.Post("/observe/batch", BatchBody({p2a, p2b}));
  ASSERT_EQ(b2.status, 200) << b2;
  const json::object b2_body = b2.json();
  const json::array& r2 = b2_body.at("results").as_array();
  EXPECT_EQ(r2.at(0).as_object().at("verdict").as_string(), "new") << b2;
  EXPECT_EQ(r2.at(1).as_object().at("verdict").as_string(), "duplicate") << b2;
  ASSERT_TRUE(r2.at(1).as_object().contains("mismatch")) << b2;

  // /lookup: the record (expiry, a lot is held, the pack's horizon) and how the looked-up scan compares.
  const HttpResponse l = c.Post("/lookup", ObserveBody(pack("LOTB", "280131")));
  ASSERT_EQ(l.status, 200) << l;
  const json::object lo = l.json();
  EXPECT_EQ(lo.at("digest").as_string(), hex);
  EXPECT_EQ(lo.at("expiry").as_string(), "2028-01-31") << l;
  EXPECT_TRUE(lo.at("lot_recorded").as_bool()) << l;
  EXPECT_TRUE(lo.at("keep_until").is_string()) << l;
  ASSERT_TRUE(lo.contains("mismatch")) << l;
  EXPECT_EQ(lo.at("mismatch").as_array().at(0).as_string(), "lot") << l;
  EXPECT_FALSE(c.Post("/lookup", ObserveBody(pack("LOTA", "280131"))).json().contains("mismatch"));
  EXPECT_TRUE(IsProblem(c.Post("/lookup", ObserveBody("01" + g + "21" + FreshSerial())), 404, "not-recorded"));
  EXPECT_TRUE(IsProblem(c.Post("/lookup", ObserveBody("21" + serial)), 400, "invalid-gs1"));

  // Counted per field: lot (LOTB, LOTC, LOTB again, LOTZ, LOTY) = 5, expiry (280228, 290100: day 00 = 2029-01-31) = 2.
  EXPECT_EQ(Metric(c, "scangate_pack_mismatches_total{field=\"lot\"}") - lot0, 5);
  EXPECT_EQ(Metric(c, "scangate_pack_mismatches_total{field=\"expiry\"}") - exp0, 2);
  const auto logged = server.LogEvents("pack_mismatch");
  EXPECT_EQ(logged.size(), 6u) << server.LogTail();
  for (const auto& e : logged) {
    const std::string d(e.at("digest").as_string());
    EXPECT_TRUE(d == hex || d == IdentityHex(kGtin, serial2)) << d;
  }
  const std::string log = server.Log();
  EXPECT_EQ(log.find("LOTB"), std::string::npos) << "a lot reached the log";
  EXPECT_EQ(log.find(serial), std::string::npos) << "a serial reached the log";
  EXPECT_EQ(server.Stop(), 0);
}

// The per-pack horizon. --retention=2s; the pack's expiry is the last day of the previous month, and
// --expiry-grace is chosen so that the end of that month plus the grace falls 8 s after the first scans. At
// +4 s (past the retention and its slack) the pack without an expiry is `new` again, the pack with one is still
// `duplicate` (its own horizon); past +8 s and the slack the pack is `new` again.
TEST_P(Gs1, PackWithExpiryIsKeptUntilItsOwnHorizon) {
  using std::chrono::days;
  const std::int64_t t0 = NowUs();
  const std::chrono::sys_days today = std::chrono::floor<days>(std::chrono::sys_time<std::chrono::microseconds>(
      std::chrono::microseconds(t0)));
  const std::chrono::year_month_day ymd(today);
  const std::chrono::sys_days month_start = std::chrono::sys_days(ymd.year() / ymd.month() / 1);
  const std::chrono::year_month_day last_of_prev(month_start - days(1));
  const std::int64_t month_start_us =
      std::chrono::duration_cast<std::chrono::microseconds>(month_start.time_since_epoch()).count();
  constexpr std::int64_t kPackHorizonUs = 8'000'000;
  const std::int64_t grace_s = (t0 + kPackHorizonUs - month_start_us) / 1'000'000 + 1;
  char exp[32];  // YYMMDD; room for any int the format could print
  // The previous month's last day (January: December of last year).
  std::snprintf(exp, sizeof exp, "%02d%02u%02u", static_cast<int>(last_of_prev.year()) % 100,
                static_cast<unsigned>(last_of_prev.month()), static_cast<unsigned>(last_of_prev.day()));

  ScangateProcess server(Flags({"--retention=2s", "--expiry-grace=" + std::to_string(grace_s) + "s"}));
  ASSERT_TRUE(server.Start());
  HttpClient c(server.port());
  Pg pg;
  const std::string g(kGtin);
  const std::string with_expiry = "01" + g + "17" + exp + "21" + FreshSerial();
  const std::string without = "01" + g + "21" + FreshSerial();
  const std::int64_t first = NowUs();
  ASSERT_EQ(Observe(c, with_expiry).verdict, "new");
  ASSERT_EQ(Observe(c, without).verdict, "new");
  const std::int64_t keep_until_us = month_start_us + grace_s * 1'000'000;
  ASSERT_GT(keep_until_us, first + 5'000'000) << "the test's clock arithmetic is wrong";

  std::this_thread::sleep_until(std::chrono::system_clock::time_point(std::chrono::microseconds(first + 4'000'000)));
  const Seen kept = Observe(c, with_expiry);
  EXPECT_EQ(kept.verdict, "duplicate") << "a pack with an expiry outlives --retention: " << kept.text;
  const Seen gone = Observe(c, without);
  EXPECT_EQ(gone.verdict, "new") << "a pack without an expiry follows --retention: " << gone.text;

  std::this_thread::sleep_until(std::chrono::system_clock::time_point(std::chrono::microseconds(keep_until_us + 1'500'000)));
  const Seen again = Observe(c, with_expiry);
  EXPECT_EQ(again.verdict, "new") << "past its own horizon the pack is new again: " << again.text;
  EXPECT_EQ(Observe(c, with_expiry).verdict, "duplicate");
  EXPECT_EQ(server.Stop(), 0);
}

INSTANTIATE_TEST_SUITE_P(AckModes, Gs1, ::testing::Values("commit", "filter"));

}  // namespace
}  // namespace scangate::it
