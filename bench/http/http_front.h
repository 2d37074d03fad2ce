// Minimal keep-alive HTTP/1.1 front shared by the load-benchmark baselines (ceiling_server, naive_server).
// Same shape as scangate's front: N threads, each running its own io_context with its own SO_REUSEPORT
// acceptor; a connection lives on the thread that accepted it, so no strands are needed.
// Benchmark code, not production code: it keeps only the limits a load test needs.
#pragma once

#include <sys/socket.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace bench_http {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;
// Delivers the response for one request. Call exactly once, from any thread.
using Reply = std::function<void(Response)>;
// Called on the session's io thread with a complete request; must not block.
using Handler = std::function<void(Request&, Reply)>;

constexpr std::uint64_t kMaxBodyBytes = 16 * 1024;           // 413 above (same as scangate's /observe)
constexpr std::chrono::seconds kIdleTimeout{60};              // keep-alive idle limit
constexpr int kListenBacklog = 4096;                          // connections waiting for accept

inline Response MakeResponse(http::status status, std::string body, unsigned version) {
  Response res{status, version};
  res.set(http::field::content_type, "application/json");
  res.body() = std::move(body);
  return res;
}

// One connection: read a request, hand it to the handler, write its reply, repeat.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const Handler& handler) : stream_(std::move(socket)), handler_(handler) {}

  void Run() { DoRead(); }

 private:
  void DoRead() {
    parser_.emplace();
    parser_->body_limit(kMaxBodyBytes);
    stream_.expires_after(kIdleTimeout);
    http::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&Session::OnRead, shared_from_this()));
  }

  void OnRead(beast::error_code ec, std::size_t) {
    if (ec == http::error::end_of_stream) {  // client closed between requests: the normal end
      beast::error_code ignored;
      stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
      return;
    }
    if (ec == http::error::body_limit) {
      Write(MakeResponse(http::status::payload_too_large, R"({"error":"body-too-large"})", 11), false);
      return;
    }
    if (ec) return;  // reset, timeout (operation_aborted / timeout): drop the connection
    Request req = parser_->release();
    const bool keep_alive = req.keep_alive();
    auto self = shared_from_this();
    auto executor = stream_.get_executor();
    // dispatch: runs inline when the handler replies on this io thread (ceiling), posts otherwise (naive).
    handler_(req, [self, executor, keep_alive](Response res) {
      net::dispatch(executor, [self, res = std::move(res), keep_alive]() mutable {
        self->Write(std::move(res), keep_alive);
      });
    });
  }

  void Write(Response res, bool keep_alive) {
    res_ = std::move(res);
    res_.keep_alive(keep_alive);
    res_.prepare_payload();
    http::async_write(stream_, res_,
                      beast::bind_front_handler(&Session::OnWrite, shared_from_this(), keep_alive));
  }

  void OnWrite(bool keep_alive, beast::error_code ec, std::size_t) {
    if (ec) return;
    if (!keep_alive) {
      beast::error_code ignored;
      stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
      return;
    }
    DoRead();
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  Response res_;
  const Handler& handler_;
};

// One acceptor per io thread, all bound to the same port with SO_REUSEPORT (the kernel spreads connections).
class Listener : public std::enable_shared_from_this<Listener> {
 public:
  Listener(net::io_context& io, const tcp::endpoint& endpoint, const Handler& handler)
      : io_(io), acceptor_(io), handler_(handler) {
    using reuse_port = net::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;
    acceptor_.open(endpoint.protocol());
    acceptor_.set_option(net::socket_base::reuse_address(true));
    acceptor_.set_option(reuse_port(true));
    acceptor_.bind(endpoint);
    acceptor_.listen(kListenBacklog);
  }

  void Run() { DoAccept(); }

 private:
  void DoAccept() {
    acceptor_.async_accept(io_, beast::bind_front_handler(&Listener::OnAccept, shared_from_this()));
  }
  void OnAccept(beast::error_code ec, tcp::socket socket) {
    if (!ec) {
      socket.set_option(tcp::no_delay(true));
      std::make_shared<Session>(std::move(socket), handler_)->Run();
    }
    DoAccept();
  }

  net::io_context& io_;
  tcp::acceptor acceptor_;
  const Handler& handler_;
};

// Runs `threads` io threads serving `handler` on 127.0.0.1:port until SIGINT/SIGTERM. Returns the exit code.
inline int Serve(unsigned short port, unsigned threads, const Handler& handler) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  const tcp::endpoint endpoint{net::ip::make_address("0.0.0.0"), port};
  std::vector<std::unique_ptr<net::io_context>> ios;
  for (unsigned i = 0; i < threads; ++i) {
    ios.push_back(std::make_unique<net::io_context>(1));
    std::make_shared<Listener>(*ios.back(), endpoint, handler)->Run();
  }
  net::signal_set signals(*ios.front(), SIGINT, SIGTERM);
  signals.async_wait([&](beast::error_code, int) {
    for (auto& io : ios) io->stop();
  });
  std::cerr << R"({"event":"listening","port":)" << port << R"(,"threads":)" << threads << "}" << std::endl;
  std::vector<std::thread> pool;
  for (unsigned i = 1; i < threads; ++i) pool.emplace_back([&, i] { ios[i]->run(); });
  ios.front()->run();
  for (auto& t : pool) t.join();
  return 0;
}

// Tiny flag reader: --name VALUE or --name=VALUE. Unknown flags are an error.
class Flags {
 public:
  Flags(int argc, char** argv) : args_(argv + 1, argv + argc) {}

  std::string Get(std::string_view name, std::string fallback) {
    const std::string flag = "--" + std::string(name);
    for (std::size_t i = 0; i < args_.size(); ++i) {
      if (args_[i] == flag && i + 1 < args_.size()) {
        used_.push_back(i);
        used_.push_back(i + 1);
        return args_[i + 1];
      }
      if (args_[i].rfind(flag + "=", 0) == 0) {
        used_.push_back(i);
        return args_[i].substr(flag.size() + 1);
      }
    }
    return fallback;
  }

  unsigned GetUnsigned(std::string_view name, unsigned fallback) {
    const std::string text = Get(name, std::to_string(fallback));
    unsigned value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc{} || end != text.data() + text.size()) {
      throw std::invalid_argument("--" + std::string(name) + " wants a non-negative integer, got '" + text + "'");
    }
    return value;
  }

  // Throws when an argument was not consumed by Get (typo guard).
  void CheckAllUsed() const {
    for (std::size_t i = 0; i < args_.size(); ++i) {
      bool used = false;
      for (auto u : used_) used = used || u == i;
      if (!used) throw std::invalid_argument("unknown argument '" + args_[i] + "'");
    }
  }

 private:
  std::vector<std::string> args_;
  std::vector<std::size_t> used_;
};

}  // namespace bench_http
