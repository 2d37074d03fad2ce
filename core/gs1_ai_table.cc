// The AI table of core/gs1_ai_table.h, written from the GS1 General Specifications (section 3, the AI
// definitions, and figure 7.8.5-2, the AIs whose length is predefined by their first two digits). It covers the
// healthcare and retail AIs a pharmacy or POS scan carries; an AI missing here is reported as unknown.
#include "core/gs1_ai_table.h"

#include <array>
#include <cstddef>

namespace scangate::gs1 {
namespace {

constexpr Charset N = Charset::kNumeric;
constexpr Charset X = Charset::kCset82;

// Sorted by AI ('n' after the digits), so the AIs of one two-digit prefix are contiguous.
// Columns: ai, min data length, max data length, numeric prefix, charset of the rest, check-digit span, date.
constexpr AiSpec kTable[] = {
    {"00", 18, 18, 18, N, 18, false},    // SSCC
    {"01", 14, 14, 14, N, 14, false},    // GTIN
    {"02", 14, 14, 14, N, 14, false},    // CONTENT
    {"03", 14, 14, 14, N, 14, false},    // MTO GTIN
    {"10", 1, 20, 0, X, 0, false},       // BATCH/LOT
    {"11", 6, 6, 6, N, 0, true},         // PROD DATE
    {"12", 6, 6, 6, N, 0, true},         // DUE DATE
    {"13", 6, 6, 6, N, 0, true},         // PACK DATE
    {"15", 6, 6, 6, N, 0, true},         // BEST BEFORE
    {"16", 6, 6, 6, N, 0, true},         // SELL BY
    {"17", 6, 6, 6, N, 0, true},         // USE BY / EXPIRY
    {"20", 2, 2, 2, N, 0, false},        // VARIANT
    {"21", 1, 20, 0, X, 0, false},       // SERIAL
    {"22", 1, 20, 0, X, 0, false},       // CPV
    {"235", 1, 28, 0, X, 0, false},      // TPX
    {"240", 1, 30, 0, X, 0, false},      // ADDITIONAL ID
    {"241", 1, 30, 0, X, 0, false},      // CUST. PART No.
    {"242", 1, 6, 6, N, 0, false},       // MTO VARIANT
    {"243", 1, 20, 0, X, 0, false},      // PCN
    {"250", 1, 30, 0, X, 0, false},      // SECONDARY SERIAL
    {"251", 1, 30, 0, X, 0, false},      // REF. TO SOURCE
    {"253", 13, 30, 13, X, 13, false},   // GDTI: N13 + X..17
    {"254", 1, 20, 0, X, 0, false},      // GLN EXTENSION COMPONENT
    {"255", 13, 25, 25, N, 13, false},   // GCN: N13 + N..12
    {"30", 1, 8, 8, N, 0, false},        // VAR. COUNT
    {"31nn", 6, 6, 6, N, 0, false},      // trade/logistic measures (fourth digit: decimal point position)
    {"32nn", 6, 6, 6, N, 0, false},
    {"33nn", 6, 6, 6, N, 0, false},
    {"34nn", 6, 6, 6, N, 0, false},
    {"35nn", 6, 6, 6, N, 0, false},
    {"36nn", 6, 6, 6, N, 0, false},
    {"37", 1, 8, 8, N, 0, false},        // COUNT
    {"390n", 1, 15, 15, N, 0, false},    // AMOUNT
    {"391n", 4, 18, 18, N, 0, false},    // AMOUNT: N3 (ISO 4217) + N..15
    {"392n", 1, 15, 15, N, 0, false},    // PRICE
    {"393n", 4, 18, 18, N, 0, false},    // PRICE: N3 + N..15
    {"394n", 4, 4, 4, N, 0, false},      // PRCNT OFF
    {"395n", 6, 6, 6, N, 0, false},      // PRICE/UoM
    {"400", 1, 30, 0, X, 0, false},      // ORDER NUMBER
    {"401", 1, 30, 0, X, 0, false},      // GINC
    {"402", 17, 17, 17, N, 17, false},   // GSIN
    {"403", 1, 30, 0, X, 0, false},      // ROUTE
    {"410", 13, 13, 13, N, 13, false},   // SHIP TO LOC
    {"411", 13, 13, 13, N, 13, false},   // BILL TO
    {"412", 13, 13, 13, N, 13, false},   // PURCHASE FROM
    {"413", 13, 13, 13, N, 13, false},   // SHIP FOR LOC
    {"414", 13, 13, 13, N, 13, false},   // LOC No.
    {"415", 13, 13, 13, N, 13, false},   // PAY TO
    {"416", 13, 13, 13, N, 13, false},   // PROD/SERV LOC
    {"417", 13, 13, 13, N, 13, false},   // PARTY
    {"420", 1, 20, 0, X, 0, false},      // SHIP TO POST
    {"421", 4, 12, 3, X, 0, false},      // SHIP TO POST: N3 + X..9
    {"422", 3, 3, 3, N, 0, false},       // ORIGIN
    {"423", 3, 15, 15, N, 0, false},     // COUNTRY - INITIAL PROCESS.
    {"424", 3, 3, 3, N, 0, false},       // COUNTRY - PROCESS.
    {"425", 3, 15, 15, N, 0, false},     // COUNTRY - DISASSEMBLY
    {"426", 3, 3, 3, N, 0, false},       // COUNTRY - FULL PROCESS
    {"427", 1, 3, 0, X, 0, false},       // ORIGIN SUBDIVISION
    {"7001", 13, 13, 13, N, 0, false},   // NSN
    {"7002", 1, 30, 0, X, 0, false},     // MEAT CUT
    {"7003", 10, 10, 10, N, 0, true},    // EXPIRY TIME: YYMMDDHHMM
    {"7004", 1, 4, 4, N, 0, false},      // ACTIVE POTENCY
    {"7005", 1, 12, 0, X, 0, false},     // CATCH AREA
    {"7006", 6, 6, 6, N, 0, true},       // FIRST FREEZE DATE
    {"7007", 6, 12, 12, N, 0, true},     // HARVEST DATE: YYMMDD[YYMMDD]
    {"7008", 1, 3, 0, X, 0, false},      // AQUATIC SPECIES
    {"7009", 1, 10, 0, X, 0, false},     // FISHING GEAR TYPE
    {"7010", 1, 2, 0, X, 0, false},      // PROD METHOD
    {"710", 1, 20, 0, X, 0, false},      // NHRN PZN (Germany)
    {"711", 1, 20, 0, X, 0, false},      // NHRN CIP (France)
    {"712", 1, 20, 0, X, 0, false},      // NHRN CN (Spain)
    {"713", 1, 20, 0, X, 0, false},      // NHRN DRN (Brazil)
    {"714", 1, 20, 0, X, 0, false},      // NHRN AIM (Portugal)
    {"715", 1, 20, 0, X, 0, false},      // NHRN NDC (United States)
    {"716", 1, 20, 0, X, 0, false},      // NHRN AIC (Italy)
    {"8001", 14, 14, 14, N, 0, false},   // DIMENSIONS
    {"8002", 1, 20, 0, X, 0, false},     // CMT No.
    {"8003", 14, 30, 14, X, 14, false},  // GRAI: N14 + X..16
    {"8004", 1, 30, 0, X, 0, false},     // GIAI
    {"8005", 6, 6, 6, N, 0, false},      // PRICE PER UNIT
    {"8006", 18, 18, 18, N, 14, false},  // ITIP: GTIN + N2 + N2
    {"8007", 1, 34, 0, X, 0, false},     // IBAN
    {"8008", 9, 12, 12, N, 0, false},    // PROD TIME: N8 + N..4
    {"8009", 1, 50, 0, X, 0, false},     // OPTSEN
    {"8010", 1, 30, 0, Charset::kCset39, 0, false},  // CPID
    {"8011", 1, 12, 12, N, 0, false},    // CPID SERIAL
    {"8012", 1, 20, 0, X, 0, false},     // VERSION
    {"8013", 1, 25, 0, X, 0, false},     // GMN
    {"8017", 18, 18, 18, N, 18, false},  // GSRN - PROVIDER
    {"8018", 18, 18, 18, N, 18, false},  // GSRN - RECIPIENT
    {"8019", 1, 10, 10, N, 0, false},    // SRIN
    {"8020", 1, 25, 0, X, 0, false},     // REF No.
    {"8026", 18, 18, 18, N, 14, false},  // ITIP CONTENT
    {"8110", 1, 70, 0, X, 0, false},     // coupon code (North America)
    {"8111", 4, 4, 4, N, 0, false},      // POINTS
    {"8112", 1, 70, 0, X, 0, false},     // paperless coupon code
    {"8200", 1, 70, 0, X, 0, false},     // PRODUCT URL
    {"90", 1, 30, 0, X, 0, false},       // INTERNAL (mutually agreed)
    {"91", 1, 90, 0, X, 0, false},       // COMPANY INTERNAL 91..99
    {"92", 1, 90, 0, X, 0, false},
    {"93", 1, 90, 0, X, 0, false},
    {"94", 1, 90, 0, X, 0, false},
    {"95", 1, 90, 0, X, 0, false},
    {"96", 1, 90, 0, X, 0, false},
    {"97", 1, 90, 0, X, 0, false},
    {"98", 1, 90, 0, X, 0, false},
    {"99", 1, 90, 0, X, 0, false},
};
constexpr std::size_t kTableSize = sizeof kTable / sizeof kTable[0];

constexpr int Two(std::string_view ai) { return (ai[0] - '0') * 10 + (ai[1] - '0'); }

// Per two-digit prefix: the [begin, end) slice of kTable and the AI length (0: no AI starts so).
struct Slot {
  std::uint8_t begin = 0, end = 0, ai_len = 0;
};
constexpr std::array<Slot, 100> BuildIndex() {
  std::array<Slot, 100> index{};
  for (std::size_t i = 0; i < kTableSize; ++i) {
    Slot& s = index[static_cast<std::size_t>(Two(kTable[i].ai))];
    if (s.ai_len == 0) s = {static_cast<std::uint8_t>(i), static_cast<std::uint8_t>(i), 0};
    s.end = static_cast<std::uint8_t>(i + 1);
    s.ai_len = static_cast<std::uint8_t>(kTable[i].ai.size());
  }
  return index;
}
constexpr std::array<Slot, 100> kIndex = BuildIndex();
static_assert(kTableSize < 256, "Slot holds table indices in uint8_t");

// The table is sorted, contiguous per prefix, and prefix-free (one AI length per two-digit prefix); a check-digit
// span and a date lie within the field's always-present numeric prefix (the parser relies on it).
constexpr bool TableIsWellFormed() {
  for (std::size_t i = 0; i < kTableSize; ++i) {
    const AiSpec& a = kTable[i];
    if (a.ai.size() < 2 || a.ai.size() > 4 || a.min_len < 1 || a.min_len > a.max_len) return false;
    if (a.numeric_prefix > a.max_len || a.check_len > a.min_len || a.check_len > a.numeric_prefix) return false;
    if (a.date && (a.min_len < 6 || a.numeric_prefix < 6)) return false;  // the parser reads 6 digits of a date
    const Slot& s = kIndex[static_cast<std::size_t>(Two(a.ai))];
    if (s.ai_len != a.ai.size() || i < s.begin || i >= s.end) return false;
    if (i > 0 && !(kTable[i - 1].ai < a.ai)) return false;
  }
  return true;
}
static_assert(TableIsWellFormed());

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

int AiLength(std::string_view two) {
  if (two.size() < 2 || !IsDigit(two[0]) || !IsDigit(two[1])) return 0;
  return kIndex[static_cast<std::size_t>(Two(two))].ai_len;
}

const AiSpec* FindAi(std::string_view ai) {
  if (ai.size() < 2 || ai.size() > 4) return nullptr;
  for (char c : ai)
    if (!IsDigit(c)) return nullptr;
  const Slot& s = kIndex[static_cast<std::size_t>(Two(ai))];
  if (s.ai_len != ai.size()) return nullptr;
  for (std::size_t i = s.begin; i < s.end; ++i) {
    const std::string_view p = kTable[i].ai;
    bool match = true;
    for (std::size_t k = 2; k < p.size() && match; ++k) match = p[k] == 'n' || p[k] == ai[k];
    if (match) return &kTable[i];
  }
  return nullptr;
}

int PredefinedLength(std::string_view ai) {
  if (ai.size() < 2 || !IsDigit(ai[0]) || !IsDigit(ai[1])) return 0;
  switch (Two(ai)) {
    case 0: return 18;
    case 1: case 2: case 3: return 14;
    case 4: return 16;
    case 11: case 12: case 13: case 14: case 15: case 16: case 17: case 18: case 19: return 6;
    case 20: return 2;
    case 31: case 32: case 33: case 34: case 35: case 36: return 6;
    case 41: return 13;
    default: return 0;
  }
}

bool InCharset(Charset cs, char c) {
  const bool digit = IsDigit(c), upper = c >= 'A' && c <= 'Z';
  switch (cs) {
    case Charset::kNumeric: return digit;
    case Charset::kCset39: return digit || upper || c == '#' || c == '-' || c == '/';
    case Charset::kCset82:
      if (digit || upper || (c >= 'a' && c <= 'z')) return true;
      switch (c) {
        case '!': case '"': case '%': case '&': case '\'': case '(': case ')': case '*': case '+': case ',':
        case '-': case '.': case '/': case ':': case ';': case '<': case '=': case '>': case '?': case '_':
          return true;
        default: return false;
      }
  }
  return false;
}

}  // namespace scangate::gs1
