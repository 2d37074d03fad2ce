// libFuzzer target over a whole session's framing (issue 43): the bytes a client sends on one connection — a PROXY
// v2 header when the peer is a listed proxy, then request lines, header fields, Content-Length and chunked bodies
// with extensions and trailers, pipelined one after another — read as server/http/session.cc reads them (the same
// bounded buffer, RequestParser, route body limits and Beast composed reads: tests/server/http/framing_driver.h).
// Input: byte 0 bit 0 = the peer is a listed proxy; bytes 1..4 = the sizes of the socket's reads, cycled (as a
// kernel would cut the stream); the rest = the stream. Checks, for every input:
// - the read buffer never allocates past kReadBufferBytes (an endless chunk-size line or trailer cannot grow it);
// - a complete request's body is within its route's limit, it has at most one Host, and no field was added to it
//   after its header (trailers are refused, never merged);
// - the run ends at the client's end, at a body past its limit (413), or at an error the session answers with a
//   4xx (ReadProblem): nothing else;
// - what is read does not depend on how the stream was cut: the requests read are those of one read, at most
//   fewer when the cut run was refused near a limit (see SameOutcome).
// Seeds: tests/fuzz/framing_corpus/ (issue 43's attacks among them). Run by tests/fuzz/run.sh with a memory limit.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <string>
#include <string_view>

#include <boost/beast/http/error.hpp>

#include "server/http/request_parser.h"
#include "tests/server/http/framing_driver.h"

namespace {

using scangate::server::kReadBufferBytes;
using scangate::server::ReadProblem;
using scangate::server::test_support::FramingRun;
using scangate::server::test_support::ReadLikeASession;
namespace http = boost::beast::http;

void Check(bool ok) {
  if (!ok) std::abort();
}

void CheckRun(const FramingRun& run) {
  Check(run.max_capacity <= kReadBufferBytes);
  for (const auto& r : run.requests) {
    Check(r.request.body().size() <= r.body_limit);
    Check(r.request.count(http::field::host) <= 1);
    Check(static_cast<std::size_t>(std::distance(r.request.begin(), r.request.end())) == r.header_fields);
  }
  if (run.proxy_refused) return;
  const bool client_end = run.ec == http::error::end_of_stream || run.ec == http::error::partial_message;
  const auto problem = ReadProblem(run.ec);
  Check(client_end || run.ec == http::error::body_limit ||
        (problem && (problem->status == 400 || problem->status == 431)));
}

// What a cut may change: Beast re-parses an incomplete header only once its end has arrived, and checks the header
// limit against the bytes buffered, so a malformed field is 400 when the header came in one read and 431 or the
// client's partial message otherwise, and a header just under 8 KiB may be refused (431) or read depending on what
// follows it in the buffer. What it may not: the requests both runs read are the same (method, target, fields,
// body), and a run that read fewer ended in a refusal, not at the client's clean end.
bool SameOutcome(const FramingRun& a, const FramingRun& b) {
  if (a.proxy_refused != b.proxy_refused || a.client != b.client) return false;
  const FramingRun& shorter = a.requests.size() <= b.requests.size() ? a : b;
  const FramingRun& longer = &shorter == &a ? b : a;
  const bool a_clean = a.ec == http::error::end_of_stream, b_clean = b.ec == http::error::end_of_stream;
  if (a.requests.size() == b.requests.size() ? a_clean != b_clean : shorter.ec == http::error::end_of_stream) {
    return false;
  }
  for (std::size_t i = 0; i < shorter.requests.size(); ++i) {
    const auto& x = shorter.requests[i].request;
    const auto& y = longer.requests[i].request;
    if (x.method_string() != y.method_string() || x.target() != y.target() || x.body() != y.body() ||
        shorter.requests[i].header_fields != longer.requests[i].header_fields) {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 5) return 0;
  const bool proxied = (data[0] & 1) != 0;
  const std::string_view cuts(reinterpret_cast<const char*>(data + 1), 4);
  const std::string_view stream(reinterpret_cast<const char*>(data + 5), size - 5);
  const FramingRun cut = ReadLikeASession(stream, cuts, proxied);
  CheckRun(cut);
  const FramingRun whole = ReadLikeASession(stream, {}, proxied);
  CheckRun(whole);
  Check(SameOutcome(cut, whole));
  return 0;
}
