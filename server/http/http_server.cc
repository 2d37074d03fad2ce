#include "server/http/http_server.h"

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/json/array.hpp>
#include <boost/system/error_code.hpp>

#include "core/thread_name.h"
#include "server/http/address_key.h"
#include "server/http/connection_limit.h"
#include "server/http/session.h"
#include "server/http/sweeper.h"
#include "server/http/tls_context.h"
#include "server/http/worker.h"
#include "server/log.h"

namespace scangate::server {
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

using ReusePort = net::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;

void DoAccept(HttpServer::Worker& w, tcp::acceptor& acceptor, Listener listener);

// The client address's slot on `listener` (--max-connections-per-address, --admin-max-connections-per-address), or
// nullopt when the address is past its share. A peer in --proxy-protocol-from (`proxied`) is a load balancer: it
// takes none here; the session takes its client's once the PROXY header names it (server/http/session.cc).
std::optional<ConnectionLimiter::Slot> AddressSlot(HttpServer::Shared& shared, Listener listener,
                                                   const net::ip::address& peer, bool proxied) {
  if (proxied) return ConnectionLimiter::Slot();
  AddressKeyBuffer buf{};
  ConnectionLimiter& limiter = listener == Listener::kAdmin ? shared.admin_per_address : shared.per_address;
  return limiter.Acquire(AddressKey(peer, shared.config.ipv6_prefix_length, buf));
}

void OnAccept(HttpServer::Worker& w, tcp::acceptor& acceptor, Listener listener, boost::system::error_code ec,
              PlainSocket socket) {
  if (ec == net::error::operation_aborted) return;  // acceptor closed by shutdown
  if (ec) {
    // Out of descriptors or kernel memory: wait a little instead of spinning on the error.
    Log(LogLevel::kWarn, "accept_error", {{"error", ec.message()}});
    w.accept_retry.expires_after(kAcceptRetryDelay);
    w.accept_retry.async_wait([&w, &acceptor, listener](boost::system::error_code tec) {
      if (!tec) DoAccept(w, acceptor, listener);
    });
    return;
  }
  if (w.shared.stopping.load()) return;  // the socket closes as it goes out of scope
  // The peer as accept() returned it (Worker::accept_peer): read once, so the slot taken is the slot released.
  const net::ip::address peer = (listener == Listener::kAdmin ? w.admin_accept_peer : w.accept_peer).address();
  // relaxed: approximate caps are enough (see the Session constructor, server/http/session.cc).
  const std::size_t open = w.shared.listener_sessions[static_cast<std::size_t>(listener)].load(std::memory_order_relaxed);
  if (open >= (listener == Listener::kAdmin ? kMaxAdminConnections : kMaxConnections)) {
    w.counters.refused_full.Inc();
    return DoAccept(w, acceptor, listener);  // the socket closes as it goes out of scope
  }
  // Past the address's share: closed at once, unread.
  const bool proxied = listener == Listener::kMain && !w.shared.proxy_sources.empty() &&
                       w.shared.proxy_sources.Contains(peer);
  std::optional<ConnectionLimiter::Slot> slot = AddressSlot(w.shared, listener, peer, proxied);
  if (!slot) {
    w.counters.refused_per_address.Inc();
    return DoAccept(w, acceptor, listener);
  }
  boost::system::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);  // responses are small; do not wait for Nagle
  StartSession(w, listener, std::move(socket), peer, std::move(*slot), proxied);
  DoAccept(w, acceptor, listener);
}

void DoAccept(HttpServer::Worker& w, tcp::acceptor& acceptor, Listener listener) {
  // Accepting into the worker's io_context yields a socket bound to its concrete executor type (PlainSocket); the
  // peer's endpoint comes from accept() itself.
  tcp::endpoint& peer = listener == Listener::kAdmin ? w.admin_accept_peer : w.accept_peer;
  acceptor.async_accept(w.ioc, peer, [&w, &acceptor, listener](boost::system::error_code ec, PlainSocket socket) {
    OnAccept(w, acceptor, listener, ec, std::move(socket));
  });
}

}  // namespace

HttpServer::HttpServer(const Config& config, Router& router, Metrics& metrics)
    : metrics_(metrics), shared_(new Shared(config, router)) {}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Start() {
  const Config& config = shared_->config;
  if (config.tls()) shared_->SetTls(MakeTlsContext(config));
  // --proxy-protocol-from names networks: any host in them may claim any client address, and so escape every
  // per-address limit or spend another client's (docs/security.md "Threat model").
  if (const auto networks = shared_->proxy_sources.Networks(); !networks.empty()) {
    Log(LogLevel::kWarn, "proxy_protocol_networks",
        {{"networks", boost::json::array(networks.begin(), networks.end())},
         {"message", "every host in these --proxy-protocol-from networks may claim any client address for the "
                     "per-address limits; list only the load balancers' own addresses"}});
  }
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

bool HttpServer::ReloadTls() {
  if (!shared_->config.tls()) return false;
  shared_->SetTls(MakeTlsContext(shared_->config));  // throws before the swap: the old context stays
  return true;
}

void HttpServer::BeginShutdown() {
  shared_->stopping.store(true);
  for (auto& w : workers_) {
    Worker* wp = w.get();
    net::post(wp->ioc, [wp] {
      boost::system::error_code ignored;
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
  while (shared_->sessions.load(std::memory_order_relaxed) != 0) {  // relaxed: see the Session constructor
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
