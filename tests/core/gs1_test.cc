// Tests of core/gs1.h: real-world spellings of one pack give one Identity (and the lot/expiry they carry),
// invalid scans give an Error naming the AI at fault without echoing the scan, the two refusals that keep one
// identity per pack (a dropped GS, '(' or ')' in a value) and what they cost on realistic scans, AI 17's day 00 /
// Feb 29 / the GS1 century rule, and the calendar helpers against independently computed day counts.
#include "core/gs1.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
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

// True when some 6-byte run of `scan` occurs in `detail` (an Error must not echo the scan).
bool EchoesScan(const std::string& detail, const std::string& scan) {
  for (std::size_t i = 0; i + 6 <= scan.size(); ++i)
    if (detail.find(scan.substr(i, 6)) != std::string::npos) return true;
  return false;
}

// The Error of `scan`, or a failure when it parses.
Error ErrorOf(const std::string& scan) {
  const auto r = Parse(scan, kYear);
  if (const Error* e = std::get_if<Error>(&r)) return *e;
  ADD_FAILURE() << testing::PrintToString(scan) << " parsed to serial " << std::get<Pack>(r).serial;
  return {};
}

// Issue 33: a scanner that drops GS turns "21SN1<GS>17271231 10LOT" into one serial "SN11727123110LOT" — the same
// pack with a second identity. A last variable-length value with no GS after it is refused when a tail of it
// reads as the lot or expiry the scan lacks; the Error names the AI, the AIs read and the position, never the data.
TEST(Gs1Parse, DroppedGsAfterAVariableLengthValueIsRefused) {
  const std::string g = "0100361414030008";
  struct Case {
    std::string scan;
    std::string ai;    // the AI whose value reads two ways
    std::string what;  // the detail names these AIs, at this position
  };
  const std::vector<Case> cases = {
      {"]d2" + g + "21SN11727123110LOT", "21", "AI 17 + AI 10 (from value position 3)"},
      {g + "21SN11727123110LOT", "21", "AI 17 + AI 10 (from value position 3)"},
      {"]C1" + g + "21SN1172712319100", "21", "AI 17 + AI 91 (from value position 3)"},  // 91 after 17 counts
      {g + "21AB10X", "21", "AI 10 (from value position 2)"},  // "10X": a lot X; carry the lot or a GS
      {g + "17271231" "21AB10X", "21", "AI 10 (from value position 2)"},
      {g + "10LOT42\x1d" "21SN117280131", "21", "AI 17 (from value position 3)"},
      {Gs(g + "21SN1", "10LOT17271231"), "10", "AI 17 (from value position 3)"},  // the lot swallows the expiry
      {"\x1d" + g + "21SN1\x1d" "10LOT17271231", "10", "AI 17 (from value position 3)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::PrintToString(c.scan));
    const Error e = ErrorOf(c.scan);
    EXPECT_EQ(e.ai, c.ai) << e.detail;
    EXPECT_NE(e.detail.find(c.what), std::string::npos) << e.detail;
    EXPECT_NE(e.detail.find("GS (FNC1)"), std::string::npos) << e.detail;
    EXPECT_FALSE(EchoesScan(e.detail, c.scan)) << e.detail;
  }
  // The same packs spelled with their GS (or in a form with delimiters) are read one way, and accepted.
  struct Good {
    std::string scan;
    std::string serial;
    std::optional<std::string> lot;
  };
  const std::vector<Good> good = {
      {Gs(g + "21SN1", "17271231" "10LOT"), "SN1", "LOT"},
      {g + "21SN11727123110LOT\x1d", "SN11727123110LOT", std::nullopt},  // a trailing GS ends the serial
      {g + "21SN11727123110LOT\x1d\r\n", "SN11727123110LOT", std::nullopt},
      {"(01)00361414030008(21)SN11727123110LOT", "SN11727123110LOT", std::nullopt},
      {"https://id.gs1.org/01/00361414030008/21/SN11727123110LOT", "SN11727123110LOT", std::nullopt},
      {g + "21AB10X\x1d", "AB10X", std::nullopt},
      {g + "21AB10", "AB10", std::nullopt},          // tail "10" + empty value: not a lot, one reading
      {g + "21SN117271331", "SN117271331", std::nullopt},  // month 13: not an expiry
      {g + "21SN11727", "SN11727", std::nullopt},         // 4 digits: not an expiry
      {g + "21SN1172712310", "SN1172712310", std::nullopt},  // 17 then "10" + empty value
      {g + "21SN1172712312", "SN1172712312", std::nullopt},  // 17 then "2": not an AI
      {g + "10LOT\x1d" "21SN117271231" "10X", "SN11727123110X", "LOT"},  // 17 + 10, but 10 is carried
      {g + "17271231" "10LOT\x1d" "21SN11727123110X", "SN11727123110X", "LOT"},  // 01, 17, 10 all carried
      {g + "21SN1\x1d" "10LOT17271231\x1d", "SN1", "LOT17271231"},
      {g + "21SN1\x1d" "17271231" "10LOT10X", "SN1", "LOT10X"},  // 10 carried: the lot's tail is not a lot
  };
  for (const Good& c : good) {
    SCOPED_TRACE(testing::PrintToString(c.scan));
    const auto r = Parse(c.scan, kYear);
    ASSERT_TRUE(std::holds_alternative<Pack>(r)) << std::get<Error>(r).detail;
    EXPECT_EQ(std::get<Pack>(r).serial, c.serial);
    EXPECT_EQ(std::get<Pack>(r).lot, c.lot);
  }
  // The value before the tail must itself be valid: a GDTI (AI 253, 13 digits with a check digit, then up to 17
  // characters) whose digits hold "10…" from position 7 has no 7-digit reading, so it is one value.
  const auto gdti = Parse(g + "17271231" "21SN1\x1d" "2531234567101231", kYear);
  EXPECT_TRUE(std::holds_alternative<Pack>(gdti)) << std::get<Error>(gdti).detail;
  EXPECT_EQ(ErrorOf(g + "17271231" "21SN1\x1d" "2531234567101231" "10X").ai, "253");  // 13 digits + lot X
}

// Realistic pharma scans (EU FMD, DSCSA and national packs; GS after every variable-length value but the last,
// with and without symbology identifiers, any AI order, parenthesised, Digital Link; serials and lots that hold
// "10", "17", "21" and dates): none is refused. 37 scans, 0 refused — the figure docs/api.md "GS1 packs" quotes.
TEST(Gs1Parse, RealisticScansAreNotRefused) {
  struct Scan {
    std::string scan;
    std::string gtin;
    std::string serial;
  };
  const std::string de = "04150123456782", fr = "03400930012345", us = "00301234567896", it = "08050221710198";
  const std::string pl = "05901234567893", ch = "07600456789103";
  const std::string de_s = "KXR4P9T2M7WQ", fr_s = "7A10F3K9ZQ21", us_s = "100017452310", it_s = "10420017362419";
  const std::string pl_s = "3PW1727123110KQ", ch_s = "17271231104711";
  const std::vector<Scan> scans = {
      // Germany (EU FMD, PZN as NHRN 710), lot B23F041, expiry 2026-11-30.
      {Gs("]d201" + de + "17261130" "10B23F041", "21" + de_s), de, de_s},
      {Gs("]d201" + de + "21" + de_s, "17261130" "10B23F041"), de, de_s},
      {Gs(Gs("]d201" + de + "21" + de_s, "10B23F041"), "17261130"), de, de_s},
      {Gs(Gs("]d201" + de + "17261130" "10B23F041", "21" + de_s), "71012345678"), de, de_s},
      {Gs(Gs("01" + de + "71012345678", "21" + de_s), "17261130" "10B23F041"), de, de_s},
      {"\x1d" + Gs("01" + de + "17261130" "10B23F041", "21" + de_s), de, de_s},
      {"(01)" + de + "(17)261130(10)B23F041(21)" + de_s + "(710)12345678", de, de_s},
      // France (EU FMD, CIP-based NTIN): a serial holding "10" and "21", a lot holding "10".
      {Gs("]d201" + fr + "17270531" "10V10457", "21" + fr_s), fr, fr_s},
      {Gs("]d201" + fr + "10V10457", "17270531" "21" + fr_s), fr, fr_s},
      {Gs(Gs("]C101" + fr + "21" + fr_s, "10V10457"), "17270531"), fr, fr_s},
      {Gs("01" + fr + "21" + fr_s, "17270531" "10V10457"), fr, fr_s},
      {"(01)" + fr + "(17)270531(10)V10457(21)" + fr_s, fr, fr_s},
      {"https://id.gs1.org/01/" + fr + "/10/V10457/21/" + fr_s + "?17=270531", fr, fr_s},
      // United States (DSCSA, NDC-based GTIN): a numeric serial holding "10" and "17", a lot holding "17".
      {Gs("]d201" + us + "17280131" "10A17K2", "21" + us_s), us, us_s},
      {Gs("]d201" + us + "21" + us_s, "17280131" "10A17K2"), us, us_s},
      {Gs("01" + us + "17280131" "21" + us_s, "10A17K2"), us, us_s},
      {Gs(Gs("]d201" + us + "10A17K2", "21" + us_s), "17280131"), us, us_s},
      {Gs("]d2\x1d" "01" + us + "17280131" "10A17K2", "21" + us_s) + "\r\n", us, us_s},
      {"(01) " + us + " (21) " + us_s + " (17) 280131 (10) A17K2", us, us_s},
      {"https://dscsa.example.com/01/" + us + "/21/" + us_s + "?10=A17K2&17=280131", us, us_s},
      // Italy: a 14-digit numeric serial starting "10", a numeric lot, expiry with day 00.
      {Gs("]d201" + it + "17251200" "102310", "21" + it_s), it, it_s},
      {Gs("]d201" + it + "21" + it_s, "17251200" "102310"), it, it_s},
      {Gs(Gs("01" + it + "21" + it_s, "102310"), "17251200"), it, it_s},
      {"]Q3" + Gs("01" + it + "17251200" "102310", "21" + it_s), it, it_s},
      // Poland: a serial that reads as "...17271231 10KQ" — carried 17 and 10, so one reading.
      {Gs("]d201" + pl + "17290228" "10L2301-07", "21" + pl_s), pl, pl_s},
      {Gs("]d201" + pl + "10L2301-07", "17290228" "21" + pl_s), pl, pl_s},
      {Gs("]d201" + pl + "21" + pl_s, "17290228" "10L2301-07"), pl, pl_s},
      {"https://example.pl/p/01/" + pl.substr(1) + "/21/" + pl_s + "?17=290228&10=L2301-07", pl, pl_s},
      // Switzerland: a serial that starts "17271231 10": position 0 is the serial's own start.
      {Gs("]d201" + ch + "17300630" "10CH-0815", "21" + ch_s), ch, ch_s},
      {Gs("]d201" + ch + "21" + ch_s, "17300630" "10CH-0815"), ch, ch_s},
      {Gs(Gs("]d201" + ch + "21" + ch_s, "10CH-0815"), "17300630"), ch, ch_s},
      // Company-internal and other AIs after the serial; a trailing GS.
      {Gs(Gs("]d201" + de + "17261130" "10B23F041", "21" + de_s), "91X7-2231"), de, de_s},
      {Gs(Gs("]d201" + fr + "17270531" "10V10457", "21" + fr_s), "240" "1017-A"), fr, fr_s},
      {Gs("]d201" + us + "17280131" "10A17K2", "21" + us_s) + "\x1d", us, us_s},
      // Packs without a lot whose serial does not end in "10…" or a date: accepted too.
      {"]d201" + de + "17261130" "21" + de_s, de, de_s},
      {"01" + us + "21" + "482956730021", us, "482956730021"},
      {Gs("]d201" + pl + "21" + pl_s, "17290228"), pl, pl_s},
  };
  ASSERT_EQ(scans.size(), 37u);
  std::size_t refused = 0;
  for (const Scan& s : scans) {
    SCOPED_TRACE(testing::PrintToString(s.scan));
    const auto r = Parse(s.scan, kYear);
    if (const Error* e = std::get_if<Error>(&r)) {
      ++refused;
      ADD_FAILURE() << "refused: " << e->detail;
      continue;
    }
    EXPECT_EQ(Identity(std::get<Pack>(r)), "01" + s.gtin + "21" + s.serial);
  }
  EXPECT_EQ(refused, 0u);
}

// What the dropped-GS rule costs a scan that carries no lot: a random 12-digit serial is refused when its
// characters 1..10 hold "10" (a lot could start there), probability 1 - N/10^10 with N the 10-digit strings
// without "10" (~8.7 %). A fixed-seed sample of 20 000 lies within 4 standard deviations of it.
TEST(Gs1Parse, DroppedGsRuleRefusesLotlessNumericSerialsAtTheExpectedRate) {
  double ends_in_1 = 1, other = 9;  // 1-digit strings without "10", by last digit
  for (int n = 2; n <= 10; ++n) {
    const double next_1 = ends_in_1 + other, next_other = 8 * ends_in_1 + 9 * other;
    ends_in_1 = next_1;
    other = next_other;
  }
  const double p = 1 - (ends_in_1 + other) / 1e10;
  constexpr int kSample = 20000;
  std::mt19937_64 rng(33);
  int refused = 0;
  for (int i = 0; i < kSample; ++i) {
    std::string serial;
    for (int k = 0; k < 12; ++k) serial += static_cast<char>('0' + rng() % 10);
    const auto r = Parse("0100361414030008" "17271231" "21" + serial, kYear);
    if (const Error* e = std::get_if<Error>(&r)) {
      ++refused;
      ASSERT_EQ(e->ai, "21") << e->detail;
    }
  }
  const double sd = std::sqrt(p * (1 - p) / kSample);
  EXPECT_NEAR(static_cast<double>(refused) / kSample, p, 4 * sd) << "p = " << p;
}

// '(' and ')' in a value: "(21)X(10)Y" is serial X + lot Y, so a serial "X(10)Y" (set 82 allows it) would share
// its parenthesised spelling. Refused in every form, naming the AI; the parenthesised reading stays.
TEST(Gs1Parse, ParenthesesInAValueAreRefusedInEveryForm) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"0100361414030008" "21X(10)Y", "21"},
      {"]d20100361414030008" "21X(10)Y\x1d" "17271231", "21"},
      {"0100361414030008" "21SN)1", "21"},
      {"0100361414030008" "10L(1)\x1d" "21SN0001", "10"},
      {"0100361414030008" "21SN0001\x1d" "240A(B", "240"},
      {"https://id.gs1.org/01/00361414030008/21/X%2810%29Y", "21"},
      {"https://id.gs1.org/01/00361414030008/21/X(10)Y", "21"},
      {"https://id.gs1.org/01/00361414030008/21/SN0001?10=L%29", "10"},
      {"(01)00361414030008(21)X)Y", "21"},
      {"(01)00361414030008(10)LOT)(21)SN0001", "10"},
  };
  for (const auto& [scan, ai] : cases) {
    SCOPED_TRACE(testing::PrintToString(scan));
    const Error e = ErrorOf(scan);
    EXPECT_EQ(e.ai, ai) << e.detail;
    EXPECT_NE(e.detail.find("parenthesised form"), std::string::npos) << e.detail;
    EXPECT_FALSE(EchoesScan(e.detail, scan)) << e.detail;
  }
  const auto r = Parse("(01)00361414030008(21)X(10)Y", kYear);
  ASSERT_TRUE(std::holds_alternative<Pack>(r)) << std::get<Error>(r).detail;
  EXPECT_EQ(std::get<Pack>(r).serial, "X");
  EXPECT_EQ(std::get<Pack>(r).lot, "Y");
}

// In the parenthesised form every '(' must open a well-formed "(AI)" of a known AI: anything else is refused,
// never folded into the value before it.
TEST(Gs1Parse, StrayOpeningParenthesisInTheParenthesisedFormIsRefused) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"(01)00361414030008(21)X(Y", ""},
      {"(01)00361414030008(21)X(1A)Y", ""},
      {"(01)00361414030008(21)X()Y", ""},
      {"(01)00361414030008(21)X(1)Y", ""},
      {"(01)00361414030008(21)X(12345)Y", ""},
      {"(01)00361414030008(21)X((10)Y", ""},
      {"(01)00361414030008(21)X( 10)Y", ""},
      {"(01)00361414030008(21)X(", ""},
      {"(01)00361414030008(21)X(236)Y", "236"},
  };
  for (const auto& [scan, ai] : cases) {
    SCOPED_TRACE(testing::PrintToString(scan));
    EXPECT_EQ(ErrorOf(scan).ai, ai);
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
