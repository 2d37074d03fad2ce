// Tests of core/gs1.h: real-world spellings of one pack give one Identity (and the lot/expiry they carry),
// invalid scans give an Error naming the AI at fault without echoing the scan, AI 17's day 00 / Feb 29 / the
// GS1 century rule, and the calendar helpers against independently computed day counts.
#include "core/gs1.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace scangate::gs1 {
namespace {

constexpr int kYear = 2026;  // the "current year" of every case unless stated

// One spelling of a pack: what it must parse to.
struct Spelling {
  std::string scan;
  std::string gtin;
  std::string serial;
  std::optional<std::string> lot;
  std::optional<Date> expiry;
};

std::string Gs(std::string a, std::string b) { return a + '\x1d' + b; }

std::vector<Spelling> Spellings() {
  const Date dec31{2027, 12, 31}, feb28{2025, 2, 28}, jun30{2028, 6, 30};
  const std::string a = "00361414030008", b = "04006381333931", c = "00036000291452", d = "00000096385074";
  const std::string e = "09506000134352";
  return {
      // Pack A: the five spellings of issue 24.
      {Gs("]d2010036141403000817271231100LOT42", "21SN0001"), a, "SN0001", "0LOT42", dec31},
      {Gs("]d2010036141403000821SN0001", "17271231100LOT42"), a, "SN0001", "0LOT42", dec31},
      {"(01)00361414030008(17)271231(10)0LOT42(21)SN0001", a, "SN0001", "0LOT42", dec31},
      {"010036141403000821SN0001", a, "SN0001", std::nullopt, std::nullopt},
      {"https://id.gs1.org/01/00361414030008/21/SN0001?17=271231", a, "SN0001", std::nullopt, dec31},
      // Pack A, more spellings: GS after fixed-length AIs, leading GS (FNC1 first), trailing GS and CR/LF,
      // other symbologies, spaces in the printed form, Digital Link with lot in the path and with tracking params.
      {Gs(Gs(Gs("]C10100361414030008", "17271231"), "100LOT42"), "21SN0001"), a, "SN0001", "0LOT42", dec31},
      {"\x1d" "0100361414030008" "\x1d" "21SN0001", a, "SN0001", std::nullopt, std::nullopt},
      {Gs(Gs(Gs("", "1727123121SN0001"), "100LOT42"), "0100361414030008"), a, "SN0001", "0LOT42", dec31},
      {Gs("]Q30100361414030008100LOT42", "21SN0001") + "\x1d\r\n", a, "SN0001", "0LOT42", std::nullopt},
      {"]e0010036141403000821SN0001", a, "SN0001", std::nullopt, std::nullopt},
      {"]J1010036141403000821SN0001", a, "SN0001", std::nullopt, std::nullopt},
      {"(01) 00361414030008 (21) SN0001 (17) 271231", a, "SN0001", std::nullopt, dec31},
      {"https://id.gs1.org/01/00361414030008/10/0LOT42/21/SN0001", a, "SN0001", "0LOT42", std::nullopt},
      {"]Q1https://example.com/shop/p/01/00361414030008/21/SN0001?linkType=gs1:pip&17=271231&10=0LOT42#x", a,
       "SN0001", "0LOT42", dec31},
      // Pack B: GTIN-13 vs GTIN-14, a serial with '/' (percent-encoded in a URI), lot and day-00 expiry.
      {Gs(Gs("]d2010400638133393121ABC/123-x", "10L1"), "17250200"), b, "ABC/123-x", "L1", feb28},
      {"https://example.com/01/4006381333931/10/L1/21/ABC%2F123-x?17=250200", b, "ABC/123-x", "L1", feb28},
      {"https://example.com/01/04006381333931/21/ABC%2f123-x/?17=250200&10=L1", b, "ABC/123-x", "L1", feb28},
      {"http://example.com/01/4006381333931/21/ABC%2F123-x", b, "ABC/123-x", std::nullopt, std::nullopt},
      {"(21)ABC/123-x(17)250200(01)04006381333931(10)L1", b, "ABC/123-x", "L1", feb28},
      // Pack C: GTIN-12 (UPC-A) in a Digital Link, a 20-character serial (the maximum), upper-case URI.
      {"0100036000291452" + std::string("2112345678901234567890"), c, "12345678901234567890", std::nullopt,
       std::nullopt},
      {"HTTPS://ID.GS1.ORG/01/036000291452/21/12345678901234567890", c, "12345678901234567890", std::nullopt,
       std::nullopt},
      {"https://id.gs1.org/gtin/036000291452/ser/12345678901234567890", c, "12345678901234567890", std::nullopt,
       std::nullopt},
      // Pack D: GTIN-8, other AIs around (3103, 240, 7003, 91) that must not disturb the identity.
      {Gs(Gs("01000000963850743103000250", "21X%1"), Gs("240REF", "17280600")), d, "X%1", std::nullopt, jun30},
      {"https://d.example/01/96385074/21/X%251?17=280600&240=REF", d, "X%1", std::nullopt, jun30},
      {Gs(Gs(Gs("]d291internal", "70032806301200"), "21X%1"), "010000009638507417280600"), d, "X%1",
       std::nullopt, jun30},
      // Pack E: a GS1 example GTIN, an AI repeated with the same value (allowed).
      {Gs("0109506000134352210001", "0109506000134352"), e, "0001", std::nullopt, std::nullopt},
      {"https://id.gs1.org/01/9506000134352/21/0001?21=0001", e, "0001", std::nullopt, std::nullopt},
  };
}

// Every spelling of the table parses to its pack, and every spelling of one GTIN+serial has the same Identity.
TEST(Gs1Parse, SpellingsOfOnePackShareOneIdentity) {
  const auto cases = Spellings();
  for (const Spelling& s : cases) {
    SCOPED_TRACE(testing::PrintToString(s.scan));
    const auto r = Parse(s.scan, kYear);
    ASSERT_TRUE(std::holds_alternative<Pack>(r)) << std::get<Error>(r).detail;
    const Pack& p = std::get<Pack>(r);
    EXPECT_EQ(p.gtin, s.gtin);
    EXPECT_EQ(p.serial, s.serial);
    EXPECT_EQ(p.lot, s.lot);
    EXPECT_EQ(p.expiry, s.expiry);
    EXPECT_EQ(Identity(p), "01" + s.gtin + "21" + s.serial);
  }
  // Identity distinguishes packs: the five packs above give five identities.
  std::vector<std::string> ids;
  for (const Spelling& s : cases) {
    const std::string id = Identity(std::get<Pack>(Parse(s.scan, kYear)));
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  }
  EXPECT_EQ(ids.size(), 5u);
}

// Invalid scans: an Error whose ai names the AI at fault, and whose detail never holds 6+ bytes of the scan.
TEST(Gs1Parse, InvalidScansNameTheAi) {
  struct Bad {
    std::string scan;
    std::string ai;
  };
  const std::vector<Bad> cases = {
      {"", ""},
      {"\r\n", ""},
      {"]d2", ""},
      {"]Q1010036141403000821SN0001", ""},   // plain QR, not a GS1 element string
      {"]A0010036141403000821SN0001", ""},   // a Code 39 identifier
      {"hello world", ""},
      {"0100361414030008", "21"},
      {"21SECRETSN0001", "01"},
      {"17271231100LOT42\x1d" "21SECRETSN0001", "01"},
      {"010036141403000921SECRETSN0001", "01"},               // check digit 9, should be 8
      {"0100361414030\x1d" "21SECRETSN0001", "01"},           // 13 of 14 digits before a GS
      {"01003614140300A821SECRETSN0001", "01"},               // letter in a numeric field
      {"0100361414030008236SECRET", "236"},                   // unknown 3-digit AI
      {"010036141403000805SECRET", "05"},                     // unknown 2-digit AI
      {"0100361414030008" "21SECRETSN0001SECRETSN01", "21"},  // 22-character serial
      {"0100361414030008" "10SECRETLOT0123456789XY\x1d" "21SN0001", "10"},  // 21-character lot
      {"0100361414030008" "21SECRET SN0001", "21"},           // space is not in character set 82
      {"0100361414030008" "21SECRET#SN0001", "21"},           // nor is '#'
      {"0100361414030008" "10L\xc3\xa9SECRET\x1d" "21SN0001", "10"},
      {"0100361414030008" "17271331" "21SECRETSN0001", "17"},  // month 13
      {"0100361414030008" "17270230" "21SECRETSN0001", "17"},  // Feb 30
      {"0100361414030008" "17270229" "21SECRETSN0001", "17"},  // 2027 is not a leap year
      {"0100361414030008" "172712" "\x1d" "21SECRETSN0001", "17"},  // 4 of 6 digits
      {"0100361414030008" "21SECRETSN0001\x1d" "21SECRETSN0002", "21"},
      {"0100361414030008" "21SECRETSN0001\x1d" "0100361414030015", "01"},
      {"(01)00361414030008(21)SECRETSN0001(236)x", "236"},
      {"(01)00361414030008(21)", "21"},                       // empty serial
      {"(01)003614140300(21)SECRETSN0001", "01"},
      {"(01)00361414030008(21)SECRET\x1dSN0001", "21"},
      {"((01)00361414030008(21)SECRETSN0001", ""},
      {"https://id.gs1.org/00/003614140300000000/21/SECRETSN0001", "01"},
      {"https://id.gs1.org/01/00361414030009/21/SECRETSN0001", "01"},   // bad check digit
      {"https://id.gs1.org/01/3614140300083/21/SECRETSN0001", "01"},    // GTIN-13 with a bad check digit
      {"https://id.gs1.org/01/0036141403000/21/SECRETSN0001", "01"},    // 13 digits, not a GTIN-13 (check)
      {"https://id.gs1.org/01/00361414030008/21/SECRET%2", "21"},       // malformed percent-encoding
      {"https://id.gs1.org/01/00361414030008/21/SECRET%1DSN", "21"},    // decoded GS is not in set 82
      {"https://id.gs1.org/01/00361414030008/21/SECRETSN0001?21=SECRETSN0002", "21"},
      {"https://id.gs1.org/01/00361414030008/21/SECRETSN0001?17=271299", "17"},
      {"https://id.gs1.org/01/00361414030008/21/SECRETSN0001?236=SECRET", "236"},
      {"https://id.gs1.org/01/00361414030008?17=271231", "21"},
      {"https://id.gs1.org/01/00361414030008/foo/SECRETSN0001", ""},
      {"https:///01/00361414030008/21/SECRETSN0001", ""},
      {std::string(kMaxScanBytes + 1, '0'), ""},
  };
  for (const Bad& b : cases) {
    SCOPED_TRACE(testing::PrintToString(b.scan));
    const auto r = Parse(b.scan, kYear);
    ASSERT_TRUE(std::holds_alternative<Error>(r));
    const Error& e = std::get<Error>(r);
    EXPECT_EQ(e.ai, b.ai) << e.detail;
    EXPECT_FALSE(e.detail.empty());
    for (std::size_t i = 0; i + 6 <= b.scan.size(); ++i)
      ASSERT_EQ(e.detail.find(b.scan.substr(i, 6)), std::string::npos) << "detail echoes the scan: " << e.detail;
  }
}

Date ExpiryOf(const std::string& yymmdd, int current_year) {
  const auto r = Parse("0100361414030008" "17" + yymmdd + "21SN1", current_year);
  if (const Error* e = std::get_if<Error>(&r)) {
    ADD_FAILURE() << yymmdd << ": " << e->detail;
    return {};
  }
  const Pack& p = std::get<Pack>(r);
  if (!p.expiry) ADD_FAILURE() << yymmdd << ": no expiry";
  return p.expiry.value_or(Date{});
}

// AI 17 day 00 is the last day of the month, leap years included.
TEST(Gs1Parse, ExpiryDay00IsTheLastDayOfTheMonth) {
  EXPECT_EQ(ExpiryOf("240200", kYear), (Date{2024, 2, 29}));
  EXPECT_EQ(ExpiryOf("250200", kYear), (Date{2025, 2, 28}));
  EXPECT_EQ(ExpiryOf("271100", kYear), (Date{2027, 11, 30}));
  EXPECT_EQ(ExpiryOf("271200", kYear), (Date{2027, 12, 31}));
  EXPECT_EQ(ExpiryOf("270415", kYear), (Date{2027, 4, 15}));
}

// Feb 29 exists in leap years only — and which century YY=00 falls in decides whether 00-02-29 exists.
TEST(Gs1Parse, ExpiryFeb29) {
  EXPECT_EQ(ExpiryOf("280229", kYear), (Date{2028, 2, 29}));
  EXPECT_EQ(ExpiryOf("000229", kYear), (Date{2000, 2, 29}));  // 2000: divisible by 400
  const auto r2100 = Parse("0100361414030008" "17000229" "21SN1", 2060);  // YY 00 in 2060 is 2100: not leap
  ASSERT_TRUE(std::holds_alternative<Error>(r2100));
  EXPECT_EQ(std::get<Error>(r2100).ai, "17");
  const auto r2027 = Parse("0100361414030008" "17270229" "21SN1", kYear);
  ASSERT_TRUE(std::holds_alternative<Error>(r2027));
  EXPECT_EQ(std::get<Error>(r2027).ai, "17");
}

// GS1 General Specifications 7.12: 51..99 years ahead -> previous century, 50..99 years behind -> next.
TEST(Gs1Parse, CenturyRule) {
  EXPECT_EQ(CenturyYear(76, 2026), 2076);  // 50 ahead: same century
  EXPECT_EQ(CenturyYear(77, 2026), 1977);  // 51 ahead: previous
  EXPECT_EQ(CenturyYear(26, 2026), 2026);
  EXPECT_EQ(CenturyYear(0, 2026), 2000);
  EXPECT_EQ(CenturyYear(10, 2060), 2110);  // 50 behind: next century
  EXPECT_EQ(CenturyYear(11, 2060), 2011);  // 49 behind: same
  EXPECT_EQ(CenturyYear(99, 2000), 1999);
  EXPECT_EQ(CenturyYear(50, 2000), 2050);
  EXPECT_EQ(CenturyYear(51, 2000), 1951);
  EXPECT_EQ(CenturyYear(0, 2099), 2100);
  EXPECT_EQ(ExpiryOf("770101", 2026).year, 1977);
  EXPECT_EQ(ExpiryOf("760101", 2026).year, 2076);
  EXPECT_EQ(ExpiryOf("100101", 2060).year, 2110);
}

// A current year outside 1..9999 is refused rather than computed with.
TEST(Gs1Parse, CurrentYearOutOfRange) {
  EXPECT_TRUE(std::holds_alternative<Error>(Parse("010036141403000821SN0001", 0)));
  EXPECT_TRUE(std::holds_alternative<Error>(Parse("010036141403000821SN0001", 10000)));
  EXPECT_TRUE(std::holds_alternative<Pack>(Parse("010036141403000821SN0001", 1)));
}

// Day counts against values computed independently (Python's datetime.date arithmetic).
TEST(Gs1Dates, DaysSinceEpoch) {
  EXPECT_EQ(DaysSinceEpoch({1970, 1, 1}), 0);
  EXPECT_EQ(DaysSinceEpoch({1969, 12, 31}), -1);
  EXPECT_EQ(DaysSinceEpoch({2000, 3, 1}), 11017);
  EXPECT_EQ(DaysSinceEpoch({2024, 2, 29}), 19782);
  EXPECT_EQ(DaysSinceEpoch({2027, 12, 31}), 21183);
  EXPECT_EQ(FirstDayOfNextMonth({2027, 12, 31}), 21184);  // 2028-01-01
  EXPECT_EQ(FirstDayOfNextMonth({2024, 2, 1}), 19783);    // 2024-03-01
  EXPECT_EQ(DaysInMonth(2024, 2), 29u);
  EXPECT_EQ(DaysInMonth(2100, 2), 28u);
  EXPECT_EQ(DaysInMonth(2026, 13), 0u);
}

}  // namespace
}  // namespace scangate::gs1
