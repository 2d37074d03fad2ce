// PgBinaryArray: a one-dimensional PostgreSQL array in the binary wire format (array_send/array_recv), so a
// batch goes to the server as ONE binary parameter ($1::bytea[], $2::text[], $3::int8[]) that the server
// unpacks with unnest() — no text literal to escape on our side, nothing to parse on its side.
// Invariant: the bytes are exactly what array_recv expects for the declared element type (header patched
// by Finish(); every element length-prefixed, NULL = length -1). PG-free, so it is unit-tested without a
// server (tests/storage/pg/pg_array_test.cc); storage/pg/batch_statement.cc sends it as a pqxx::binarystring
// (pqxx 6.4 sends those with paramFormats = 1). Single-threaded; one builder per array.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace scangate::storage {

// Element type OIDs (pg_type.oid; fixed in PostgreSQL's catalog since 7.x).
inline constexpr std::uint32_t kOidBytea = 17;
inline constexpr std::uint32_t kOidInt8 = 20;
inline constexpr std::uint32_t kOidInt4 = 23;
inline constexpr std::uint32_t kOidText = 25;
inline constexpr std::uint32_t kOidUuid = 2950;  // elements of 16 bytes (sql/013's digests, lots, requests)

class PgBinaryArray {
 public:
  // `reserve_bytes`: expected element bytes (excluding the 4-byte length prefixes), to allocate once.
  explicit PgBinaryArray(std::uint32_t element_oid, std::size_t expected_elements = 0,
                         std::size_t reserve_bytes = 0);

  // Appends one element: its bytes as-is (bytea: raw bytes; uuid: its 16 bytes; text: UTF-8 in the client encoding).
  void Add(std::string_view bytes);
  // Appends one int8 element (8 bytes, big-endian). Only for kOidInt8 arrays.
  void AddInt8(std::int64_t v);
  // Appends one int4 element (4 bytes, big-endian). Only for kOidInt4 arrays.
  void AddInt4(std::int32_t v);
  void AddNull();

  std::size_t size() const { return count_; }

  // The complete array (header filled in); valid until the builder is changed or destroyed. The
  // builder can be appended to and finished again.
  std::string_view Finish();

 private:
  void PutBe32(std::uint32_t v);

  std::string buf_;  // header (20 bytes, patched by Finish) + elements
  std::uint32_t oid_;
  std::uint32_t count_ = 0;
  bool has_nulls_ = false;
};

}  // namespace scangate::storage
