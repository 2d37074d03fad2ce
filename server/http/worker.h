// One I/O thread of the HTTP server (HttpServer::Worker: its io_context, acceptors, sweeper timer and the
// registry of its sessions) and what every thread shares (HttpServer::Shared). Internal to server/http/: the
// listener (http_server.cc), the sessions (session.h) and the sweeper (sweeper.h) meet here; the public
// interface is server/http/http_server.h.
// Invariant: a Worker is touched only on its own thread (its io_context is run by exactly one thread, no
// strands); Shared is written only through its atomics, the internally locked limiters and `tls` (under
// `tls_mu`: swapped by a SIGHUP reload, read once per new connection).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <thread>
#include <unordered_set>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "core/mutex.h"
#include "server/http/connection_limit.h"
#include "server/http/http_server.h"
#include "server/http/proxy_protocol.h"

namespace scangate::server {

// What the worker's session registry needs of a session, whatever its stream type (server/http/session.h).
class SessionBase {
 public:
  virtual ~SessionBase() = default;
  virtual void CloseIfIdle() = 0;
  // Closes the connection if its deadline (read, write, handshake or linger timeout) has passed.
  virtual void CloseIfExpired(std::chrono::steady_clock::time_point now) = 0;
};

// The worker's own executor type, not beast::tcp_stream's type-erased any_io_executor: Beast's composed
// reads and writes copy and destroy their stream's executor several times per operation, and erased copies
// cost ~2 % of the server's CPU under load (perf, issue 8); io_context::executor_type copies are a pointer.
using IoExecutor = boost::asio::io_context::executor_type;
// What a worker's acceptor yields: a socket bound to the worker's concrete executor type.
using PlainSocket = boost::asio::basic_stream_socket<boost::asio::ip::tcp, IoExecutor>;

struct HttpServer::Shared {
  Shared(const Config& c, Router& r) : config(c), router(r) {}
  const Config& config;
  Router& router;                         // everything about a request but its transport
  std::atomic<bool> stopping{false};      // set once by BeginShutdown; read by sessions between requests
  std::atomic<std::size_t> sessions{0};   // open sessions (all threads, both listeners), for WaitDrained
  // Open sessions per listener (index: Listener), for its cap (kMaxConnections, kMaxAdminConnections): counted
  // apart, never one by subtracting the other (two relaxed loads apart could underflow: issue 43).
  std::array<std::atomic<std::size_t>, 2> listener_sessions{};
  // The TLS context of new connections (config.tls()): set by Start(), swapped by HttpServer::ReloadTls (SIGHUP).
  // A session keeps the context it was made with (a shared_ptr), so a swap never pulls one from under it.
  std::shared_ptr<boost::asio::ssl::context> Tls() const {
    MutexLock lock(&tls_mu);
    return tls;
  }
  void SetTls(std::shared_ptr<boost::asio::ssl::context> c) {
    MutexLock lock(&tls_mu);
    tls = std::move(c);
    tls_current.store(tls.get(), std::memory_order_relaxed);  // relaxed: compared only, never dereferenced
  }
  // The context Tls() returns now, as an address to compare with a session's own (mTLS: a connection verified
  // by an older context — another CA file or CRL — closes after its next answer). Exact: a session's context
  // stays alive while it holds it, so no newer context can share its address.
  std::atomic<const boost::asio::ssl::context*> tls_current{nullptr};
  mutable Mutex tls_mu;
  std::shared_ptr<boost::asio::ssl::context> tls ABSL_GUARDED_BY(tls_mu);
  ConnectionLimiter per_address{config.max_connections_per_address};  // main listener
  ConnectionLimiter admin_per_address{config.admin_max_connections_per_address};  // admin listener
  const ProxySources proxy_sources = ParseProxySources(config.proxy_protocol_from);  // checked by ParseConfig
};

struct HttpServer::Worker {
  Worker(unsigned i, Shared& s, ThreadCounters& c) : index(i), shared(s), counters(c) {}
  const unsigned index;
  Shared& shared;
  ThreadCounters& counters;
  // Sessions of this thread (touched only on it). Declared before ioc: destroying ioc destroys pending
  // handlers and with them sessions, which unregister here.
  std::unordered_set<SessionBase*> sessions;
  boost::asio::io_context ioc{1};  // run by exactly one thread
  boost::asio::executor_work_guard<IoExecutor> guard = boost::asio::make_work_guard(ioc);
  boost::asio::ip::tcp::acceptor acceptor{ioc};
  // Open on worker 0 only, with --admin-listen (light traffic).
  boost::asio::ip::tcp::acceptor admin_acceptor{ioc};
  // The peer of the connection each acceptor is accepting, filled by accept() itself: the one reading of a
  // connection's address (a second getpeername() fails once the peer has reset).
  boost::asio::ip::tcp::endpoint accept_peer, admin_accept_peer;
  boost::asio::steady_timer accept_retry{ioc};
  boost::asio::steady_timer sweep{ioc};  // kSweepInterval: closes sessions past their deadline
  // The sweeper's reading of the clock (this thread only): sessions set their deadlines from it.
  std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now();
  std::thread thread;
};

}  // namespace scangate::server
