#include "storage/pg/pg_array.h"

#include <cstring>
#include <limits>
#include <stdexcept>

namespace scangate::storage {
namespace {

// array_send header of a one-dimensional array: ndim, has-nulls flag, element OID, dimension length,
// lower bound (1). Written as a placeholder, patched by Finish().
constexpr std::size_t kHeaderBytes = 5 * 4;

void StoreBe32(char* p, std::uint32_t v) {
  p[0] = static_cast<char>(v >> 24);
  p[1] = static_cast<char>(v >> 16);
  p[2] = static_cast<char>(v >> 8);
  p[3] = static_cast<char>(v);
}

}  // namespace

PgBinaryArray::PgBinaryArray(std::uint32_t element_oid, std::size_t expected_elements, std::size_t reserve_bytes)
    : oid_(element_oid) {
  buf_.reserve(kHeaderBytes + 4 * expected_elements + reserve_bytes);
  buf_.assign(kHeaderBytes, '\0');
}

void PgBinaryArray::PutBe32(std::uint32_t v) {
  char b[4];
  StoreBe32(b, v);
  buf_.append(b, 4);
}

void PgBinaryArray::Add(std::string_view bytes) {
  // An element's length is an int32 on the wire; PostgreSQL caps a field at 1 GB anyway.
  if (bytes.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
    throw std::length_error("PgBinaryArray: element longer than 2^31-1 bytes");
  }
  PutBe32(static_cast<std::uint32_t>(bytes.size()));
  buf_.append(bytes);
  ++count_;
}

void PgBinaryArray::AddInt8(std::int64_t v) {
  if (oid_ != kOidInt8) throw std::logic_error("PgBinaryArray::AddInt8 on a non-int8 array");
  const auto u = static_cast<std::uint64_t>(v);
  PutBe32(8);
  PutBe32(static_cast<std::uint32_t>(u >> 32));
  PutBe32(static_cast<std::uint32_t>(u));
  ++count_;
}

void PgBinaryArray::AddInt4(std::int32_t v) {
  if (oid_ != kOidInt4) throw std::logic_error("PgBinaryArray::AddInt4 on a non-int4 array");
  PutBe32(4);
  PutBe32(static_cast<std::uint32_t>(v));
  ++count_;
}

void PgBinaryArray::AddNull() {
  PutBe32(0xFFFFFFFFu);  // length -1
  has_nulls_ = true;
  ++count_;
}

std::string_view PgBinaryArray::Finish() {
  char* h = buf_.data();
  // An empty array is sent as array_send sends one: ndim 0, flags, element type, no dimension fields.
  if (count_ == 0) {
    StoreBe32(h, 0);
    StoreBe32(h + 4, 0);
    StoreBe32(h + 8, oid_);
    return std::string_view(buf_).substr(0, 12);
  }
  StoreBe32(h, 1);                     // ndim
  StoreBe32(h + 4, has_nulls_ ? 1 : 0);  // flags: has nulls (array_recv accepts 0 or 1)
  StoreBe32(h + 8, oid_);              // element type
  StoreBe32(h + 12, count_);           // dimension length
  StoreBe32(h + 16, 1);                // lower bound
  return buf_;
}

}  // namespace scangate::storage
