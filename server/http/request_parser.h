// RequestParser: one HTTP/1.1 request off the wire — Beast's basic_parser (the documented extension point) building
// a request<string_body>, with scangate's framing policy on top — and the bound of the bytes a session buffers
// while parsing (kReadBufferBytes). Invariant: a session holds at most kReadBufferBytes unparsed bytes whatever a
// client sends, so a request line and header (kMaxHeaderBytes: 431), a chunk-size line with its extensions and a
// trailer section (each must fit the buffer, else buffer_overflow: 400) are bounded, before any token is checked;
// at most one Host field (RFC 9112 §3.2); chunk extensions total at most kMaxChunkExtensionBytes per request; no
// trailer field ever reaches the request (RFC 9110 §6.5.1 lets a recipient refuse them; scangate does, so nothing
// can be added to a request after its header was admitted). Why: Beast 1.81 buffers a chunk-size line and a
// trailer section whole before any callback sees them, with no limit of its own (issue 43: four connections
// streaming one endless extension took the server from 62 MB to 435 MB in 5 s). Use: server/http/session.cc
// (its buffer is beast::flat_buffer(kReadBufferBytes)); the framing fuzzer (tests/fuzz/fuzz_framing.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <system_error>
#include <type_traits>
#include <utility>

#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/system/error_code.hpp>

#include "server/http/problem.h"
#include "server/http/route.h"

namespace scangate::server {

// Unparsed request bytes a session holds at once. Equal to the header limit: a header that fits kMaxHeaderBytes
// fits the buffer (the parser answers 431 at the limit before the buffer can overflow), and a connection's worst
// case is what a slow 8 KiB header already held before issue 43. A chunk-size line (extensions included) or a
// trailer section longer than this fails the read (400). A body is not buffered here: its bytes move into the
// request as they are parsed, so reads stay at most this size.
inline constexpr std::size_t kReadBufferBytes = kMaxHeaderBytes;
static_assert(kReadBufferBytes >= kMaxHeaderBytes, "a header within the limit must fit the read buffer");
// Chunk extensions (`;name=value` after a chunk size) a request may carry in all: 400 above. No terminal sends
// any (RFC 9112 §7.1.1 asks servers to limit them); the bound keeps a stream of 1-byte chunks with long
// extensions from costing parse time the body limit does not count.
inline constexpr std::size_t kMaxChunkExtensionBytes = 1024;

// What RequestParser refuses beyond Beast's own errors (boost::beast::http::error).
enum class FramingError {
  kSecondHost = 1,       // a second Host field
  kTrailer,              // a trailer field after a chunked body
  kChunkExtensions,      // chunk extensions past kMaxChunkExtensionBytes
};
const boost::system::error_category& FramingCategory();
boost::system::error_code make_error_code(FramingError e);

class RequestParser final : public boost::beast::http::basic_parser<true> {
 public:
  using Request = boost::beast::http::request<boost::beast::http::string_body>;

  RequestParser();
  Request& get() { return m_; }
  const Request& get() const { return m_; }
  Request release() { return std::move(m_); }  // once is_done(); the parser is spent
  // The body's limit, once the route is known (before any body byte): a chunked body past it, or a Content-Length
  // over it, fails with http::error::body_limit (Beast checks a Content-Length only while the header is read,
  // when the route is not known yet).
  void SetBodyLimit(std::uint64_t limit) {
    body_limit(limit);
    route_limit_ = limit;
  }

 private:
  using error_code = boost::beast::error_code;
  using string_view = boost::beast::string_view;

  void on_request_impl(boost::beast::http::verb method, string_view method_str, string_view target, int version,
                       error_code& ec) override;
  void on_response_impl(int, string_view, int, error_code&) override {}  // never called: a request parser
  void on_field_impl(boost::beast::http::field name, string_view name_string, string_view value,
                     error_code& ec) override;
  void on_header_impl(error_code& ec) override;
  void on_body_init_impl(const boost::optional<std::uint64_t>& content_length, error_code& ec) override;
  std::size_t on_body_impl(string_view body, error_code& ec) override;
  void on_chunk_header_impl(std::uint64_t size, string_view extensions, error_code& ec) override;
  std::size_t on_chunk_body_impl(std::uint64_t remain, string_view body, error_code& ec) override;
  void on_finish_impl(error_code& ec) override;

  Request m_;
  boost::beast::http::string_body::reader body_{m_.base(), m_.body()};
  std::uint64_t route_limit_ = kMaxBatchBodyBytes;  // SetBodyLimit's (until then the largest a route accepts)
  std::size_t extension_bytes_ = 0;                 // chunk extensions seen so far
  bool host_seen_ = false;
};

// The answer to a failed read of a request (an error of RequestParser or of Beast's read with the session's
// buffer): 431 header-too-large, 400 bad-request naming what was wrong (never the bytes), or nullopt when `ec`
// is not the client's framing (the connection went away, a timeout: no answer). A body past its limit
// (http::error::body_limit) is the caller's: its answer names the route's limit.
std::optional<Problem> ReadProblem(const boost::system::error_code& ec);

}  // namespace scangate::server

template <>
struct boost::system::is_error_code_enum<scangate::server::FramingError> : std::true_type {};
