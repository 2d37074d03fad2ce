// Unit tests of server/http/request_parser.h through Beast's own composed reads (tests/server/http/framing_driver.h:
// what the session runs, without sockets): the read buffer's bound holds against an endless chunk extension and an
// endless trailer (and, as a control, Beast's unbounded buffer does not), trailers are refused and never merged,
// chunk extensions are bounded in all, a second Host is refused, pipelined requests and PROXY v2 are read whatever
// the cuts, and every refusal maps to its problem (ReadProblem). The socket-level proof is
// tests/hardening/hardening_hostile_input_test.cc.
#include "server/http/request_parser.h"

#include <gtest/gtest.h>

#include <string>

#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>

#include "tests/server/http/framing_driver.h"

namespace scangate::server {
namespace {

namespace http = boost::beast::http;
using test_support::FramingRun;
using test_support::PieceStream;
using test_support::ReadLikeASession;

const std::string kChunkedHead =
    "POST /observe HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";

// Cut patterns: one read for everything, 1-byte reads, and uneven ones.
const std::vector<std::string> kCuts = {"", std::string(1, '\x01'), std::string("\x07\x40\xff\x03", 4)};

TEST(RequestParser, EndlessChunkExtensionOverflowsTheBoundedBufferOnly) {
  const std::string attack = kChunkedHead + "1;" + std::string(64 * 1024, 'a');
  for (const std::string& cuts : {std::string(), std::string("\xff", 1)}) {
    const FramingRun run = ReadLikeASession(attack, cuts, false);
    EXPECT_EQ(run.ec, http::error::buffer_overflow) << run.ec.message();
    EXPECT_LE(run.max_capacity, kReadBufferBytes);
    EXPECT_TRUE(run.requests.empty());
    const auto p = ReadProblem(run.ec);
    ASSERT_TRUE(p);
    EXPECT_EQ(p->status, 400u);
  }
  // The control: Beast's parser with an unbounded buffer (the session before issue 43) holds the whole line.
  PieceStream s(attack, "");
  boost::beast::flat_buffer unbounded;
  http::request_parser<http::string_body> parser;
  boost::system::error_code ec;
  http::read_header(s, unbounded, parser, ec);
  ASSERT_FALSE(ec) << ec.message();
  http::read_some(s, unbounded, parser, ec);
  EXPECT_TRUE(ec);  // the input ended mid-line: it waited for more
  EXPECT_GE(unbounded.size(), 64u * 1024) << "Beast 1.81 buffered the extension whole";
}

TEST(RequestParser, EndlessTrailerOverflowsTheBuffer) {
  const FramingRun run = ReadLikeASession(kChunkedHead + "2\r\n{}\r\n0\r\nX-Pad: " + std::string(64 * 1024, 'b'), "", false);
  EXPECT_EQ(run.ec, http::error::buffer_overflow) << run.ec.message();
  EXPECT_LE(run.max_capacity, kReadBufferBytes);
}

TEST(RequestParser, TrailerFieldsAreRefusedNotMerged) {
  for (const std::string& cuts : kCuts) {
    const FramingRun run =
        ReadLikeASession(kChunkedHead + "2\r\n{}\r\n0\r\nContent-Type: text/plain\r\n\r\n", cuts, false);
    EXPECT_EQ(run.ec, FramingError::kTrailer) << run.ec.message();
    EXPECT_TRUE(run.requests.empty());
  }
  // An empty trailer section is the normal end of a chunked body.
  const FramingRun ok = ReadLikeASession(kChunkedHead + "2\r\n{}\r\n0\r\n\r\n", "", false);
  ASSERT_EQ(ok.requests.size(), 1u) << ok.ec.message();
  EXPECT_EQ(ok.requests[0].request.body(), "{}");
  EXPECT_EQ(ok.requests[0].request[http::field::content_type], "application/json");
  EXPECT_EQ(ok.requests[0].header_fields, 3u);
  const auto p = ReadProblem(make_error_code(FramingError::kTrailer));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->status, 400u);
}

TEST(RequestParser, ChunkExtensionsAreBoundedInAll) {
  // Short extensions are read (and ignored) ...
  FramingRun run = ReadLikeASession(kChunkedHead + "2;name=value\r\n{}\r\n0;last\r\n\r\n", "", false);
  ASSERT_EQ(run.requests.size(), 1u) << run.ec.message();
  EXPECT_EQ(run.requests[0].request.body(), "{}");
  // ... but not past kMaxChunkExtensionBytes in all, each line well within the buffer.
  std::string body;
  for (std::size_t i = 0; i * 100 <= kMaxChunkExtensionBytes; ++i) body += "1;" + std::string(98, 'e') + "\r\nx\r\n";
  run = ReadLikeASession(kChunkedHead + body + "0\r\n\r\n", "", false);
  EXPECT_EQ(run.ec, FramingError::kChunkExtensions) << run.ec.message();
  ASSERT_TRUE(ReadProblem(run.ec));
  EXPECT_EQ(ReadProblem(run.ec)->status, 400u);
}

TEST(RequestParser, SecondHostIsRefused) {
  const FramingRun run = ReadLikeASession("GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "", false);
  EXPECT_EQ(run.ec, FramingError::kSecondHost) << run.ec.message();
  ASSERT_TRUE(ReadProblem(run.ec));
  EXPECT_EQ(ReadProblem(run.ec)->status, 400u);
  const FramingRun one = ReadLikeASession("GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n", "", false);
  EXPECT_EQ(one.requests.size(), 1u) << one.ec.message();
}

TEST(RequestParser, HeaderPastTheLimitIs431WithinTheBuffer) {
  const FramingRun run =
      ReadLikeASession("GET /healthz HTTP/1.1\r\nHost: a\r\nX-Pad: " + std::string(20'000, 'p') + "\r\n\r\n", "", false);
  EXPECT_EQ(run.ec, http::error::header_limit) << run.ec.message();
  EXPECT_LE(run.max_capacity, kReadBufferBytes);
  ASSERT_TRUE(ReadProblem(run.ec));
  EXPECT_EQ(ReadProblem(run.ec)->status, 431u);
}

TEST(RequestParser, PipelinedRequestsWhateverTheCuts) {
  const std::string three = "POST /observe HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n{\"key\":\"a\"}" +
                            kChunkedHead + "b\r\n{\"key\":\"b\"}\r\n0\r\n\r\n" +
                            "GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n";
  for (const std::string& cuts : kCuts) {
    const FramingRun run = ReadLikeASession(three, cuts, false);
    ASSERT_EQ(run.requests.size(), 3u) << run.ec.message();
    EXPECT_EQ(run.requests[0].request.body(), "{\"key\":\"a\"}");
    EXPECT_EQ(run.requests[1].request.body(), "{\"key\":\"b\"}");
    EXPECT_EQ(run.requests[2].request.target(), "/readyz");
    EXPECT_EQ(run.ec, http::error::end_of_stream);
    EXPECT_FALSE(ReadProblem(run.ec)) << "the client's end is no one's problem";
  }
}

TEST(RequestParser, ProxyV2ThenARequest) {
  std::string proxy("\r\n\r\n\0\r\nQUIT\n", 12);
  proxy += std::string("\x21\x11\x00\x0c", 4) + std::string("\xc0\x00\x02\x0a\x7f\x00\x00\x01\xc3\x50\x1f\x90", 12);
  const FramingRun run = ReadLikeASession(proxy + "GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n", "", true);
  ASSERT_TRUE(run.client);
  EXPECT_EQ(run.client->to_string(), "192.0.2.10");
  EXPECT_EQ(run.requests.size(), 1u);
  EXPECT_TRUE(ReadLikeASession("GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n", "", true).proxy_refused);
}

TEST(RequestParser, BodyPastTheRouteLimitIsTheCallers413) {
  const FramingRun run = ReadLikeASession("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000000\r\n\r\n" +
                                              std::string(kMaxOtherBodyBytes + 1, 'z'),
                                          "", false);
  EXPECT_EQ(run.ec, http::error::body_limit) << run.ec.message();
  EXPECT_FALSE(ReadProblem(run.ec)) << "413 names the route's limit: the session answers it";
}

}  // namespace
}  // namespace scangate::server
