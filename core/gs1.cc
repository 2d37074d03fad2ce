// The GS1 parser of core/gs1.h: symbology identifiers, element strings (GS separators and their omission after
// predefined-length AIs), the parenthesised form, then one validation and assembly step shared with the Digital
// Link reader (core/gs1_digital_link.cc). Each form only cuts the scan into AI/value pairs; every rule about a
// value (length, character set, no '(' or ')', check digit, date, duplicates) is applied once, in Assemble().
// One rule belongs to element strings alone, UnterminatedValueReadsTwoWays(): a value that ran to the end of the
// scan without a GS must not also read as a shorter value followed by the lot or expiry (a dropped GS).
#include "core/gs1.h"

#include <string>

#include "core/gs1_ai_table.h"
#include "core/gs1_elements.h"

namespace scangate::gs1 {
namespace {

using detail::AiError;
using detail::Elements;

constexpr char kGs = '\x1d';  // FNC1 transmitted as ASCII GS

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool AllDigits(std::string_view s) {
  for (char c : s)
    if (!IsDigit(c)) return false;
  return true;
}
unsigned TwoDigits(std::string_view s, std::size_t at) {
  return static_cast<unsigned>((s[at] - '0') * 10 + (s[at + 1] - '0'));
}

Error PlainError(std::string what) { return Error{"", std::move(what)}; }
Error TooMany() { return PlainError("more than " + std::to_string(kMaxElements) + " elements"); }

// Reads the AI at `at` (digits only); on success advances `at` past it.
std::optional<Error> ReadAi(std::string_view s, std::size_t& at, std::string_view& ai) {
  if (s.size() - at < 2 || !IsDigit(s[at]) || !IsDigit(s[at + 1]))
    return PlainError("expected an AI (digits) at position " + std::to_string(at));
  const int len = AiLength(s.substr(at, 2));
  if (len == 0) return AiError(s.substr(at, 2), "unknown AI");
  if (s.size() - at < static_cast<std::size_t>(len) || !AllDigits(s.substr(at, static_cast<std::size_t>(len))))
    return PlainError("truncated AI at position " + std::to_string(at));
  ai = s.substr(at, static_cast<std::size_t>(len));
  if (FindAi(ai) == nullptr) return AiError(ai, "unknown AI");
  at += static_cast<std::size_t>(len);
  return std::nullopt;
}

// An element string ("01…17…10…<GS>21…"): a predefined-length AI's value is exactly its length (a GS after it is
// tolerated); every other value runs to the next GS or the end. `last_open`: the last value is variable-length and
// ran to the end of `s`, no GS after it.
std::optional<Error> ReadElementString(std::string_view s, Elements& out, bool& last_open) {
  std::size_t at = 0;
  if (at < s.size() && s[at] == kGs) ++at;  // FNC1 in first position sent as GS
  if (at == s.size()) return PlainError("no element string");
  while (at < s.size()) {
    std::string_view ai;
    if (auto e = ReadAi(s, at, ai)) return e;
    std::size_t end = at;
    const int fixed = PredefinedLength(ai);
    if (fixed != 0) {
      while (end < s.size() && end - at < static_cast<std::size_t>(fixed) && s[end] != kGs) ++end;
    } else {
      while (end < s.size() && s[end] != kGs) ++end;
    }
    if (!out.Add(ai, s.substr(at, end - at))) return TooMany();
    last_open = fixed == 0 && end == s.size();
    at = end;
    if (at < s.size() && s[at] == kGs) ++at;
  }
  return std::nullopt;
}

std::string_view TrimSpaces(std::string_view v) {
  while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
  while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
  return v;
}

// "(01)00361414030008(17)271231(10)0LOT42(21)SN0001": a value runs to the next '(' or the end, and every '('
// must open a well-formed "(AI)". A value holding '(' or ')' is refused by Validate() in every form, so no value
// is cut short here that another spelling would carry whole.
std::optional<Error> ReadParenthesised(std::string_view s, Elements& out) {
  std::size_t at = 0;
  while (at < s.size()) {
    if (s[at] != '(') return PlainError("expected '(' at position " + std::to_string(at));
    const std::size_t close = s.find(')', at + 1);
    if (close == std::string_view::npos || close - at - 1 < 2 || close - at - 1 > 4 ||
        !AllDigits(s.substr(at + 1, close - at - 1)))
      return PlainError("expected an AI in parentheses at position " + std::to_string(at));
    const std::string_view ai = s.substr(at + 1, close - at - 1);
    if (FindAi(ai) == nullptr) return AiError(ai, "unknown AI");
    std::size_t end = s.find('(', close + 1);
    if (end == std::string_view::npos) end = s.size();
    if (!out.Add(ai, TrimSpaces(s.substr(close + 1, end - close - 1)))) return TooMany();
    at = end;
  }
  return std::nullopt;
}

bool CheckDigitOk(std::string_view digits) {
  unsigned sum = 0;
  const std::size_t n = digits.size();
  for (std::size_t i = 0; i + 1 < n; ++i) {  // weights 3,1,3,… from the digit left of the check digit
    const unsigned d = static_cast<unsigned>(digits[n - 2 - i] - '0');
    sum += (i % 2 == 0) ? 3 * d : d;
  }
  return static_cast<unsigned>(digits[n - 1] - '0') == (10 - sum % 10) % 10;
}

// YYMMDD at the start of `v` (6 digits, checked by the caller); day 00 means the month's last day.
std::optional<Date> ReadDate(std::string_view v, int current_year) {
  const unsigned yy = TwoDigits(v, 0), mm = TwoDigits(v, 2), dd = TwoDigits(v, 4);
  const int year = CenturyYear(yy, current_year);
  const unsigned last = DaysInMonth(year, mm);
  if (last == 0 || dd > last) return std::nullopt;
  return Date{year, mm, dd == 0 ? last : dd};
}

// Length, character set, check digit and date of one element.
std::optional<Error> Validate(const AiSpec& spec, std::string_view ai, std::string_view v, int current_year) {
  if (v.size() > spec.max_len)
    return AiError(ai, "field is " + std::to_string(v.size()) + " characters, at most " +
                           std::to_string(spec.max_len) + " allowed");
  if (v.size() < spec.min_len)
    return AiError(ai, "field is " + std::to_string(v.size()) + " characters, " +
                           (spec.fixed() ? "exactly " : "at least ") + std::to_string(spec.min_len) + " required");
  for (std::size_t i = 0; i < v.size(); ++i) {
    const bool ok = i < spec.numeric_prefix ? IsDigit(v[i]) : InCharset(spec.rest, v[i]);
    if (!ok) return AiError(ai, "character at position " + std::to_string(i) + " is not allowed in this field");
    // Set 82 allows them, but "(21)X(10)Y" would then be both serial "X(10)Y" and serial X + lot Y.
    if (v[i] == '(' || v[i] == ')')
      return AiError(ai, "the value holds '(' or ')' (position " + std::to_string(i) +
                             "), which the parenthesised form cannot carry unambiguously");
  }
  if (spec.check_len != 0 && !CheckDigitOk(v.substr(0, spec.check_len)))
    return AiError(ai, "check digit does not match (GS1 mod 10)");
  if (spec.date) {
    if (!ReadDate(v, current_year)) return AiError(ai, "not a valid YYMMDD date");
    if (ai == "7007" && v.size() != 6 && (v.size() != 12 || !ReadDate(v.substr(6), current_year)))
      return AiError(ai, "not a valid YYMMDD[YYMMDD] date range");
    if (ai == "7003" && (TwoDigits(v, 6) > 23 || TwoDigits(v, 8) > 59)) return AiError(ai, "not a valid HHMM time");
  }
  return std::nullopt;
}

// Every rule about values, then the Pack: 01 and 21 required, an AI twice only with the same value.
std::variant<Pack, Error> Assemble(const Elements& els, int current_year) {
  Pack p;
  bool have_gtin = false, have_serial = false;
  for (std::size_t i = 0; i < els.size; ++i) {
    const auto& [ai, v] = els.items[i];
    const AiSpec* spec = FindAi(ai);
    if (spec == nullptr) return AiError(ai, "unknown AI");
    if (auto e = Validate(*spec, ai, v, current_year)) return *std::move(e);
    bool seen = false;
    for (std::size_t j = 0; j < i; ++j) {
      if (els.items[j].ai != ai) continue;
      if (els.items[j].value != v) return AiError(ai, "appears twice with different values");
      seen = true;
    }
    if (seen) continue;
    if (ai == "01") {
      p.gtin.assign(v);
      have_gtin = true;
    } else if (ai == "21") {
      p.serial.assign(v);
      have_serial = true;
    } else if (ai == "10") {
      p.lot.emplace(v);
    } else if (ai == "17") {
      p.expiry = ReadDate(v, current_year);  // valid: Validate checked it
    }
  }
  if (!have_gtin) return AiError("01", "missing: a pack needs its GTIN (01) and serial (21)");
  if (!have_serial) return AiError("21", "missing: a pack needs its GTIN (01) and serial (21)");
  return p;
}

// The AIs a Pack reads; a dropped GS that hides one of them (the lot, the expiry) in the value before it is what
// UnterminatedValueReadsTwoWays() refuses.
bool IsPackAi(std::string_view ai) { return ai == "01" || ai == "10" || ai == "17" || ai == "21"; }

bool Carries(const Elements& els, std::string_view ai) {
  for (std::size_t i = 0; i < els.size; ++i)
    if (els.items[i].ai == ai) return true;
  return false;
}

// The last value of an element string, variable-length with no GS after it (`els` assembled without error): a
// scanner that drops GS turns "21SN1<GS>17271231" + "10LOT" into serial "SN11727123110LOT", one pack with two
// identities. Refused when, from some value position p >= 1 on, the value's tail reads GS-less as a complete
// element string (predefined-length AIs at their length, a last variable-length one to the end) that starts with
// a Pack AI (01, 10, 17, 21) and holds only AIs the scan does not carry, each once, every value valid by the table
// — the value's first p characters valid too. Tails made only of other AIs (240, 91, 710, …) are not refused:
// they turn up in most random serials (issue 33, docs/api.md "GS1 packs"), so a dropped GS before them stays unseen.
std::optional<Error> UnterminatedValueReadsTwoWays(const Elements& els, int current_year) {
  const auto [ai, v] = els.items[els.size - 1];
  const AiSpec& spec = *FindAi(ai);  // known: Assemble checked it
  for (std::size_t p = 1; p + 2 < v.size(); ++p) {
    const std::string_view tail = v.substr(p);
    if (!IsPackAi(tail.substr(0, 2)) || Carries(els, tail.substr(0, 2))) continue;  // the Pack AIs are 2 digits
    if (Validate(spec, ai, v.substr(0, p), current_year)) continue;  // no valid shorter value: one reading
    Elements more;
    bool open = false;
    if (ReadElementString(tail, more, open)) continue;  // every AI it yields is in the table
    bool valid = true;
    std::string names;
    for (std::size_t i = 0; i < more.size && valid; ++i) {
      const auto [tai, tv] = more.items[i];
      valid = !Carries(els, tai) && !Validate(*FindAi(tai), tai, tv, current_year);
      for (std::size_t j = 0; j < i && valid; ++j) valid = more.items[j].ai != tai;
      names.append(i == 0 ? "AI " : " + AI ").append(tai);
    }
    if (!valid) continue;
    return AiError(ai, "the value ends in what reads as " + names + " (from value position " + std::to_string(p) +
                           "): a scanner that dropped the GS (FNC1) separator? End a variable-length value with GS");
  }
  return std::nullopt;
}

bool IsGs1Symbology(std::string_view id) {
  return id == "d2" || id == "C1" || id == "Q3" || id == "e0" || id == "J1";
}
bool IsPlainSymbology(std::string_view id) { return id == "Q1" || id == "d1"; }  // may carry a Digital Link

std::int32_t DaysFromCivil(int y, unsigned m, unsigned d) {  // proleptic Gregorian, era-based
  y -= m <= 2 ? 1 : 0;
  const int era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);                 // [0, 399]
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;  // [0, 365]
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;            // [0, 146096]
  return static_cast<std::int32_t>(era * 146097 + static_cast<int>(doe) - 719468);
}

}  // namespace

namespace detail {
Error AiError(std::string_view ai, std::string_view what) {
  std::string detail = "AI (";
  detail.append(ai).append("): ").append(what);
  return Error{std::string(ai), std::move(detail)};
}
}  // namespace detail

std::string Identity(const Pack& p) {
  std::string id;
  id.reserve(4 + p.gtin.size() + p.serial.size());
  id.append("01").append(p.gtin).append("21").append(p.serial);
  return id;
}

unsigned DaysInMonth(int year, unsigned month) {
  static constexpr unsigned kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (month < 1 || month > 12) return 0;
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  return month == 2 && leap ? 29 : kDays[month - 1];
}

int CenturyYear(unsigned yy, int current_year) {
  const int cur_yy = current_year % 100, century = current_year - cur_yy;
  const int diff = static_cast<int>(yy) - cur_yy;
  if (diff >= 51) return century - 100 + static_cast<int>(yy);
  if (diff <= -50) return century + 100 + static_cast<int>(yy);
  return century + static_cast<int>(yy);
}

std::int32_t DaysSinceEpoch(const Date& d) { return DaysFromCivil(d.year, d.month, d.day); }

std::int32_t FirstDayOfNextMonth(const Date& d) {
  return d.month >= 12 ? DaysFromCivil(d.year + 1, 1, 1) : DaysFromCivil(d.year, d.month + 1, 1);
}

std::variant<Pack, Error> Parse(std::string_view scan, int current_year) {
  if (current_year < 1 || current_year > 9999) return PlainError("current year outside 1..9999");
  if (scan.size() > kMaxScanBytes) return PlainError("longer than " + std::to_string(kMaxScanBytes) + " bytes");
  while (!scan.empty() && (scan.back() == '\n' || scan.back() == '\r')) scan.remove_suffix(1);
  if (scan.empty()) return PlainError("empty scan");

  bool gs1_id = false, plain_id = false;
  if (scan.front() == ']') {
    if (scan.size() < 3) return PlainError("truncated symbology identifier");
    gs1_id = IsGs1Symbology(scan.substr(1, 2));
    plain_id = IsPlainSymbology(scan.substr(1, 2));
    if (!gs1_id && !plain_id) return PlainError("symbology identifier of a non-GS1 symbol");
    scan.remove_prefix(3);
  }
  Elements els;
  detail::ScratchBuffer scratch;
  bool last_open = false;  // element strings only: the Digital Link and the parenthesised form delimit every value
  if (!gs1_id && detail::LooksLikeDigitalLink(scan)) {
    if (auto e = detail::ReadDigitalLink(scan, els, scratch)) return *std::move(e);
  } else if (plain_id) {
    return PlainError("symbology identifier of a non-GS1 symbol and no Digital Link");
  } else if (!gs1_id && !scan.empty() && scan.front() == '(') {
    if (auto e = ReadParenthesised(scan, els)) return *std::move(e);
  } else {
    if (auto e = ReadElementString(scan, els, last_open)) return *std::move(e);
  }
  std::variant<Pack, Error> r = Assemble(els, current_year);
  if (last_open && std::holds_alternative<Pack>(r))
    if (auto e = UnterminatedValueReadsTwoWays(els, current_year)) return *std::move(e);
  return r;
}

}  // namespace scangate::gs1
