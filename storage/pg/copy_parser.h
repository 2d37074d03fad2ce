// CopyDigestParser: incremental parser of a PostgreSQL binary COPY stream (`COPY ... TO STDOUT (FORMAT
// binary)`) whose rows are exactly one digest: a 32-byte bytea (the layout of sql/001..010) or a 16-byte uuid
// (sql/013), delivered as its stored form (core/digest.h StoredDigest) either way. Store::WarmLoad
// (storage/read/warm_load.cc) feeds it the CopyData messages libpq returns; rows need not align with messages.
// Invariant: only complete, well-formed rows reach the sink; a bad signature, a row of another shape, a
// field of another length (NULL included) or a stream that ends before its trailer throws
// std::runtime_error — never a partial or guessed digest. No PostgreSQL needed: unit-tested alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/digest.h"

namespace scangate::storage {

class CopyDigestParser {
 public:
  using Sink = std::function<void(std::span<const Digest>)>;
  // Digests per sink() call: 2 MiB of digests, large enough that the filter's batch insert amortises
  // its per-call cost, small enough to keep the parser's buffer bounded.
  static constexpr std::size_t kDefaultChunkDigests = 65536;

  // `sink` receives the digests in stream order, in chunks of exactly `chunk_digests` (the last chunk,
  // delivered by Finish(), may be shorter; an empty stream calls it never). `sink` is held by reference
  // and must outlive the parser; an exception it throws propagates out of Feed()/Finish() unchanged.
  explicit CopyDigestParser(const Sink& sink, std::size_t chunk_digests = kDefaultChunkDigests);

  // Consumes one piece of the stream (any size, including 1 byte or empty); bytes of an unfinished
  // header or row are kept until the next call. Throws std::runtime_error on malformed input; digests
  // handed to the sink before the throw stay handed (the caller discards the whole load).
  void Feed(std::string_view data);

  // Ends the stream: throws std::runtime_error unless the trailer was seen with nothing after it, else
  // delivers the last partial chunk and returns the number of digests in the stream.
  std::uint64_t Finish();

 private:
  std::size_t Parse(std::string_view data);  // consumes complete items; returns the bytes used
  void Flush();

  const Sink& sink_;
  const std::size_t chunk_digests_;
  std::vector<Digest> chunk_;
  std::string pending_;  // bytes of an item split across Feed() calls
  bool header_seen_ = false;
  bool trailer_seen_ = false;
  std::uint64_t total_ = 0;
};

}  // namespace scangate::storage
