#include "storage/pg/table_layout.h"

namespace scangate::storage {
namespace {

// The type of scan_keys.digest: bytea (sql/001) or uuid (sql/013).
constexpr const char* kLayoutSql =
    "SELECT format_type(atttypid, NULL) FROM pg_attribute "
    "WHERE attrelid = 'scan_keys'::regclass AND attname = 'digest' AND NOT attisdropped";

TableLayout LayoutOf(const pqxx::result& r) {
  if (r.size() != 1) throw std::runtime_error("scan_keys has no digest column");
  const std::string_view type = r[0][0].c_str();
  if (type == "uuid") return TableLayout::kUuid16;
  if (type == "bytea") return TableLayout::kBytea32;
  throw std::runtime_error("scan_keys.digest has the unknown type " + std::string(type));
}

int Nibble(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// `hex` (exactly 2 * n lowercase hex digits) into the first n bytes of `out`, the rest zero.
bool HexInto(std::string_view hex, std::size_t n, Digest& out) {
  if (hex.size() != 2 * n) return false;
  Digest d{};
  for (std::size_t i = 0; i < n; ++i) {
    const int hi = Nibble(hex[2 * i]), lo = Nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    d[i] = static_cast<std::uint8_t>(hi << 4 | lo);
  }
  out = d;
  return true;
}

}  // namespace

TableLayout ReadTableLayout(pqxx::transaction_base& tx) { return LayoutOf(tx.exec(kLayoutSql)); }

TableLayout ReadTableLayout(pqxx::connection_base& conn) {
  pqxx::nontransaction tx(conn);
  return ReadTableLayout(tx);
}

std::string Substitute(std::string_view sql,
                       std::initializer_list<std::pair<std::string_view, std::string_view>> subs) {
  std::string s(sql);
  for (const auto& [what, with] : subs) {
    for (auto at = s.find(what); at != std::string::npos; at = s.find(what, at + with.size())) {
      s.replace(at, what.size(), with);
    }
  }
  return s;
}

std::string ForLayout(std::string_view sql, TableLayout layout) {
  const bool old = layout == TableLayout::kBytea32;
  return Substitute(sql, {{"{DIGEST}", old ? "bytea" : "uuid"},
                          {"{SOURCE}", old ? "source" : "seen_by"},
                          {"{SEND}", old ? "" : "uuid_send"}});
}

bool StoredDigestFromText(std::string_view text, Digest& out) {
  if (text.size() == 2 + 2 * std::tuple_size_v<Digest> && text.substr(0, 2) == "\\x") {
    if (!HexInto(text.substr(2), std::tuple_size_v<Digest>, out)) return false;
    out = StoredDigest(out);
    return true;
  }
  // uuid_out: 8-4-4-4-12 lowercase hex digits.
  if (text.size() != 36 || text[8] != '-' || text[13] != '-' || text[18] != '-' || text[23] != '-') return false;
  std::string hex;
  hex.reserve(32);
  for (const char c : text) {
    if (c != '-') hex += c;
  }
  return HexInto(hex, kStoredDigestBytes, out);
}

bool DigestFromLayoutHex(std::string_view hex, TableLayout layout, Digest& out) {
  return HexInto(hex, StoredBytes(layout), out);
}

bool IsLayoutChange(const pqxx::sql_error& e) {
  const std::string& s = e.sqlstate();
  return s == "42703" || s == "42804" || s == "42883" || s == "42P01" || s == "0A000";
}

}  // namespace scangate::storage
