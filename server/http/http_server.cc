#include "server/http/http_server.h"

#include <algorithm>
#include <optional>
#include <thread>
#include <unordered_set>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/bind_handler.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <openssl/ssl.h>

#include "core/thread_name.h"
#include "server/log.h"

namespace scangate::server {
namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using tcp = net::ip::tcp;

namespace {

constexpr std::size_t kFirstReadBytes = 4096;      // first read of an idle connection (one typical request)
constexpr std::size_t kLingerDrainBytes = 1 << 20;  // bytes discarded after an error response, then close
constexpr auto kLingerTimeout = std::chrono::seconds(2);
// Connection timeouts are deadlines a per-worker sweeper checks this often, not a timer per read and write:
// Beast's stream timeouts armed, cancelled and completed a timer around every operation (4-9 % of the
// server's CPU, bench/RESULTS-history.md "Connection timeouts by a sweeper"). A deadline is set from the sweeper's
// last reading of the clock plus one interval, so a timeout never fires early and at most ~2 intervals late.
constexpr auto kSweepInterval = std::chrono::milliseconds(250);
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

using ReusePort = net::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;

bool IsHttpParseError(const beast::error_code& ec) {
  return &ec.category() == &http::make_error_code(http::error::bad_target).category();
}

// Connection endings a client causes routinely (closing mid-request, resets): not worth a log line.
bool IsPeerGone(const beast::error_code& ec) {
  return ec == net::error::connection_reset || ec == net::error::broken_pipe || ec == net::error::eof ||
         ec == http::error::end_of_stream || ec == http::error::partial_message;
}

// A session keeps its response buffer's capacity up to this between requests (a verdict is ~150 bytes;
// /metrics and /dashboard answers are larger and give theirs back).
constexpr std::size_t kWireKeepBytes = 16 * 1024;

// The whole response — status line, fields, blank line, body — in one contiguous buffer (cleared, its
// capacity reused per session), written with one async_write of one buffer. The same bytes Beast's
// http::async_write sends for a string_body response after prepare_payload() (Content-Length, never
// chunked); its serializer walked a buffers_cat_view of header and body pieces per write, ~3.5 % of
// scangate's CPU at 256 connections (issue 8's profile).
void SerializeResponse(const http::response<http::string_body>& res, std::string& out) {
  out.clear();
  out += res.version() == 10 ? "HTTP/1.0 " : "HTTP/1.1 ";
  char code[3];
  const unsigned status = res.result_int();  // 100..999
  code[0] = static_cast<char>('0' + status / 100 % 10);
  code[1] = static_cast<char>('0' + status / 10 % 10);
  code[2] = static_cast<char>('0' + status % 10);
  out.append(code, sizeof code);
  out += ' ';
  out += res.reason();
  out += "\r\n";
  for (const auto& field : res) {
    out += field.name_string();
    out += ": ";
    out += field.value();
    out += "\r\n";
  }
  out += "\r\n";
  out += res.body();
}

// What the worker's session registry needs of a session, whatever its stream type.
class SessionBase {
 public:
  virtual ~SessionBase() = default;
  virtual void CloseIfIdle() = 0;
  // Closes the connection if its deadline (read, write, handshake or linger timeout) has passed.
  virtual void CloseIfExpired(std::chrono::steady_clock::time_point now) = 0;
};

}  // namespace

struct HttpServer::Shared {
  const Config& config;
  Router& router;                         // everything about a request but its transport
  std::atomic<bool> stopping{false};      // set once by BeginShutdown; read by sessions between requests
  std::atomic<std::size_t> sessions{0};   // open sessions (all threads), for WaitDrained and kMaxConnections
  std::unique_ptr<net::ssl::context> tls; // set by Start() when config.tls(); read-only afterwards
};

struct HttpServer::Worker {
  Worker(unsigned i, Shared& s, ThreadCounters& c) : index(i), shared(s), counters(c) {}
  const unsigned index;
  Shared& shared;
  ThreadCounters& counters;
  // Sessions of this thread (touched only on it). Declared before ioc: destroying ioc destroys pending
  // handlers and with them sessions, which unregister here.
  std::unordered_set<SessionBase*> sessions;
  net::io_context ioc{1};  // run by exactly one thread
  net::executor_work_guard<net::io_context::executor_type> guard = net::make_work_guard(ioc);
  tcp::acceptor acceptor{ioc};
  tcp::acceptor admin_acceptor{ioc};  // open on worker 0 only, with --admin-listen (light traffic)
  net::steady_timer accept_retry{ioc};
  net::steady_timer sweep{ioc};  // kSweepInterval: closes sessions past their deadline
  // The sweeper's reading of the clock (this thread only): sessions set their deadlines from it.
  std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now();
  std::thread thread;
};

namespace {

// The worker's own executor type, not beast::tcp_stream's type-erased any_io_executor: Beast's composed
// reads and writes copy and destroy their stream's executor several times per operation, and erased copies
// cost ~2 % of the server's CPU under load (perf, issue 8); io_context::executor_type copies are a pointer.
using IoExecutor = net::io_context::executor_type;
using PlainStream = beast::basic_stream<tcp, IoExecutor>;
using PlainSocket = net::basic_stream_socket<tcp, IoExecutor>;
using TlsStream = beast::ssl_stream<PlainStream>;

// One connection. Stream is PlainStream (plain HTTP) or TlsStream (HTTPS):
// the only difference is the TLS handshake before the first request; timeouts, limits and closing act
// on the lowest layer (the PlainStream) in both cases.
template <typename Stream>
class Session : public SessionBase, public std::enable_shared_from_this<Session<Stream>> {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, PlainStream>;

  template <typename... StreamArgs>
  Session(HttpServer::Worker& w, Listener listener, StreamArgs&&... stream_args)
      : stream_(std::forward<StreamArgs>(stream_args)...), w_(w), listener_(listener) {
    w_.sessions.insert(this);
    // relaxed: a gauge for WaitDrained/kMaxConnections; nothing is published through it.
    w_.shared.sessions.fetch_add(1, std::memory_order_relaxed);
  }
  ~Session() override {
    w_.sessions.erase(this);
    w_.shared.sessions.fetch_sub(1, std::memory_order_relaxed);  // relaxed: see constructor
  }

  // Called on the worker's thread.
  void Run() {
    if constexpr (kTls) {
      phase_ = Phase::kHandshake;
      SetDeadline(kHandshakeTimeout);
      stream_.async_handshake(net::ssl::stream_base::server,
                              beast::bind_front_handler(&Session::OnHandshake, Self()));
    } else {
      WaitForRequest();
    }
  }

  // Shutdown: a connection waiting for (or reading the header of) its next request is closed now; one in
  // the middle of a request finishes it and closes after the response (keep_alive is off once stopping).
  void CloseIfIdle() override {
    // A pending read (or handshake) completes with operation_aborted.
    if (phase_ == Phase::kWaiting || phase_ == Phase::kHandshake) Lowest().close();
  }

  // The sweeper, on the worker's thread: a timeout (header 10 s, body 30 s, idle 60 s, write 30 s, TLS
  // handshake 10 s, linger 2 s) drops the connection without a response; its pending operation completes
  // with operation_aborted, which every handler takes as the end of the session, silently.
  void CloseIfExpired(std::chrono::steady_clock::time_point now) override {
    if (now < deadline_) return;
    deadline_ = kNoDeadline;
    Lowest().close();
  }

 private:
  enum class Phase { kHandshake, kWaiting, kBody, kHandling, kWriting, kLingering };

  static constexpr auto kNoDeadline = std::chrono::steady_clock::time_point::max();

  std::shared_ptr<Session> Self() { return this->shared_from_this(); }
  PlainStream& Lowest() { return beast::get_lowest_layer(stream_); }
  // The current phase must end within `timeout` (see kSweepInterval).
  void SetDeadline(std::chrono::steady_clock::duration timeout) { deadline_ = w_.now + timeout + kSweepInterval; }

  // A failed handshake (plain HTTP or an old TLS version on the TLS port, a scanner, a timeout) just ends
  // the connection: the client gets a TLS alert, the log stays quiet (a client could flood it).
  void OnHandshake(beast::error_code ec) {
    if (ec) return;
    WaitForRequest();
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
    // A new connection must send its first request within the header timeout; a kept-alive one may idle.
    SetDeadline(first_request_ ? kHeaderReadTimeout : kIdleTimeout);
    stream_.async_read_some(buffer_.prepare(kFirstReadBytes), beast::bind_front_handler(&Session::OnFirstBytes, Self()));
  }

  void OnFirstBytes(beast::error_code ec, std::size_t n) {
    if (ec) return OnReadError(ec, "read");
    buffer_.commit(n);
    ReadHeader();
  }

  void ReadHeader() {
    start_ = std::chrono::steady_clock::now();  // latency: first byte of the request .. response written
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
    // Route, Origin policy, size limit, preflight and token: all decided before any body byte is read; a
    // refused request with a body closes the connection (the body is drained by Linger, never buffered).
    Router::Admission ad = router().Admit(req.base(), listener_, kTls);
    route_ = ad.route;
    body_limit_ = ad.body_limit;
    if (ad.answer) {
      ad.answer->close = ad.answer->close || !parser_->is_done();
      return Send(std::move(*ad.answer));
    }
    parser_->body_limit(body_limit_);  // enforced while reading a chunked body
    if (parser_->is_done()) return Handle();
    phase_ = Phase::kBody;
    SetDeadline(kBodyReadTimeout);
    if (beast::iequals(req[http::field::expect], "100-continue")) {
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

  void ReadBody() {
    SetDeadline(kBodyReadTimeout);
    http::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&Session::OnReadBody, Self()));
  }

  void OnReadBody(beast::error_code ec, std::size_t) {
    if (ec) return OnReadError(ec, "read body");
    Handle();
  }

  // Read errors, expected endings first.
  void OnReadError(beast::error_code ec, const char* what) {
    // The client closed the connection between requests: the normal end of keep-alive.
    if (ec == http::error::end_of_stream || ec == net::error::eof) return;
    // A read timeout (header 10 s, body 30 s, idle 60 s: CloseIfExpired) or shutdown closed the connection
    // (operation_aborted, or any error of an operation that found it closed): no response, no log line.
    if (ec == net::error::operation_aborted || !Lowest().socket().is_open()) return;
    if (ec == http::error::header_limit) return ReplyProblem(Problem::HeaderTooLarge());
    if (ec == http::error::body_limit) {
      return Send(router().ProblemAnswer(Problem::BodyTooLarge(body_limit_), route_, &parser_->get().base(), true));
    }
    if (IsHttpParseError(ec) && ec != http::error::partial_message) {
      return ReplyProblem(Problem::BadRequest("the request is not valid HTTP/1.1: " + ec.message()));
    }
    Fail(ec, what);
  }

  void Handle() {
    phase_ = Phase::kHandling;
    deadline_ = kNoDeadline;  // the request's own deadline is the router's (--request-timeout)
    // The router answers exactly once, on this session's executor (inline or after the Store/Lookup).
    router().Handle(route_, parser_->get(), stream_.get_executor(), w_.counters,
                    [self = Self()](Router::Answer a) { self->Send(std::move(a)); });
  }

  // A transport-level problem (bad HTTP, 431): the connection closes after it.
  void ReplyProblem(const Problem& p) { Send(router().ProblemAnswer(p, route_, nullptr, /*close=*/true)); }

  void Send(Router::Answer a) {
    phase_ = Phase::kWriting;
    res_ = std::move(a.res);
    res_.version(version_);
    res_.keep_alive(keep_alive_ && !a.close && !shared().stopping.load());
    res_.prepare_payload();
    SerializeResponse(res_, wire_);
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
    if (ec) return Fail(ec, "write");
    if (!res_.keep_alive()) return Linger();
    parser_.reset();
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

  Stream stream_;
  HttpServer::Worker& w_;
  const Listener listener_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> res_;
  std::string wire_;  // res_ serialized (SerializeResponse); its capacity is reused by the next response
  Phase phase_ = Phase::kWaiting;
  Route route_ = Route::kNotFound;
  std::size_t body_limit_ = kMaxOtherBodyBytes;  // of route_, from Router::Admit
  unsigned version_ = 11;
  bool keep_alive_ = false;
  bool first_request_ = true;
  std::size_t drained_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point deadline_ = kNoDeadline;  // CloseIfExpired
};

void DoAccept(HttpServer::Worker& w, tcp::acceptor& acceptor, Listener listener);

void OnAccept(HttpServer::Worker& w, tcp::acceptor& acceptor, Listener listener, beast::error_code ec,
              PlainSocket socket) {
  if (ec == net::error::operation_aborted) return;  // acceptor closed by shutdown
  if (ec) {
    // Out of descriptors or kernel memory: wait a little instead of spinning on the error.
    Log(LogLevel::kWarn, "accept_error", {{"error", ec.message()}});
    w.accept_retry.expires_after(kAcceptRetryDelay);
    w.accept_retry.async_wait([&w, &acceptor, listener](beast::error_code tec) {
      if (!tec) DoAccept(w, acceptor, listener);
    });
    return;
  }
  if (w.shared.stopping.load()) return;  // the socket closes as it goes out of scope
  // relaxed: an approximate cap is enough (see Session constructor).
  if (w.shared.sessions.load(std::memory_order_relaxed) < kMaxConnections) {
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);  // responses are small; do not wait for Nagle
    if (listener == Listener::kMain && w.shared.tls) {
      std::make_shared<Session<TlsStream>>(w, listener, std::move(socket), *w.shared.tls)->Run();
    } else {
      std::make_shared<Session<PlainStream>>(w, listener, std::move(socket))->Run();
    }
  }
  DoAccept(w, acceptor, listener);
}

// Every kSweepInterval on the worker's thread: reads the clock once and closes the sessions past their
// deadline. Runs until Stop() stops the io_context.
void Sweep(HttpServer::Worker& w) {
  w.sweep.expires_after(kSweepInterval);
  w.sweep.async_wait([&w](beast::error_code ec) {
    if (ec) return;
    w.now = std::chrono::steady_clock::now();
    // Closing never destroys a session here (its pending handler holds it): iterating the set is safe.
    for (SessionBase* s : w.sessions) s->CloseIfExpired(w.now);
    Sweep(w);
  });
}

void DoAccept(HttpServer::Worker& w, tcp::acceptor& acceptor, Listener listener) {
  // Accepting into the worker's io_context yields a socket bound to its concrete executor type (PlainSocket).
  acceptor.async_accept(w.ioc, [&w, &acceptor, listener](beast::error_code ec, PlainSocket socket) {
    OnAccept(w, acceptor, listener, ec, std::move(socket));
  });
}

// TLS 1.2+ server context from PEM files. Throws (boost::system::system_error, std::runtime_error) on a
// missing/invalid certificate or key, or a key that does not match the certificate.
std::unique_ptr<net::ssl::context> MakeTlsContext(const Config& config) {
  auto ctx = std::make_unique<net::ssl::context>(net::ssl::context::tls_server);
  ctx->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                   net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 | net::ssl::context::no_tlsv1_1 |
                   net::ssl::context::single_dh_use);
  // Belt and braces: the protocol floor does not depend on the option bits or the system openssl.cnf.
  if (SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION) != 1) {
    throw std::runtime_error("cannot set the TLS 1.2 minimum protocol version");
  }
  SSL_CTX_set_options(ctx->native_handle(), SSL_OP_NO_RENEGOTIATION);
  ctx->use_certificate_chain_file(config.tls_cert);
  ctx->use_private_key_file(config.tls_key, net::ssl::context::pem);
  if (SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
    throw std::runtime_error("--tls-key does not match --tls-cert");
  }
  return ctx;
}

}  // namespace

HttpServer::HttpServer(const Config& config, Router& router, Metrics& metrics)
    : metrics_(metrics), shared_(new Shared{config, router, {}, {}, {}}) {}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Start() {
  const Config& config = shared_->config;
  if (config.tls()) shared_->tls = MakeTlsContext(config);
  const auto address = net::ip::make_address(config.listen);
  for (unsigned i = 0; i < config.threads; ++i) {
    auto w = std::make_unique<Worker>(i, *shared_, metrics_.ForThread(i));
    const tcp::endpoint ep(address, i == 0 ? config.port : port_);
    w->acceptor.open(ep.protocol());
    w->acceptor.set_option(net::socket_base::reuse_address(true));
    w->acceptor.set_option(ReusePort(true));  // every thread binds its own acceptor to the same port
    w->acceptor.bind(ep);
    w->acceptor.listen(net::socket_base::max_listen_connections);
    if (i == 0) port_ = w->acceptor.local_endpoint().port();  // the actual port when config.port is 0
    workers_.push_back(std::move(w));
  }
  if (config.admin_split()) {
    Worker& w0 = *workers_.front();
    const tcp::endpoint ep(net::ip::make_address(config.admin_address), config.admin_port);
    w0.admin_acceptor.open(ep.protocol());
    w0.admin_acceptor.set_option(net::socket_base::reuse_address(true));
    w0.admin_acceptor.bind(ep);
    w0.admin_acceptor.listen(net::socket_base::max_listen_connections);
    admin_port_ = w0.admin_acceptor.local_endpoint().port();
    DoAccept(w0, w0.admin_acceptor, Listener::kAdmin);
  }
  for (auto& w : workers_) {
    DoAccept(*w, w->acceptor, Listener::kMain);
    Sweep(*w);
    Worker* wp = w.get();
    wp->thread = std::thread([wp] {
      SetThreadName("sg-io-" + std::to_string(wp->index));
      for (;;) {
        try {
          wp->ioc.run();
          return;
        } catch (const std::exception& e) {  // handlers do not throw; keep serving if one ever does
          Log(LogLevel::kError, "error", {{"where", "io thread"}, {"what", e.what()}});
        }
      }
    });
  }
}

void HttpServer::BeginShutdown() {
  shared_->stopping.store(true);
  for (auto& w : workers_) {
    Worker* wp = w.get();
    net::post(wp->ioc, [wp] {
      beast::error_code ignored;
      wp->acceptor.close(ignored);
      wp->admin_acceptor.close(ignored);
      wp->accept_retry.cancel();
      const std::vector<SessionBase*> sessions(wp->sessions.begin(), wp->sessions.end());
      for (SessionBase* s : sessions) s->CloseIfIdle();
    });
  }
}

bool HttpServer::WaitDrained(std::chrono::steady_clock::time_point deadline) const {
  constexpr auto kPoll = std::chrono::milliseconds(10);
  while (shared_->sessions.load(std::memory_order_relaxed) != 0) {  // relaxed: see Session constructor
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(kPoll);
  }
  return true;
}

void HttpServer::Stop() {
  for (auto& w : workers_) {
    w->guard.reset();
    w->ioc.stop();
  }
  for (auto& w : workers_) {
    if (w->thread.joinable()) w->thread.join();
  }
}

}  // namespace scangate::server
