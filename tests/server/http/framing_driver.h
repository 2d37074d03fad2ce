// Reads requests off a byte string the way server/http/session.cc reads them off a socket, without sockets: the
// PROXY v2 header first when the peer is a listed proxy (ProxyV2Length, ParseProxyV2), then request after request
// (pipelining) through one read buffer bounded at kReadBufferBytes and a fresh RequestParser each, the header
// first (Beast's read_header), then the route's body limit (BodyLimitFor(RouteOf(target))), then the body piece by
// piece (Beast's read_some) — the same Beast composed reads, with their buffer sizing, that the session's async
// ones run. The bytes arrive in pieces whose sizes follow `cuts` (cycled; a 0 is read as 1), as a socket's reads
// would cut them. Header-only: used by tests/server/http/request_parser_test.cc and tests/fuzz/fuzz_framing.cc.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/system/system_error.hpp>

#include "server/http/proxy_protocol.h"
#include "server/http/request_parser.h"
#include "server/http/route.h"

namespace scangate::server::test_support {

// A SyncReadStream over fixed bytes, handing them out in pieces cut by `cuts`, then end of stream.
class PieceStream {
 public:
  PieceStream(std::string_view bytes, std::string_view cuts) : bytes_(bytes), cuts_(cuts) {}

  template <typename MutableBuffers>
  std::size_t read_some(const MutableBuffers& buffers, boost::system::error_code& ec) {
    if (pos_ == bytes_.size()) {
      ec = boost::asio::error::eof;
      return 0;
    }
    ec = {};
    std::size_t piece = bytes_.size() - pos_;
    if (!cuts_.empty()) piece = std::max<std::size_t>(1, static_cast<unsigned char>(cuts_[next_cut_++ % cuts_.size()]));
    const std::size_t n = boost::asio::buffer_copy(
        buffers, boost::asio::buffer(bytes_.data() + pos_, std::min(piece, bytes_.size() - pos_)));
    pos_ += n;
    return n;
  }
  template <typename MutableBuffers>
  std::size_t read_some(const MutableBuffers& buffers) {
    boost::system::error_code ec;
    const std::size_t n = read_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }
  // Raw reads (the PROXY header is read off the socket before any HTTP): exactly n bytes, or false.
  bool ReadExactly(char* out, std::size_t n) {
    if (bytes_.size() - pos_ < n) return false;
    std::copy_n(bytes_.data() + pos_, n, out);
    pos_ += n;
    return true;
  }
  std::size_t consumed() const { return pos_; }

 private:
  std::string_view bytes_;
  std::string_view cuts_;
  std::size_t pos_ = 0;
  std::size_t next_cut_ = 0;
};

struct FramedRequest {
  RequestParser::Request request;
  std::size_t header_fields = 0;  // fields once the header was read (a trailer would add some)
  std::size_t body_limit = 0;     // the route's, set after the header
};

struct FramingRun {
  bool proxy_refused = false;                        // a listed proxy's header was missing or malformed
  std::optional<boost::asio::ip::address> client;    // what a PROXY header named
  std::vector<FramedRequest> requests;               // complete requests, in order
  boost::system::error_code ec;                      // what ended the run (eof/end_of_stream: the client's end)
  std::size_t max_capacity = 0;                      // the most bytes the read buffer allocated
};

// Reads everything `bytes` holds, as described above; `proxied`: the peer is in --proxy-protocol-from.
inline FramingRun ReadLikeASession(std::string_view bytes, std::string_view cuts, bool proxied) {
  namespace http = boost::beast::http;
  FramingRun run;
  PieceStream s(bytes, cuts);
  if (proxied) {
    std::string header(kProxyV2FixedBytes, '\0');
    if (!s.ReadExactly(header.data(), kProxyV2FixedBytes)) return run.proxy_refused = true, run;
    const auto rest = ProxyV2Length(header);
    if (std::holds_alternative<std::string>(rest)) return run.proxy_refused = true, run;
    header.resize(kProxyV2FixedBytes + std::get<std::size_t>(rest));
    if (!s.ReadExactly(header.data() + kProxyV2FixedBytes, std::get<std::size_t>(rest))) {
      return run.proxy_refused = true, run;
    }
    const auto client = ParseProxyV2(header);
    if (std::holds_alternative<std::string>(client)) return run.proxy_refused = true, run;
    run.client = std::get<std::optional<boost::asio::ip::address>>(client);
  }
  boost::beast::flat_buffer buffer(kReadBufferBytes);
  for (;;) {
    RequestParser parser;
    parser.header_limit(static_cast<std::uint32_t>(kMaxHeaderBytes));
    parser.body_limit(boost::none);
    http::read_header(s, buffer, parser, run.ec);
    run.max_capacity = std::max(run.max_capacity, buffer.capacity());
    if (run.ec) return run;
    FramedRequest r;
    r.header_fields = static_cast<std::size_t>(std::distance(parser.get().begin(), parser.get().end()));
    r.body_limit = BodyLimitFor(RouteOf(parser.get().target()));
    parser.SetBodyLimit(r.body_limit);
    while (!parser.is_done()) {
      http::read_some(s, buffer, parser, run.ec);
      run.max_capacity = std::max(run.max_capacity, buffer.capacity());
      if (run.ec) return run;
    }
    r.request = parser.release();
    run.requests.push_back(std::move(r));
  }
}

}  // namespace scangate::server::test_support
