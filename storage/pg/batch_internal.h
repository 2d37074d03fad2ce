// What BatchStatement's files share (storage/pg/batch_statement.cc: the ON CONFLICT path; batch_closed.cc: the
// closed epochs' look-up): the take-over's clock guard, a row's pack record as the statements return it, binary
// parameters. Internal to BatchStatement.
#pragma once

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include <pqxx/pqxx>

#include "storage/outcome.h"
#include "storage/pg/pg_array.h"
#include "storage/pg/table_layout.h"

namespace scangate::storage::batch_internal {

// The take-over's guard (last: only a row otherwise expired gets to it): parameter $N is the writer's
// PgClock::GuardUs (NULL: none); PostgreSQL's now() past it means its clock stepped forward and no instance has
// recorded the step yet (sql/017): scangate_clock_unrecorded_step() raises 55000 (an outage to the writer, retried)
// rather than take a row over by a clock that makes it look older than it is.
inline std::string Guard(int n) {
  const std::string p = "$" + std::to_string(n) + "::int8";
  return "(" + p + " IS NULL OR now() <= 'epoch'::timestamptz + " + p +
         " * interval '1 microsecond' OR scangate_clock_unrecorded_step())";
}

inline int HexNibble(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// encode(x, 'hex') -> N bytes; false unless exactly 2N lowercase hex digits.
template <std::size_t N>
inline bool ParseHex(std::string_view hex, std::array<std::uint8_t, N>& out) {
  if (hex.size() != 2 * N) return false;
  for (std::size_t i = 0; i < N; ++i) {
    const int hi = HexNibble(hex[2 * i]), lo = HexNibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<std::uint8_t>(hi << 4 | lo);
  }
  return true;
}

// A row's pack record from its columns `col` (lot: hex of its stored form, NULL = none), col + 1 (expiry, days since
// 1970-01-01) and col + 2 (idempotency record, hex), as the pack follow-up SELECT and the closed epochs' probe read it.
inline PackAttrs RecordOf(const pqxx::row& row, int col, TableLayout layout) {
  PackAttrs rec;
  if (!row[col].is_null()) {  // the lot as the layout stores it (16 bytes: its stored form)
    rec.lot.emplace();
    if (!DigestFromLayoutHex(std::string_view(row[col].c_str(), row[col].size()), layout, *rec.lot)) {
      throw std::runtime_error("a statement returned a malformed lot");
    }
  }
  if (!row[col + 1].is_null()) rec.expiry = row[col + 1].as<std::int32_t>();
  if (!row[col + 2].is_null()) {
    rec.request.emplace();
    if (!ParseHex(std::string_view(row[col + 2].c_str(), row[col + 2].size()), *rec.request)) {
      throw std::runtime_error("a statement returned a malformed request record");
    }
  }
  return rec;
}

inline pqxx::binarystring Binary(std::string_view bytes) { return pqxx::binarystring(bytes.data(), bytes.size()); }

// The array element type of digests, lots and idempotency records in `layout`.
inline std::uint32_t DigestOid(TableLayout layout) { return layout == TableLayout::kBytea32 ? kOidBytea : kOidUuid; }

}  // namespace scangate::storage::batch_internal
