#include "server/http_server.h"

#include <algorithm>
#include <optional>
#include <thread>
#include <unordered_set>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
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
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
constexpr std::string_view kJson = "application/json";
constexpr std::string_view kProblemJson = "application/problem+json";
constexpr std::string_view kPrometheusText = "text/plain; version=0.0.4; charset=utf-8";

using ReusePort = net::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;

bool IsHttpParseError(const beast::error_code& ec) {
  return &ec.category() == &http::make_error_code(http::error::bad_target).category();
}

// Connection endings a client causes routinely (closing mid-request, resets): not worth a log line.
bool IsPeerGone(const beast::error_code& ec) {
  return ec == net::error::connection_reset || ec == net::error::broken_pipe || ec == net::error::eof ||
         ec == http::error::end_of_stream || ec == http::error::partial_message;
}

class Session;

}  // namespace

struct HttpServer::Shared {
  const Config& config;
  Service& service;
  std::atomic<bool> stopping{false};      // set once by BeginShutdown; read by sessions between requests
  std::atomic<std::size_t> sessions{0};   // open sessions (all threads), for WaitDrained and kMaxConnections
};

struct HttpServer::Worker {
  Worker(unsigned i, Shared& s, ThreadCounters& c) : index(i), shared(s), counters(c) {}
  const unsigned index;
  Shared& shared;
  ThreadCounters& counters;
  // Sessions of this thread (touched only on it). Declared before ioc: destroying ioc destroys pending
  // handlers and with them sessions, which unregister here.
  std::unordered_set<Session*> sessions;
  net::io_context ioc{1};  // run by exactly one thread
  net::executor_work_guard<net::io_context::executor_type> guard = net::make_work_guard(ioc);
  tcp::acceptor acceptor{ioc};
  net::steady_timer accept_retry{ioc};
  std::thread thread;
};

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket&& socket, HttpServer::Worker& w) : stream_(std::move(socket)), w_(w) {
    w_.sessions.insert(this);
    // relaxed: a gauge for WaitDrained/kMaxConnections; nothing is published through it.
    w_.shared.sessions.fetch_add(1, std::memory_order_relaxed);
  }
  ~Session() {
    w_.sessions.erase(this);
    w_.shared.sessions.fetch_sub(1, std::memory_order_relaxed);  // relaxed: see constructor
  }

  // Called on the worker's thread.
  void Run() { WaitForRequest(); }

  // Shutdown: a connection waiting for (or reading the header of) its next request is closed now; one in
  // the middle of a request finishes it and closes after the response (keep_alive is off once stopping).
  void CloseIfIdle() {
    if (phase_ == Phase::kWaiting) stream_.close();  // pending read completes with operation_aborted
  }

 private:
  enum class Phase { kWaiting, kBody, kHandling, kWriting, kLingering };

  const HttpServer::Shared& shared() const { return w_.shared; }
  Service& service() { return w_.shared.service; }

  void WaitForRequest() {
    phase_ = Phase::kWaiting;
    if (w_.shared.stopping.load()) return;  // last reference dropped: the socket closes
    if (buffer_.size() > 0) {  // a pipelined request is already here
      ReadHeader();
      return;
    }
    // A new connection must send its first request within the header timeout; a kept-alive one may idle.
    stream_.expires_after(first_request_ ? std::chrono::duration_cast<std::chrono::seconds>(kHeaderReadTimeout)
                                         : std::chrono::duration_cast<std::chrono::seconds>(kIdleTimeout));
    stream_.async_read_some(buffer_.prepare(kFirstReadBytes),
                            beast::bind_front_handler(&Session::OnFirstBytes, shared_from_this()));
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
    stream_.expires_after(kHeaderReadTimeout);
    http::async_read_header(stream_, buffer_, *parser_,
                            beast::bind_front_handler(&Session::OnReadHeader, shared_from_this()));
  }

  void OnReadHeader(beast::error_code ec, std::size_t) {
    if (ec) return OnReadError(ec, "read header");
    first_request_ = false;
    const auto& req = parser_->get();
    route_ = RouteOf(req.target());
    version_ = req.version();
    keep_alive_ = req.keep_alive();
    const std::size_t limit = BodyLimitFor(route_);
    if (const auto len = parser_->content_length(); len && *len > limit) {
      return ReplyProblem(Problem::BodyTooLarge(limit), /*close=*/true);
    }
    parser_->body_limit(limit);  // enforced while reading a chunked body
    if (parser_->is_done()) return Handle();
    phase_ = Phase::kBody;
    stream_.expires_after(kBodyReadTimeout);
    if (beast::iequals(req[http::field::expect], "100-continue")) {
      net::async_write(stream_, net::buffer(kContinue.data(), kContinue.size()),
                       beast::bind_front_handler(&Session::OnContinueWritten, shared_from_this()));
      return;
    }
    ReadBody();
  }

  void OnContinueWritten(beast::error_code ec, std::size_t) {
    if (ec) return Fail(ec, "write 100-continue");
    ReadBody();
  }

  void ReadBody() {
    stream_.expires_after(kBodyReadTimeout);
    http::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&Session::OnReadBody, shared_from_this()));
  }

  void OnReadBody(beast::error_code ec, std::size_t) {
    if (ec) return OnReadError(ec, "read body");
    Handle();
  }

  // Read errors, expected endings first.
  void OnReadError(beast::error_code ec, const char* what) {
    // The client closed the connection between requests: the normal end of keep-alive.
    if (ec == http::error::end_of_stream || ec == net::error::eof) return;
    // A read timeout (header 10 s, body 30 s, idle 60 s) fired: drop the connection without a response.
    if (ec == beast::error::timeout) return;
    // Shutdown closed an idle connection.
    if (ec == net::error::operation_aborted) return;
    if (ec == http::error::header_limit) return ReplyProblem(Problem::HeaderTooLarge(), true);
    if (ec == http::error::body_limit) return ReplyProblem(Problem::BodyTooLarge(BodyLimitFor(route_)), true);
    if (IsHttpParseError(ec) && ec != http::error::partial_message) {
      return ReplyProblem(Problem::BadRequest("the request is not valid HTTP/1.1: " + ec.message()), true);
    }
    Fail(ec, what);
  }

  void Handle() {
    phase_ = Phase::kHandling;
    stream_.expires_never();
    awaiting_reply_ = true;
    try {
      Dispatch();
    } catch (const std::exception& e) {
      // Exceptions stop here: a 500 problem, the reason only in the log (digest/JSON errors carry no key).
      Log(LogLevel::kError, "error", {{"where", "request handler"}, {"what", e.what()}});
      if (awaiting_reply_) ReplyProblem(Problem::Internal(), true);
    }
  }

  void Dispatch() {
    auto& req = parser_->get();
    if (route_ == Route::kNotFound) return ReplyProblem(Problem::NotFound(req.target()));
    if (req.method_string() != AllowedMethod(route_)) {
      return ReplyProblem(Problem::MethodNotAllowed(req.method_string(), route_));
    }
    switch (route_) {
      case Route::kHealthz:
        return Reply(http::status::ok, R"({"status":"ok"})", kJson);
      case Route::kReadyz:
        if (service().ready()) return Reply(http::status::ok, R"({"status":"ready"})", kJson);
        return ReplyProblem(Problem::Unavailable(!service().warm() ? "warm start from PostgreSQL still running"
                                                                   : "PostgreSQL is unavailable"));
      case Route::kMetrics:
        return Reply(http::status::ok, RenderPrometheus(service().Snapshot()), kPrometheusText);
      case Route::kStats:
        return Reply(http::status::ok, RenderStatsJson(service().Snapshot()), kJson);
      case Route::kObserve:
      case Route::kObserveBatch:
        break;
      case Route::kNotFound:
        return;  // handled above
    }
    if (auto p = CheckContentType(req[http::field::content_type])) return ReplyProblem(*p);
    if (route_ == Route::kObserve) {
      auto parsed = ParseObserve(req.body());
      if (auto* p = std::get_if<Problem>(&parsed)) return ReplyProblem(*p);
      service().Observe(std::get<Observation>(parsed), stream_.get_executor(), w_.counters,
                        [self = shared_from_this()](std::variant<Verdict, Problem> r) {
                          if (auto* p = std::get_if<Problem>(&r)) return self->ReplyProblem(*p);
                          const Verdict& v = std::get<Verdict>(r);
                          self->Reply(v.is_new ? http::status::created : http::status::ok, VerdictBody(v), kJson);
                        });
      return;
    }
    auto parsed = ParseBatch(req.body());
    if (auto* p = std::get_if<Problem>(&parsed)) return ReplyProblem(*p);
    service().ObserveBatch(std::get<BatchRequest>(parsed), stream_.get_executor(), w_.counters,
                           [self = shared_from_this()](std::variant<std::vector<Verdict>, Problem> r) {
                             if (auto* p = std::get_if<Problem>(&r)) return self->ReplyProblem(*p);
                             self->Reply(http::status::ok, BatchBody(std::get<std::vector<Verdict>>(r)), kJson);
                           });
  }

  void ReplyProblem(const Problem& p, bool close = false) {
    res_ = {};
    if (p.status == 503) res_.set(http::field::retry_after, "1");
    if (p.status == 405) res_.set(http::field::allow, AllowedMethod(route_));
    Send(static_cast<http::status>(p.status), ProblemBody(p), kProblemJson, close);
  }

  void Reply(http::status status, std::string body, std::string_view content_type) {
    res_ = {};
    Send(status, std::move(body), content_type, false);
  }

  void Send(http::status status, std::string body, std::string_view content_type, bool close) {
    awaiting_reply_ = false;
    phase_ = Phase::kWriting;
    res_.version(version_);
    res_.result(status);
    res_.set(http::field::content_type, content_type);
    res_.body() = std::move(body);
    res_.keep_alive(keep_alive_ && !close && !shared().stopping.load());
    res_.prepare_payload();
    stream_.expires_after(kWriteTimeout);
    http::async_write(stream_, res_, beast::bind_front_handler(&Session::OnWrite, shared_from_this()));
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
    WaitForRequest();
  }

  // After a closing response: half-close, then discard what the client still sends (e.g. the rest of a
  // too-large body) for a short while, so it reads the response instead of a reset.
  void Linger() {
    phase_ = Phase::kLingering;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    buffer_.clear();
    stream_.expires_after(kLingerTimeout);
    DrainSome();
  }

  void DrainSome() {
    stream_.async_read_some(buffer_.prepare(kFirstReadBytes), [self = shared_from_this()](beast::error_code ec,
                                                                                          std::size_t n) {
      self->drained_ += n;
      self->buffer_.clear();
      // Any error (EOF from the client, the linger timeout, a reset) or the drain cap ends the session.
      if (ec || self->drained_ > kLingerDrainBytes) return;
      self->DrainSome();
    });
  }

  void Fail(beast::error_code ec, const char* what) {
    if (IsPeerGone(ec) || ec == net::error::operation_aborted || ec == beast::error::timeout) return;
    Log(LogLevel::kWarn, "connection_error", {{"op", what}, {"error", ec.message()}});
  }

  beast::tcp_stream stream_;
  HttpServer::Worker& w_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> res_;
  Phase phase_ = Phase::kWaiting;
  Route route_ = Route::kNotFound;
  unsigned version_ = 11;
  bool keep_alive_ = false;
  bool first_request_ = true;
  bool awaiting_reply_ = false;
  std::size_t drained_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

void DoAccept(HttpServer::Worker& w);

void OnAccept(HttpServer::Worker& w, beast::error_code ec, tcp::socket socket) {
  if (ec == net::error::operation_aborted) return;  // acceptor closed by shutdown
  if (ec) {
    // Out of descriptors or kernel memory: wait a little instead of spinning on the error.
    Log(LogLevel::kWarn, "accept_error", {{"error", ec.message()}});
    w.accept_retry.expires_after(kAcceptRetryDelay);
    w.accept_retry.async_wait([&w](beast::error_code tec) {
      if (!tec) DoAccept(w);
    });
    return;
  }
  if (w.shared.stopping.load()) return;  // the socket closes as it goes out of scope
  // relaxed: an approximate cap is enough (see Session constructor).
  if (w.shared.sessions.load(std::memory_order_relaxed) < kMaxConnections) {
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);  // responses are small; do not wait for Nagle
    std::make_shared<Session>(std::move(socket), w)->Run();
  }
  DoAccept(w);
}

void DoAccept(HttpServer::Worker& w) {
  w.acceptor.async_accept(w.ioc, [&w](beast::error_code ec, tcp::socket socket) {
    OnAccept(w, ec, std::move(socket));
  });
}

}  // namespace

HttpServer::HttpServer(const Config& config, Service& service, Metrics& metrics)
    : metrics_(metrics), shared_(new Shared{config, service}) {}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Start() {
  const Config& config = shared_->config;
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
  for (auto& w : workers_) {
    DoAccept(*w);
    Worker* wp = w.get();
    wp->thread = std::thread([wp] {
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
      wp->accept_retry.cancel();
      const std::vector<Session*> sessions(wp->sessions.begin(), wp->sessions.end());
      for (Session* s : sessions) s->CloseIfIdle();
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
