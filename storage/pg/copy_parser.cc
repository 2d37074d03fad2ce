#include "storage/pg/copy_parser.h"

#include "core/digest.h"  // StoredDigestFromBytes

#include <cstring>
#include <stdexcept>
#include <tuple>

namespace scangate::storage {
namespace {

// PostgreSQL's binary COPY format (docs: "COPY", "Binary Format"): an 11-byte signature, a 32-bit flags
// field, a 32-bit header extension length and that many bytes; then per row a 16-bit field count and per
// field a 32-bit length (-1 = NULL) and the bytes; a field count of -1 is the trailer. Integers big-endian.
constexpr std::string_view kCopyBinarySignature{"PGCOPY\n\377\r\n\0", 11};

std::uint32_t Be32(const char* p) {
  return (std::uint32_t{static_cast<unsigned char>(p[0])} << 24) |
         (std::uint32_t{static_cast<unsigned char>(p[1])} << 16) |
         (std::uint32_t{static_cast<unsigned char>(p[2])} << 8) | std::uint32_t{static_cast<unsigned char>(p[3])};
}

std::int16_t Be16(const char* p) {
  return static_cast<std::int16_t>((static_cast<unsigned char>(p[0]) << 8) | static_cast<unsigned char>(p[1]));
}

}  // namespace

CopyDigestParser::CopyDigestParser(const Sink& sink, std::size_t chunk_digests)
    : sink_(sink), chunk_digests_(chunk_digests == 0 ? 1 : chunk_digests) {
  chunk_.reserve(chunk_digests_);
}

void CopyDigestParser::Feed(std::string_view data) {
  if (!pending_.empty()) {
    pending_.append(data);
    const std::size_t used = Parse(pending_);
    pending_.erase(0, used);
  } else {
    const std::size_t used = Parse(data);
    pending_.assign(data.substr(used));
  }
}

std::uint64_t CopyDigestParser::Finish() {
  if (!trailer_seen_ || !pending_.empty()) throw std::runtime_error("WarmLoad: truncated COPY stream");
  Flush();
  return total_;
}

std::size_t CopyDigestParser::Parse(std::string_view data) {
  std::size_t pos = 0;
  if (!header_seen_) {
    constexpr std::size_t kFixed = 11 + 4 + 4;  // signature, flags, header extension length
    if (data.size() < kFixed) return 0;
    if (data.substr(0, 11) != kCopyBinarySignature) throw std::runtime_error("WarmLoad: bad COPY signature");
    const std::size_t ext = Be32(data.data() + 15);
    if (data.size() < kFixed + ext) return 0;
    pos = kFixed + ext;
    header_seen_ = true;
  }
  constexpr std::size_t kRowHead = 2 + 4;  // field count, field length; then the digest's bytes
  while (!trailer_seen_ && data.size() - pos >= 2) {
    const std::int16_t fields = Be16(data.data() + pos);
    if (fields == -1) {
      trailer_seen_ = true;
      pos += 2;
      break;
    }
    if (fields != 1) throw std::runtime_error("WarmLoad: unexpected COPY row shape");
    if (data.size() - pos < kRowHead) break;
    const std::uint32_t length = Be32(data.data() + pos + 2);  // 32 (bytea) or 16 (uuid); NULL is 0xFFFFFFFF
    if (length != std::tuple_size_v<Digest> && length != kStoredDigestBytes) {
      throw std::runtime_error("WarmLoad: digest is neither 32 nor 16 bytes");
    }
    if (data.size() - pos < kRowHead + length) break;
    if (!StoredDigestFromBytes(data.substr(pos + kRowHead, length), chunk_.emplace_back())) {
      throw std::logic_error("WarmLoad: digest length checked above");
    }
    pos += kRowHead + length;
    if (chunk_.size() == chunk_digests_) Flush();
  }
  return pos;
}

void CopyDigestParser::Flush() {
  if (chunk_.empty()) return;
  total_ += chunk_.size();
  sink_(chunk_);
  chunk_.clear();
}

}  // namespace scangate::storage
