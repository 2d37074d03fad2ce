// GS1 element strings as packs (issue 24): one scanned string in any of the spellings scanners and camera apps
// deliver — symbology identifier or none, FNC1 as GS (0x1D) or left out after predefined-length AIs, any AI
// order, the parenthesised human-readable form, a GS1 Digital Link URI — becomes one Pack whose Identity() is
// the same for every spelling. Invariant: Parse never throws, never reads outside `scan`, and an Error's text
// never holds more of the input than an AI's digits (raw keys must not reach logs). The AI table lives in
// core/gs1_ai_table.h, the Digital Link reader in core/gs1_digital_link.cc; the --keys=gs1 wiring in server/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace scangate::gs1 {

struct Date {  // a valid calendar date (AI 17 with day 00 resolved)
  int year;
  unsigned month;
  unsigned day;
  friend bool operator==(const Date&, const Date&) = default;
};

struct Pack {
  std::string gtin;                 // GTIN-14 (14 digits, check digit verified; GTIN-8/12/13 left-padded with 0)
  std::string serial;               // AI 21
  std::optional<std::string> lot;   // AI 10
  std::optional<Date> expiry;       // AI 17 (YYMMDD, GS1 century rule relative to `current_year`)
  friend bool operator==(const Pack&, const Pack&) = default;
};

// "01" + gtin + "21" + serial: the canonical identity, what --keys=gs1 digests. Pure; any thread.
std::string Identity(const Pack& p);

struct Error {
  std::string ai;      // the AI at fault ("01", "21", "17", "10", the unknown one...), "" when not AI-specific
  std::string detail;  // one sentence for a 400 problem: never echoes more than the AI and a position/length
};

// Longest scan Parse accepts (bytes); longer is an Error (ai ""). Above the HTTP layer's key limit.
inline constexpr std::size_t kMaxScanBytes = 1024;
// Most elements (AI + value pairs) one scan may carry; more is an Error (ai "").
inline constexpr std::size_t kMaxElements = 32;

// Parses one scanned string in any of the forms of the issue. Pure, thread-safe (safe to call concurrently from
// any thread), never throws, no allocation beyond the result. `current_year`: 4-digit year for AI 17's century
// (GS1 General Specifications 7.12); outside 1..9999 is an Error.
// Accepted forms: an optional symbology identifier (]d2 ]C1 ]Q3 ]e0 ]J1 before an element string; ]Q1, ]d1 or
// none before a Digital Link); element strings with GS separators (a GS after a predefined-length AI, a leading
// and a trailing GS are tolerated); "(01)…(21)…" (spaces around an element are ignored, a value ends at the
// next '('); http(s) Digital Link URIs (any host, any path prefix, /01/{gtin} with GTIN-8/12/13/14, then AI/value
// pairs in any order, query attributes with numeric keys; other query keys are ignored; the convenience names
// gtin, cpv, lot and ser are accepted in the path). A trailing CR/LF (scanner suffix) is ignored.
// Refused so that no pack has two identities and no two packs share one (issue 33): '(' or ')' in any value, in
// every form (the parenthesised form could not carry it); and, in element strings, a last variable-length value
// with no GS after it whose tail (from value position 1 on) reads GS-less as a Pack AI the scan lacks (10, 17)
// with valid values, possibly followed by other AIs the scan lacks — a scanner that dropped GS ("21SN1" +
// "17271231" + "10LOT" read as one serial). A scan carrying 01, 17 and 10, or a GS after its last value, is never
// refused so. Both Errors name the AI whose value is at fault.
std::variant<Pack, Error> Parse(std::string_view scan, int current_year);

// Days since 1970-01-01 of a date (proleptic Gregorian); the first day of the month after `d`'s month.
// Pure; any thread.
std::int32_t DaysSinceEpoch(const Date& d);
std::int32_t FirstDayOfNextMonth(const Date& d);  // days since 1970-01-01

// Days in `month` (1-12) of `year` (proleptic Gregorian leap rule); 0 for a month outside 1-12. Any thread.
unsigned DaysInMonth(int year, unsigned month);

// The 4-digit year of a 2-digit YY by the GS1 century rule (General Specifications 7.12): YY - (current_year
// mod 100) in 51..99 -> previous century, in -99..-50 -> next century, else the current one. Any thread.
int CenturyYear(unsigned yy, int current_year);

}  // namespace scangate::gs1
