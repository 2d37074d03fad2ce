// A TCP proxy for tests of what a client does when the network goes silent: it forwards 127.0.0.1:port() to a
// target port until Blackhole(true), from which on it reads nothing, forwards nothing, accepts no new connection
// and closes nothing — a network that drops every packet as far as the client can tell from its answers (its own
// kernel still acknowledges, so only the client's own bounds can notice). Blackhole(false) forwards again;
// CloseAll() ends every connection (a test releases a client stuck on old code with it). One thread; test-only.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace scangate::test {

class TcpProxy {
 public:
  explicit TcpProxy(std::uint16_t target) : target_(target) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listener_, 64) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      throw std::runtime_error("TcpProxy: cannot listen");
    }
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Run(); });
  }
  ~TcpProxy() {
    stop_.store(true);
    thread_.join();
    CloseAll();
    ::close(listener_);
  }
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  std::uint16_t port() const { return port_; }
  void Blackhole(bool on) { blackhole_.store(on); }
  void CloseAll() {
    std::lock_guard lock(mu_);
    for (const Pair& p : pairs_) {
      ::close(p.client);
      ::close(p.server);
    }
    pairs_.clear();
  }

 private:
  struct Pair {
    int client, server;
  };

  int Connect() const {
    const int s = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(target_);
    if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(s);
      return -1;
    }
    return s;
  }

  // Copies what `from` holds to `to`; false when `from` ended or failed.
  static bool Forward(int from, int to) {
    char buf[16384];
    const ssize_t n = ::recv(from, buf, sizeof buf, MSG_DONTWAIT);
    if (n <= 0) return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    for (ssize_t off = 0; off < n;) {
      const ssize_t w = ::send(to, buf + off, static_cast<std::size_t>(n - off), MSG_NOSIGNAL);
      if (w <= 0) return false;
      off += w;
    }
    return true;
  }

  void Run() {
    while (!stop_.load()) {
      if (blackhole_.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        continue;
      }
      std::vector<pollfd> fds{{listener_, POLLIN, 0}};
      {
        std::lock_guard lock(mu_);
        for (const Pair& p : pairs_) {
          fds.push_back({p.client, POLLIN, 0});
          fds.push_back({p.server, POLLIN, 0});
        }
      }
      if (::poll(fds.data(), fds.size(), 5) <= 0) continue;
      if (blackhole_.load()) continue;  // turned on while waiting: what arrived stays unread
      std::lock_guard lock(mu_);
      for (std::size_t i = 1; i < fds.size(); i += 2) {
        const auto it =
            std::find_if(pairs_.begin(), pairs_.end(), [&](const Pair& p) { return p.client == fds[i].fd; });
        if (it == pairs_.end()) continue;  // closed by CloseAll meanwhile
        bool ok = true;
        if (fds[i].revents != 0) ok = Forward(it->client, it->server);
        if (ok && fds[i + 1].revents != 0) ok = Forward(it->server, it->client);
        if (!ok) {
          ::close(it->client);
          ::close(it->server);
          pairs_.erase(it);
        }
      }
      if (fds[0].revents != 0) {
        const int c = ::accept(listener_, nullptr, nullptr);
        if (c < 0) continue;
        const int s = Connect();
        if (s < 0) {
          ::close(c);
          continue;
        }
        pairs_.push_back({c, s});
      }
    }
  }

  const std::uint16_t target_;
  int listener_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false}, blackhole_{false};
  std::mutex mu_;
  std::vector<Pair> pairs_;
  std::thread thread_;
};

}  // namespace scangate::test
