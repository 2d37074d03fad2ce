#include "server/http/session.h"

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/bind_handler.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include "server/http/address_key.h"
#include "server/http/ascii.h"
#include "server/http/client_certificate.h"
#include "server/http/connection_limit.h"
#include "server/http/proxy_protocol.h"
#include "server/http/request.h"
#include "server/http/request_parser.h"
#include "server/http/response_wire.h"
#include "server/http/sweeper.h"
#include "server/log.h"

namespace scangate::server {
namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

namespace {

constexpr std::size_t kFirstReadBytes = 4096;      // first read of an idle connection (one typical request)
constexpr std::size_t kLingerDrainBytes = 1 << 20;  // bytes discarded after an error response, then close
constexpr auto kLingerTimeout = std::chrono::seconds(2);
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

// Connection endings a client causes routinely (closing mid-request, resets): not worth a log line.
bool IsPeerGone(const beast::error_code& ec) {
  return ec == net::error::connection_reset || ec == net::error::broken_pipe || ec == net::error::eof ||
         ec == http::error::end_of_stream || ec == http::error::partial_message;
}

// A session keeps its response buffer's capacity up to this between requests (a verdict is ~150 bytes;
// /metrics and /dashboard answers are larger and give theirs back).
constexpr std::size_t kWireKeepBytes = 16 * 1024;

using PlainStream = beast::basic_stream<tcp, IoExecutor>;
using TlsStream = beast::ssl_stream<PlainStream>;

// One connection. Stream is PlainStream (plain HTTP) or TlsStream (HTTPS):
// the only difference is the TLS handshake before the first request; timeouts, limits and closing act
// on the lowest layer (the PlainStream) in both cases.
template <typename Stream>
class Session : public SessionBase, public std::enable_shared_from_this<Session<Stream>> {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, PlainStream>;

  // `tls`: the context `stream_args` names (HTTPS), kept alive as long as the session; null for plain HTTP.
  // `peer`: the address accept() returned; `slot`: the address's connection slot the accept took (empty for a
  // proxy's connection: its client's is taken once the PROXY header names it), given back when the session ends.
  template <typename... StreamArgs>
  Session(HttpServer::Worker& w, Listener listener, const net::ip::address& peer, ConnectionLimiter::Slot slot,
          bool proxied, std::shared_ptr<net::ssl::context> tls, StreamArgs&&... stream_args)
      : tls_(std::move(tls)),
        stream_(std::forward<StreamArgs>(stream_args)...),
        w_(w),
        listener_(listener),
        proxied_(proxied),
        peer_(peer),
        slot_(std::move(slot)) {
    w_.sessions.insert(this);
    // relaxed: gauges for WaitDrained and the accept caps; nothing is published through them.
    w_.shared.sessions.fetch_add(1, std::memory_order_relaxed);
    ListenerSessions().fetch_add(1, std::memory_order_relaxed);
  }
  ~Session() override {
    w_.sessions.erase(this);
    ListenerSessions().fetch_sub(1, std::memory_order_relaxed);  // relaxed: see constructor
    w_.shared.sessions.fetch_sub(1, std::memory_order_relaxed);  // relaxed: see constructor
  }

  // Called on the worker's thread.
  void Run() {
    if (proxied_) return ReadProxyHeader();
    Begin();
  }

  // Shutdown: a connection waiting for (or reading the header of) its next request is closed now; one in
  // the middle of a request finishes it and closes after the response (keep_alive is off once stopping).
  void CloseIfIdle() override {
    // A pending read (or handshake) completes with operation_aborted.
    if (phase_ == Phase::kWaiting || phase_ == Phase::kHandshake) Lowest().close();
  }

  // The sweeper, on the worker's thread: a timeout (header 10 s, body 5 s + its minimum rate up to 30 s, idle
  // 60 s, write 30 s, TLS handshake 10 s, linger 2 s) drops the connection without a response; its pending
  // operation completes with operation_aborted, which every handler takes as the end of the session, silently.
  void CloseIfExpired(std::chrono::steady_clock::time_point now) override {
    if (now < deadline_) return;
    deadline_ = kNoDeadline;
    Lowest().close();
  }

 private:
  enum class Phase { kHandshake, kWaiting, kBody, kHandling, kWriting, kLingering };

  static constexpr auto kNoDeadline = std::chrono::steady_clock::time_point::max();

  std::shared_ptr<Session> Self() { return this->shared_from_this(); }
  std::atomic<std::size_t>& ListenerSessions() {
    return w_.shared.listener_sessions[static_cast<std::size_t>(listener_)];
  }
  PlainStream& Lowest() { return beast::get_lowest_layer(stream_); }
  // The current phase must end within `timeout` (see kSweepInterval).
  void SetDeadline(std::chrono::steady_clock::duration timeout) { deadline_ = w_.now + timeout + kSweepInterval; }

  // The TLS handshake (HTTPS) or the first request, once the PROXY header (if any) is read.
  void Begin() {
    if constexpr (kTls) {
      phase_ = Phase::kHandshake;
      SetDeadline(kHandshakeTimeout);
      if (listener_ == Listener::kAdmin) NoClientCertificate(stream_.native_handle());  // probes present none
      stream_.async_handshake(net::ssl::stream_base::server,
                              beast::bind_front_handler(&Session::OnHandshake, Self()));
    } else {
      WaitForRequest();
    }
  }

  // A peer in --proxy-protocol-from (server/http/proxy_protocol.h) must open with a PROXY v2 header, on the raw
  // TCP stream (before TLS), within the header timeout; its client address replaces the peer's for every
  // per-address limit, and the client's --max-connections-per-address slot is taken here (the accept took none
  // for the proxy). A missing or malformed header closes the connection, unanswered, with one log line.
  void ReadProxyHeader() {
    phase_ = Phase::kHandshake;  // closed at once by a shutdown, like a handshake
    SetDeadline(kHeaderReadTimeout);
    net::async_read(Lowest(), net::buffer(proxy_header_.data(), kProxyV2FixedBytes),
                    beast::bind_front_handler(&Session::OnProxyFixed, Self()));
  }

  void OnProxyFixed(beast::error_code ec, std::size_t) {
    if (ec) return Fail(ec, "read PROXY header");
    const auto rest = ProxyV2Length(std::string_view(proxy_header_.data(), kProxyV2FixedBytes));
    if (const auto* e = std::get_if<std::string>(&rest)) return RefuseProxy(*e);
    proxy_header_bytes_ = kProxyV2FixedBytes + std::get<std::size_t>(rest);
    net::async_read(Lowest(), net::buffer(proxy_header_.data() + kProxyV2FixedBytes, std::get<std::size_t>(rest)),
                    beast::bind_front_handler(&Session::OnProxyRest, Self()));
  }

  void OnProxyRest(beast::error_code ec, std::size_t) {
    if (ec) return Fail(ec, "read PROXY header");
    const auto client = ParseProxyV2(std::string_view(proxy_header_.data(), proxy_header_bytes_));
    if (const auto* e = std::get_if<std::string>(&client)) return RefuseProxy(*e);
    if (const auto& address = std::get<std::optional<net::ip::address>>(client)) peer_ = *address;
    AddressKeyBuffer buf{};
    auto slot = w_.shared.per_address.Acquire(AddressKey(peer_, shared().config.ipv6_prefix_length, buf));
    if (!slot) {  // the client is past its share
      w_.counters.refused_per_address.Inc();
      return Lowest().close();
    }
    slot_ = std::move(*slot);
    Begin();
  }

  void RefuseProxy(const std::string& why) {
    Log(LogLevel::kWarn, "proxy_protocol_refused", {{"reason", why}});
    Lowest().close();
  }

  // A failed handshake (plain HTTP or an old TLS version on the TLS port, a scanner, a timeout, a client
  // certificate refused) just ends the connection: the client gets a TLS alert, the log stays quiet (a client
  // could flood it); refused client certificates are counted. mTLS: the verified certificate's terminal is
  // read once, for every request of the connection.
  void OnHandshake(beast::error_code ec) {
    if (ec) {
      if (IsClientCertificateRefusal(ec)) w_.counters.client_certificates_refused.Inc();
      return;
    }
    if constexpr (kTls) {
      if (listener_ == Listener::kMain && shared().config.mtls()) {
        cert_ = ClientCertificateOf(stream_.native_handle(), shared().config.tls_client_routes);
      }
    }
    WaitForRequest();
  }

  // mTLS on the main listener after a SIGHUP reload (a new CA file or CRL): this connection's certificate was
  // checked by the previous context, so it closes after its answer and the client's next connection is checked
  // again (a revoked terminal is out after one more request).
  bool VerifiedByOldContext() const {
    if constexpr (kTls) {
      // relaxed: a reload seen one answer late only delays the close by one request.
      return cert_ && tls_.get() != shared().tls_current.load(std::memory_order_relaxed);
    }
    return false;
  }

  const HttpServer::Shared& shared() const { return w_.shared; }
  Router& router() { return w_.shared.router; }

  void WaitForRequest() {
    phase_ = Phase::kWaiting;
    if (w_.shared.stopping.load()) return;  // last reference dropped: the socket closes
    if (buffer_.size() > 0) {  // a pipelined request is already here
      ReadHeader();
      return;
    }
    // A new connection must send its first request within the header timeout; a kept-alive one may idle. On the
    // admin listener both are --admin-idle-timeout (probes send their request at once; a host holding idle
    // connections must not keep the listener's slots).
    if (listener_ == Listener::kAdmin) {
      SetDeadline(shared().config.admin_idle_timeout);
    } else {
      SetDeadline(first_request_ ? kHeaderReadTimeout : kIdleTimeout);
    }
    stream_.async_read_some(buffer_.prepare(kFirstReadBytes), beast::bind_front_handler(&Session::OnFirstBytes, Self()));
  }

  void OnFirstBytes(beast::error_code ec, std::size_t n) {
    if (ec) return OnReadError(ec, "read");
    buffer_.commit(n);
    ReadHeader();
  }

  void ReadHeader() {
    start_ = std::chrono::steady_clock::now();  // latency: first byte of the request .. response written
    head_ = false;  // a header that fails to parse is answered in full (and the connection closes)
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(kMaxHeaderBytes));
    // No limit while reading the header: the route's limit is set once the target is known (Content-Length
    // is checked against it before any body byte is read).
    parser_->body_limit(boost::none);
    SetDeadline(kHeaderReadTimeout);
    http::async_read_header(stream_, buffer_, *parser_, beast::bind_front_handler(&Session::OnReadHeader, Self()));
  }

  void OnReadHeader(beast::error_code ec, std::size_t) {
    if (ec) return OnReadError(ec, "read header");
    first_request_ = false;
    const auto& req = parser_->get();
    version_ = req.version();
    keep_alive_ = req.keep_alive();
    head_ = req.method() == http::verb::head;
    // Route, Origin policy, size limit, preflight and token: all decided before any body byte is read; a
    // refused request with a body closes the connection (the body is drained by Linger, never buffered).
    Router::Admission ad = router().Admit(req.base(), listener_, kTls, peer_, cert_ ? &*cert_ : nullptr);
    route_ = ad.route;
    terminal_ = std::move(ad.terminal);
    body_hold_ = std::move(ad.body_hold);
    body_limit_ = ad.body_limit;
    if (ad.answer) {
      ad.answer->close = ad.answer->close || !parser_->is_done();
      return Send(std::move(*ad.answer));
    }
    parser_->SetBodyLimit(body_limit_);  // enforced while reading the body
    if (parser_->is_done()) return Handle();
    phase_ = Phase::kBody;
    SetDeadline(kBodyReadTimeout);
    if (EqualsIgnoringAsciiCase(req[http::field::expect], "100-continue")) {
      net::async_write(stream_, net::buffer(kContinue.data(), kContinue.size()),
                       beast::bind_front_handler(&Session::OnContinueWritten, Self()));
      return;
    }
    ReadBody();
  }

  void OnContinueWritten(beast::error_code ec, std::size_t) {
    if (ec) return Fail(ec, "write 100-continue");
    ReadBody();
  }

  // The body, piece by piece, under its minimum rate (kBodyGrace, kMinBodyBytesPerSecond: http_server.h).
  void ReadBody() {
    body_start_ = w_.now;
    body_received_ = 0;
    SetBodyDeadline();
    http::async_read_some(stream_, buffer_, *parser_, beast::bind_front_handler(&Session::OnReadBody, Self()));
  }

  void OnReadBody(beast::error_code ec, std::size_t n) {
    if (ec) return OnReadError(ec, "read body");
    if (parser_->is_done()) return Handle();
    body_received_ += n;
    SetBodyDeadline();
    http::async_read_some(stream_, buffer_, *parser_, beast::bind_front_handler(&Session::OnReadBody, Self()));
  }

  // The header's end + kBodyGrace + what the bytes received so far earn at the minimum rate, at most
  // kBodyReadTimeout (+ the sweeper's interval, as SetDeadline).
  void SetBodyDeadline() {
    const auto earned = std::chrono::milliseconds(body_received_ * 1000 / kMinBodyBytesPerSecond);
    const std::chrono::steady_clock::duration allowed = kBodyGrace + earned;
    deadline_ = body_start_ + std::min<std::chrono::steady_clock::duration>(allowed, kBodyReadTimeout) + kSweepInterval;
  }

  // Read errors, expected endings first.
  void OnReadError(beast::error_code ec, const char* what) {
    // The client closed the connection between requests: the normal end of keep-alive.
    if (ec == http::error::end_of_stream || ec == net::error::eof) return;
    // A read timeout (header 10 s, body: its minimum rate, idle 60 s: CloseIfExpired) or shutdown closed the
    // connection (operation_aborted, or any error of an operation that found it closed): no response, no log line.
    if (ec == net::error::operation_aborted || !Lowest().socket().is_open()) return;
    if (ec == http::error::body_limit) {
      return Send(router().ProblemAnswer(Problem::BodyTooLarge(body_limit_), route_, &parser_->get().base(), true));
    }
    // Bad framing (431, 400: server/http/request_parser.h), including a chunk-size line or trailer section that
    // does not fit the read buffer.
    if (auto p = ReadProblem(ec)) return ReplyProblem(*p);
    Fail(ec, what);
  }

  void Handle() {
    phase_ = Phase::kHandling;
    deadline_ = kNoDeadline;  // the request's own deadline is the router's (--request-timeout)
    // The router answers exactly once, on this session's executor (inline or after the Store/Lookup).
    router().Handle(route_, parser_->get(), stream_.get_executor(), w_.counters,
                    [self = Self()](Router::Answer a) { self->Send(std::move(a)); }, terminal_.get(), peer_);
  }

  // A transport-level problem (bad HTTP, 431): the connection closes after it.
  void ReplyProblem(const Problem& p) { Send(router().ProblemAnswer(p, route_, nullptr, /*close=*/true)); }

  void Send(Router::Answer a) {
    phase_ = Phase::kWriting;
    res_ = std::move(a.res);
    res_.version(version_);
    res_.keep_alive(keep_alive_ && !a.close && !shared().stopping.load() && !VerifiedByOldContext());
    res_.prepare_payload();
    SerializeResponse(res_, wire_, head_);
    SetDeadline(kWriteTimeout);
    net::async_write(stream_, net::buffer(wire_), beast::bind_front_handler(&Session::OnWrite, Self()));
  }

  void OnWrite(beast::error_code ec, std::size_t) {
    const auto latency = std::chrono::steady_clock::now() - start_;
    const unsigned status = res_.result_int();
    w_.counters.CountRequest(route_, status, latency);
    if (shared().config.access_log) {
      // Route label, never the raw target (a client could put a key in it).
      const std::string method = parser_ ? std::string(http::to_string(parser_->get().method())) : "";
      Log(LogLevel::kInfo, "access",
          {{"method", method.empty() || method == "<unknown>" ? "other" : method},
           {"path", RouteLabel(route_)},
           {"status", status},
           {"latency_us", std::chrono::duration_cast<std::chrono::microseconds>(latency).count()}});
    }
    parser_.reset();       // the request's body, and then its bytes in --max-body-bytes-in-flight
    body_hold_.Release();
    if (ec) return Fail(ec, "write");
    if (!res_.keep_alive()) return Linger();
    terminal_.reset();
    res_ = {};
    if (wire_.capacity() > kWireKeepBytes) std::string().swap(wire_);  // a /metrics or /dashboard answer
    WaitForRequest();
  }

  // After a closing response: half-close, then discard what the client still sends (e.g. the rest of a
  // too-large body) for a short while, so it reads the response instead of a reset. Over TLS the TCP
  // bytes are discarded undecrypted and no close_notify is sent (responses are length-delimited).
  void Linger() {
    phase_ = Phase::kLingering;
    beast::error_code ignored;
    Lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
    buffer_.clear();
    SetDeadline(kLingerTimeout);
    DrainSome();
  }

  void DrainSome() {
    Lowest().async_read_some(buffer_.prepare(kFirstReadBytes), [self = Self()](beast::error_code ec, std::size_t n) {
      self->drained_ += n;
      self->buffer_.clear();
      // Any error (EOF from the client, the linger timeout, a reset) or the drain cap ends the session.
      if (ec || self->drained_ > kLingerDrainBytes) return;
      self->DrainSome();
    });
  }

  void Fail(beast::error_code ec, const char* what) {
    // Closed by us (a timeout, shutdown) or by the client: not worth a log line.
    if (IsPeerGone(ec) || ec == net::error::operation_aborted || !Lowest().socket().is_open()) return;
    Log(LogLevel::kWarn, "connection_error", {{"op", what}, {"error", ec.message()}});
  }

  std::shared_ptr<net::ssl::context> tls_;  // declared before stream_: outlives the TLS stream made from it
  Stream stream_;
  HttpServer::Worker& w_;
  const Listener listener_;
  const bool proxied_;  // the peer is in --proxy-protocol-from: a PROXY v2 header comes first
  std::array<char, kProxyV2FixedBytes + kProxyV2MaxRestBytes> proxy_header_{};
  std::size_t proxy_header_bytes_ = 0;
  beast::flat_buffer buffer_{kReadBufferBytes};  // unparsed bytes, bounded (server/http/request_parser.h)
  std::optional<RequestParser> parser_;
  http::response<http::string_body> res_;
  std::string wire_;  // res_ serialized (SerializeResponse); its capacity is reused by the next response
  Phase phase_ = Phase::kWaiting;
  Route route_ = Route::kNotFound;
  std::shared_ptr<const Terminal> terminal_;  // of the current request (tokens on), from Router::Admit
  std::optional<ClientCertificate> cert_;     // mTLS on the main listener: the connection's, from OnHandshake
  BodyBudget::Hold body_hold_;                // the current body's bytes in the budget, from Router::Admit
  net::ip::address peer_;                     // the client's address (the rate limit's key with tokens off)
  ConnectionLimiter::Slot slot_;              // the client address's connection slot (given back at the end)
  std::size_t body_limit_ = kMaxOtherBodyBytes;  // of route_, from Router::Admit
  unsigned version_ = 11;
  bool keep_alive_ = false;
  bool head_ = false;  // the request is HEAD: its answer goes out without the body (RFC 9110 §9.3.2)
  bool first_request_ = true;
  std::size_t drained_ = 0;
  std::chrono::steady_clock::time_point body_start_{};  // ReadBody: the sweeper's clock at the header's end
  std::uint64_t body_received_ = 0;                     // bytes parsed since (the minimum rate's credit)
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point deadline_ = kNoDeadline;  // CloseIfExpired
};

}  // namespace

void StartSession(HttpServer::Worker& w, Listener listener, PlainSocket socket, const net::ip::address& peer,
                  ConnectionLimiter::Slot slot, bool proxied) {
  // HTTPS on the main listener with --tls-cert, on the admin listener with --admin-tls too (without TLS no lock).
  const bool https = w.shared.config.tls() && (listener == Listener::kMain || w.shared.config.admin_tls);
  std::shared_ptr<net::ssl::context> tls = https ? w.shared.Tls() : nullptr;
  if (tls) {
    net::ssl::context& ctx = *tls;
    std::make_shared<Session<TlsStream>>(w, listener, peer, std::move(slot), proxied, std::move(tls),
                                         std::move(socket), ctx)
        ->Run();
  } else {
    std::make_shared<Session<PlainStream>>(w, listener, peer, std::move(slot), proxied, nullptr, std::move(socket))
        ->Run();
  }
}

}  // namespace scangate::server
