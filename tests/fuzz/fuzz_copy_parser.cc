// libFuzzer target over storage/pg/copy_parser.h (the warm load's binary-COPY digest parser). Invariant checked
// (differential): however the input is cut into Feed() calls and whatever the sink's chunk size, the parser
// delivers the same digests in the same order and the same count from Finish() — or throws
// std::runtime_error in every cut; no other exception, no crash, no sanitizer report. Input: byte 0 picks the
// chunk size (1..8), byte 1 the cut pattern; the rest is the stream. Built by tests/fuzz/CMakeLists.txt.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <span>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "storage/pg/copy_parser.h"

namespace {
using scangate::Digest;
using scangate::storage::CopyDigestParser;

void Check(bool ok) {
  if (!ok) std::abort();  // libFuzzer reports the input as a crash
}

// Parses `stream` in pieces of `piece` bytes (0 = all at once); nullopt when the parser threw.
std::optional<std::vector<Digest>> Parse(std::string_view stream, std::size_t piece, std::size_t chunk) {
  std::vector<Digest> got;
  const CopyDigestParser::Sink sink = [&](std::span<const Digest> c) {
    Check(!c.empty() && c.size() <= chunk);
    got.insert(got.end(), c.begin(), c.end());
  };
  CopyDigestParser parser(sink, chunk);
  try {
    if (piece == 0) {
      parser.Feed(stream);
    } else {
      for (std::size_t at = 0; at < stream.size(); at += piece) parser.Feed(stream.substr(at, piece));
    }
    Check(parser.Finish() == got.size());
  } catch (const std::runtime_error&) {
    return std::nullopt;
  }
  return got;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const std::size_t chunk = 1 + data[0] % 8;
  const std::size_t piece = 1 + data[1] % 64;
  const std::string_view stream(reinterpret_cast<const char*>(data) + 2, size - 2);
  const auto whole = Parse(stream, 0, CopyDigestParser::kDefaultChunkDigests);
  const auto cut = Parse(stream, piece, chunk);
  const auto bytes = Parse(stream, 1, 1);
  Check(whole.has_value() == cut.has_value() && whole.has_value() == bytes.has_value());
  if (whole) Check(*whole == *cut && *whole == *bytes);
  return 0;
}
