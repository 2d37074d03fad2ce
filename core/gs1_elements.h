// Internal to the GS1 parser (core/gs1.cc, core/gs1_digital_link.cc): the AI/value pairs one scan yields
// before they are validated and assembled into a Pack, and the fixed buffer percent-decoded values live in.
// Invariant: nothing here allocates; views point into the scan or into a ScratchBuffer that outlives them.
// Not for use outside core/gs1*.cc.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

#include "core/gs1.h"

namespace scangate::gs1::detail {

struct Element {
  std::string_view ai;     // the AI's digits
  std::string_view value;  // its data, not yet validated
};

// Up to kMaxElements elements in scan order. Single-threaded (one per Parse call).
struct Elements {
  std::array<Element, kMaxElements> items;
  std::size_t size = 0;
  bool Add(std::string_view ai, std::string_view value) {
    if (size == items.size()) return false;
    items[size++] = {ai, value};
    return true;
  }
};

// Storage for decoded values (never more bytes than the scan, plus padded GTINs). Single-threaded.
struct ScratchBuffer {
  std::array<char, kMaxScanBytes + 4 * 16> data;
  std::size_t used = 0;
  std::size_t room() const { return data.size() - used; }
};

// True when `s` starts with http:// or https:// (case-insensitive). Any thread.
bool LooksLikeDigitalLink(std::string_view s);

// Reads a Digital Link URI into `out` (GTIN-8/12/13 left-padded to 14 digits, values percent-decoded into
// `scratch`). nullopt on success. Single-threaded per (out, scratch).
std::optional<Error> ReadDigitalLink(std::string_view uri, Elements& out, ScratchBuffer& scratch);

// "AI (xx): " + what — the one way error texts name an AI.
Error AiError(std::string_view ai, std::string_view what);

}  // namespace scangate::gs1::detail
