// The GS1 Application Identifier table scangate knows (GS1 General Specifications, section 3): each AI's
// length, its data's minimum/maximum length, which leading part is numeric, the character set of the rest,
// and whether a GS1 check digit protects a leading key. Used by core/gs1.cc (element strings, the
// parenthesised form) and core/gs1_digital_link.cc. Invariant: the table is prefix-free (an AI's length is
// fixed by its first two digits, as in the GS1 system), so reading an AI never needs look-ahead.
// Pure constant data; every function is safe to call from any thread.
#pragma once

#include <cstdint>
#include <string_view>

namespace scangate::gs1 {

// What the non-numeric-prefix part of an AI's data may hold.
enum class Charset : std::uint8_t {
  kNumeric,  // digits only
  kCset82,   // GS1 AI encodable character set 82 (General Specifications figure 7.11-1)
  kCset39,   // GS1 AI encodable character set 39 (digits, upper case, # - /): AI 8010
};

struct AiSpec {
  std::string_view ai;         // 2-4 digits; an 'n' matches any digit (e.g. "31nn" = AIs 3100..3199)
  std::uint8_t min_len;        // data length bounds (min == max: fixed length)
  std::uint8_t max_len;
  std::uint8_t numeric_prefix; // the first this-many data characters are digits (whole field for N fields)
  Charset rest;                // the character set of the data after the numeric prefix
  std::uint8_t check_len;      // the first check_len digits end in a GS1 mod-10 check digit (0 = none)
  bool date;                   // the first 6 digits are a YYMMDD date (day 00 allowed)
  bool fixed() const { return min_len == max_len; }
};

// The AI's length (2, 3 or 4 digits) given its first two digits, or 0 when no AI starts with them.
// `two` must hold two characters; non-digits give 0. Safe to call from any thread.
int AiLength(std::string_view two);

// The spec of `ai` (exactly the AI's digits, 2-4 characters), or nullptr for an AI scangate does not know.
// Safe to call from any thread.
const AiSpec* FindAi(std::string_view ai);

// Data length of an AI whose length GS1 predefines by its first two digits (00-04, 11-20, 31-36, 41: no FNC1
// separator follows them, General Specifications figure 7.8.5-2), or 0 for every other AI. Safe from any thread.
int PredefinedLength(std::string_view ai);

// True when `c` belongs to the character set (the numeric prefix is checked by the caller). Any thread.
bool InCharset(Charset cs, char c);

}  // namespace scangate::gs1
