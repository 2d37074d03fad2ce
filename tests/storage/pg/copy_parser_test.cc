// Tests storage/pg/copy_parser.h: a binary COPY stream of one-digest rows (32-byte bytea, or 16-byte uuid: sql/013)
// is parsed to the same digests — their stored form — however it is cut into Feed() calls (down to 1 byte), the sink
// gets chunks of exactly the configured size, and every malformed stream (truncated, bad signature, a field of
// another length, a row of two fields) throws instead of yielding a digest. Pure: no PostgreSQL; streams are built here byte by byte
// as PostgreSQL's docs ("COPY", "Binary Format") define them.
#include "storage/pg/copy_parser.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace scangate::storage {
namespace {

constexpr std::string_view kSignature{"PGCOPY\n\377\r\n\0", 11};

void PutBe16(std::string& s, std::int16_t v) {
  const auto u = static_cast<std::uint16_t>(v);
  s += static_cast<char>(u >> 8);
  s += static_cast<char>(u & 0xff);
}

void PutBe32(std::string& s, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) s += static_cast<char>((v >> shift) & 0xff);
}

// Header with a header extension of `ext` bytes (PostgreSQL sends 0; readers must skip any).
std::string Header(std::uint32_t ext = 0) {
  std::string s(kSignature);
  PutBe32(s, 0);  // flags
  PutBe32(s, ext);
  s.append(ext, 'x');
  return s;
}

// A row of the digest's first `bytes` bytes: 32 (a bytea, sql/001) or 16 (a uuid, sql/013).
void PutRow(std::string& s, const Digest& d, std::uint32_t bytes = 32) {
  PutBe16(s, 1);
  PutBe32(s, bytes);
  s.append(reinterpret_cast<const char*>(d.data()), bytes);
}

void PutTrailer(std::string& s) { PutBe16(s, -1); }

// A distinct digest per i, with bytes that look like lengths and the trailer (0xff) in it.
Digest MakeDigest(std::uint32_t i) {
  Digest d{};
  for (std::size_t b = 0; b < d.size(); ++b) d[b] = static_cast<std::uint8_t>((i * 31 + b * 7) ^ (b % 3 ? 0xff : 0));
  d[0] = static_cast<std::uint8_t>(i);
  d[1] = static_cast<std::uint8_t>(i >> 8);
  return d;
}

std::string Stream(const std::vector<Digest>& digests, std::uint32_t ext = 0, std::uint32_t bytes = 32) {
  std::string s = Header(ext);
  for (const auto& d : digests) PutRow(s, d, bytes);
  PutTrailer(s);
  return s;
}

std::vector<Digest> Digests(std::uint32_t n) {
  std::vector<Digest> v;
  for (std::uint32_t i = 0; i < n; ++i) v.push_back(MakeDigest(i));
  return v;
}

// What the parser delivers of `digests`: their stored forms (core/digest.h).
std::vector<Digest> Stored(const std::vector<Digest>& digests) {
  std::vector<Digest> v;
  for (const auto& d : digests) v.push_back(StoredDigest(d));
  return v;
}

// Feeds `stream` in pieces of `piece` bytes (the last may be shorter) and finishes; collects the chunks.
struct ParseResult {
  std::vector<Digest> got;
  std::vector<std::size_t> chunk_sizes;
  std::uint64_t total = 0;
};
ParseResult Parse(const std::string& stream, std::size_t piece, std::size_t chunk = CopyDigestParser::kDefaultChunkDigests) {
  ParseResult run;
  const CopyDigestParser::Sink sink = [&](std::span<const Digest> c) {
    run.chunk_sizes.push_back(c.size());
    run.got.insert(run.got.end(), c.begin(), c.end());
  };
  CopyDigestParser parser(sink, chunk);
  for (std::size_t at = 0; at < stream.size(); at += piece) parser.Feed(std::string_view(stream).substr(at, piece));
  run.total = parser.Finish();
  return run;
}

// The message of the std::runtime_error that parsing `stream` in `piece`-byte feeds throws ("" if none):
// the tests check the reason, so a malformed stream caught by a later check by accident does not pass.
std::string ParseError(const std::string& stream, std::size_t piece) {
  try {
    Parse(stream, piece);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

// The same digests, in order, whatever the Feed() boundaries: every piece size from 1 byte (every row
// and the header split at every offset) to past the whole stream, and a header extension to skip.
TEST(CopyDigestParser, RowsSplitAcrossAnyFeedBoundaries) {
  const std::vector<Digest> want = Stored(Digests(20));
  for (const std::uint32_t ext : {0u, 5u}) {
    const std::string stream = Stream(Digests(20), ext);
    for (std::size_t piece = 1; piece <= stream.size() + 1; ++piece) {
      const ParseResult run = Parse(stream, piece);
      ASSERT_EQ(run.got, want) << "piece " << piece << " ext " << ext;
      EXPECT_EQ(run.total, want.size());
    }
  }
}

// The 16-byte layout's rows (sql/013: the digest's stored form as a uuid) parse to the same stored forms as the old
// layout's 32-byte rows, cut anywhere, also mixed in one stream (a database's two tables are never read in one COPY,
// but the parser does not care).
TEST(CopyDigestParser, UuidRowsGiveTheSameStoredForms) {
  const std::vector<Digest> all = Digests(20);
  const std::string stream = Stream(all, 0, 16);
  for (std::size_t piece = 1; piece <= stream.size() + 1; ++piece) {
    ASSERT_EQ(Parse(stream, piece).got, Stored(all)) << "piece " << piece;
  }
  std::string mixed = Header();
  for (std::uint32_t i = 0; i < all.size(); ++i) PutRow(mixed, all[i], i % 2 == 0 ? 16 : 32);
  PutTrailer(mixed);
  for (std::size_t piece = 1; piece <= mixed.size() + 1; piece += 3) {
    ASSERT_EQ(Parse(mixed, piece).got, Stored(all)) << "piece " << piece;
  }
}

// Irregular cuts (libpq's CopyData messages need not align with rows), including empty Feed() calls.
TEST(CopyDigestParser, IrregularFeedsAndEmptyFeeds) {
  const std::vector<Digest> want = Stored(Digests(50));
  const std::string stream = Stream(Digests(50));
  std::vector<Digest> got;
  const CopyDigestParser::Sink sink = [&](std::span<const Digest> c) { got.insert(got.end(), c.begin(), c.end()); };
  CopyDigestParser parser(sink);
  std::size_t at = 0, step = 0;
  while (at < stream.size()) {
    const std::size_t n = std::min<std::size_t>(stream.size() - at, (step * 13 + 3) % 97);
    parser.Feed(std::string_view(stream).substr(at, n));  // n == 0 now and then
    at += n;
    ++step;
  }
  EXPECT_EQ(parser.Finish(), want.size());
  EXPECT_EQ(got, want);
}

// The sink gets full chunks of exactly the configured size while parsing and the remainder at Finish().
TEST(CopyDigestParser, ChunksAtTheSinkSize) {
  const std::vector<Digest> want = Stored(Digests(10));
  for (const std::size_t piece : {std::size_t{1}, std::size_t{1000}}) {
    const ParseResult run = Parse(Stream(Digests(10)), piece, /*chunk=*/4);
    EXPECT_EQ(run.got, want);
    EXPECT_EQ(run.chunk_sizes, (std::vector<std::size_t>{4, 4, 2})) << "piece " << piece;
  }
  // A multiple of the chunk size: no empty chunk at the end.
  const ParseResult exact = Parse(Stream(Digests(8)), 7, /*chunk=*/4);
  EXPECT_EQ(exact.chunk_sizes, (std::vector<std::size_t>{4, 4}));
}

// A full chunk is delivered during Feed(), before the stream ends (the load streams, it does not buffer).
TEST(CopyDigestParser, FullChunkDeliveredBeforeFinish) {
  std::size_t delivered = 0;
  const CopyDigestParser::Sink sink = [&](std::span<const Digest> c) { delivered += c.size(); };
  CopyDigestParser parser(sink, /*chunk=*/3);
  std::string s = Header();
  for (std::uint32_t i = 0; i < 3; ++i) PutRow(s, MakeDigest(i));
  parser.Feed(s);
  EXPECT_EQ(delivered, 3u);
  std::string rest;
  PutTrailer(rest);
  parser.Feed(rest);
  EXPECT_EQ(parser.Finish(), 3u);
}

// An empty result set (header and trailer only) is 0 digests and never calls the sink.
TEST(CopyDigestParser, EmptyStream) {
  const ParseResult run = Parse(Stream({}), 1);
  EXPECT_EQ(run.total, 0u);
  EXPECT_TRUE(run.chunk_sizes.empty());
}

// A stream cut anywhere before the end of its trailer throws at Finish() (at every cut point), and so
// do bytes after the trailer; nothing of the unfinished row reaches the sink.
TEST(CopyDigestParser, TruncatedStreamThrows) {
  const std::vector<Digest> want = Stored(Digests(3));
  const std::string stream = Stream(Digests(3));
  for (std::size_t cut = 0; cut < stream.size(); ++cut) {
    std::vector<Digest> got;
    const CopyDigestParser::Sink sink = [&](std::span<const Digest> c) { got.insert(got.end(), c.begin(), c.end()); };
    CopyDigestParser parser(sink, /*chunk=*/1);
    parser.Feed(std::string_view(stream).substr(0, cut));
    EXPECT_THROW(parser.Finish(), std::runtime_error) << "cut at " << cut;
    EXPECT_LE(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]);
  }
  EXPECT_THROW(Parse(stream + "x", 1000), std::runtime_error);
}

// Not a binary COPY stream (e.g. a text-format COPY): throws once the signature is complete.
TEST(CopyDigestParser, BadSignatureThrows) {
  std::string s = Stream(Digests(1));
  s[5] = 'Z';
  EXPECT_NE(ParseError(s, 1).find("bad COPY signature"), std::string::npos) << ParseError(s, 1);
  const std::string text = "\\x0102030405060708090a0b0c0d0e0f101112\n";
  EXPECT_NE(ParseError(text, 1000).find("bad COPY signature"), std::string::npos) << ParseError(text, 1000);
}

// A field that is neither 32 bytes (a bytea digest) nor 16 (a uuid), or NULL, is not a digest: throws.
TEST(CopyDigestParser, FieldOfAnotherLengthThrows) {
  for (const std::uint32_t len : {15u, 17u, 31u, 33u, 0u, 0xffffffffu /* NULL */}) {
    std::string s = Header();
    PutRow(s, MakeDigest(1));
    PutBe16(s, 1);
    PutBe32(s, len);
    s.append(len == 0xffffffffu ? 0 : len, 'a');
    PutTrailer(s);
    s.append(40, '\0');  // enough bytes that a misread length cannot look truncated instead
    for (const std::size_t piece : {std::size_t{1}, s.size()}) {
      EXPECT_NE(ParseError(s, piece).find("neither 32 nor 16 bytes"), std::string::npos)
          << "length " << len << ": " << ParseError(s, piece);
    }
  }
}

// A row with two fields (e.g. digest and first_seen) is not the shape the parser reads: throws.
TEST(CopyDigestParser, TwoFieldRowThrows) {
  std::string s = Header();
  PutBe16(s, 2);
  PutBe32(s, 32);
  s.append(32, 'd');
  PutBe32(s, 8);
  s.append(8, 't');
  PutTrailer(s);
  for (const std::size_t piece : {std::size_t{1}, s.size()}) {
    EXPECT_NE(ParseError(s, piece).find("row shape"), std::string::npos) << ParseError(s, piece);
  }
}

// An exception from the sink propagates out of Feed() unchanged.
TEST(CopyDigestParser, SinkExceptionPropagates) {
  struct Stop {};
  const CopyDigestParser::Sink sink = [](std::span<const Digest>) { throw Stop{}; };
  CopyDigestParser parser(sink, /*chunk=*/1);
  EXPECT_THROW(parser.Feed(Stream(Digests(2))), Stop);
}

}  // namespace
}  // namespace scangate::storage
