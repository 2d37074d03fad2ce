// libFuzzer target over core/gs1.h (the GS1 element-string / Digital Link parser). Invariants checked for every
// input, parsed with two current years (2026 and 2099, so the century rule's other branch runs too): no crash,
// no sanitizer report; a Pack has a 14-digit GTIN with a valid check digit, a 1-20 character serial, no '(' or ')'
// in its serial and lot, an expiry that is a real date, and re-parses to the same GTIN + serial from its
// Identity() ended by a GS, from its parenthesised form and from a Digital Link built from it (the bare Identity()
// too, unless it is refused naming AI 21: without its GS a serial ending in "10…" or "17<date>" reads two ways,
// issue 33); an Error's ai is "" or 2-4 digits, its detail is printable ASCII and holds no 16-byte run of
// the input (raw keys never reach logs; 16, not the unit test's 6, so that a fuzzer-made input quoting a
// detail's own words is not flagged; compared by hand, not with memcmp, which libFuzzer would steer toward a
// match). Seeds: tests/fuzz/gs1_corpus/. Built by tests/fuzz/CMakeLists.txt.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <variant>

#include "core/gs1.h"

namespace {
using namespace scangate::gs1;

void Check(bool ok) {
  if (!ok) std::abort();  // libFuzzer reports the input as a crash
}

bool AllDigits(std::string_view s) {
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// The serial percent-encoded for a URI path segment (every byte but letters and digits).
std::string PercentEncode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if ((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// True when some 16-byte run of `scan` occurs in `text`.
bool Contains16ByteRunOf(std::string_view text, std::string_view scan) {
  constexpr std::size_t kRun = 16;
  for (std::size_t i = 0; i + kRun <= scan.size(); ++i)
    for (std::size_t j = 0; j + kRun <= text.size(); ++j) {
      std::size_t k = 0;
      while (k < kRun && text[j + k] == scan[i + k]) ++k;
      if (k == kRun) return true;
    }
  return false;
}

void SameIdentity(const Pack& p, const std::string& spelling, int year) {
  const auto again = Parse(spelling, year);
  Check(std::holds_alternative<Pack>(again));
  Check(std::get<Pack>(again).gtin == p.gtin && std::get<Pack>(again).serial == p.serial);
}

void CheckOne(std::string_view scan, int year) {
  const auto r = Parse(scan, year);
  if (const Error* e = std::get_if<Error>(&r)) {
    Check(e->ai.empty() || (e->ai.size() >= 2 && e->ai.size() <= 4 && AllDigits(e->ai)));
    Check(!e->detail.empty());
    for (char c : e->detail) Check(c >= 0x20 && c <= 0x7e);
    Check(!Contains16ByteRunOf(e->detail, scan));
    return;
  }
  const Pack& p = std::get<Pack>(r);
  Check(p.gtin.size() == 14 && AllDigits(p.gtin));
  Check(!p.serial.empty() && p.serial.size() <= 20);
  Check(!p.lot || (!p.lot->empty() && p.lot->size() <= 20));
  if (p.expiry) {
    Check(p.expiry->month >= 1 && p.expiry->month <= 12);
    Check(p.expiry->day >= 1 && p.expiry->day <= DaysInMonth(p.expiry->year, p.expiry->month));
    Check(FirstDayOfNextMonth(*p.expiry) > DaysSinceEpoch(*p.expiry));
  }
  Check(p.serial.find_first_of("()") == std::string::npos);
  Check(!p.lot || p.lot->find_first_of("()") == std::string::npos);
  const std::string identity = Identity(p);
  const auto bare = Parse(identity, year);
  if (const Error* e = std::get_if<Error>(&bare)) {
    Check(e->ai == "21");
  } else {
    SameIdentity(p, identity, year);
  }
  SameIdentity(p, identity + '\x1d', year);
  SameIdentity(p, "(01)" + p.gtin + "(21)" + p.serial, year);
  SameIdentity(p, "https://id.example/01/" + p.gtin + "/21/" + PercentEncode(p.serial), year);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view scan(reinterpret_cast<const char*>(data), size);
  CheckOne(scan, 2026);
  CheckOne(scan, 2099);
  return 0;
}
