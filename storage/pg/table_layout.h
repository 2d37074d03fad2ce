// TableLayout: which of its two forms scan_keys has in a database, and the one place that turns a digest into what
// that form stores and back. kBytea32 is the table of sql/001..010 (digest, lot and request bytea; `source`); kUuid16
// is sql/013's (the digest's first 16 bytes — core/digest.h StoredDigest — as a uuid, lot and request uuids;
// `seen_by`). A database holds one or the other; it moves from the first to the second online
// (sql/013 scangate_layout_migrate), so every unit that names digests in SQL reads the layout when it connects
// (ReadTableLayout), writes its statements for it (ForLayout) and, when a statement fails because the table changed
// under it (IsLayoutChange), connects again. Units that only read digests (the warm load, the follower) take either
// width (core/digest.h StoredDigestFromBytes / StoredDigestFromText) and need not know.
// Invariant: a digest is compared in the width the table stores it in, so a key written in one form is found by a
// lookup in the other: both land on the same 16-byte prefix, which is all the filter and the recent set key on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <tuple>
#include <utility>
#include <string_view>

#include <pqxx/pqxx>

#include "core/digest.h"

namespace scangate::storage {

enum class TableLayout : std::uint8_t {
  kBytea32,  // sql/001..010: digest bytea (32 bytes), lot bytea (32), request bytea (16), source text
  kUuid16,   // sql/013: digest uuid (the first 16 bytes), lot uuid, request uuid, seen_by text
};

// The layout of scan_keys as the catalog says now (the type of its digest column). Throws what pqxx throws (the
// table missing: undefined_table).
TableLayout ReadTableLayout(pqxx::transaction_base& tx);
TableLayout ReadTableLayout(pqxx::connection_base& conn);

// `sql` for `layout`: {DIGEST} -> the digest's SQL type (bytea | uuid: also lot's and request's), {SOURCE} -> the
// source column (source | seen_by), {SEND} -> what turns a digest column into bytes for encode() ("" | uuid_send).
std::string ForLayout(std::string_view sql, TableLayout layout);

// `sql` with every {PLACEHOLDER} of `subs` replaced (ForLayout's, and other units' own: the expiry's btree key).
std::string Substitute(std::string_view sql,
                       std::initializer_list<std::pair<std::string_view, std::string_view>> subs);

// Bytes of a digest (and of a lot) as `layout` stores it: 32 or 16.
constexpr std::size_t StoredBytes(TableLayout layout) {
  return layout == TableLayout::kBytea32 ? std::tuple_size_v<Digest> : kStoredDigestBytes;
}

// The digest `layout` compares: the whole digest, or its stored form (bytes past 16 zero).
inline Digest KeyOf(const Digest& d, TableLayout layout) {
  return layout == TableLayout::kBytea32 ? d : StoredDigest(d);
}

// The first StoredBytes(layout) bytes of `d`, as they are sent (a bytea or uuid parameter, a binary COPY field).
inline std::string_view StoredBytesOf(const Digest& d, TableLayout layout) {
  return {reinterpret_cast<const char*>(d.data()), StoredBytes(layout)};
}

// StoredDigestFromBytes (a digest PostgreSQL returned in binary, either width) is in core/digest.h: pure, so the
// COPY parser and its fuzz target need no libpqxx.

// A digest PostgreSQL returned as text — bytea's hex output ("\x" + 64 hex digits) or a uuid
// ("xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx") — as its stored form. False for anything else.
bool StoredDigestFromText(std::string_view text, Digest& out);

// encode(x, 'hex') of a digest column: 64 (old layout) or 32 (new) lowercase hex digits, into the digest the layout
// compares (KeyOf). False unless it is exactly StoredBytes(layout) bytes of lowercase hex.
bool DigestFromLayoutHex(std::string_view hex, TableLayout layout, Digest& out);

// True when a statement failed because scan_keys is not the table it was written for: a column it names is gone
// (42703), a type differs (42804: datatype_mismatch; 42883: no operator for uuid = bytea), the table is gone
// (42P01), or a prepared plan's result changed (0A000). The caller reconnects, which reads the layout again.
bool IsLayoutChange(const pqxx::sql_error& e);

}  // namespace scangate::storage
