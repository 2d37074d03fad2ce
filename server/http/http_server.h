// The HTTP/1.1 front end (Boost.Beast): N I/O threads, each running its own io_context with its own
// acceptor on the shared port (SO_REUSEPORT: the kernel spreads connections), one Session per connection
// living entirely on its thread — no strands, no cross-thread session state. Store completions come back
// through the Service: a Store writer Post()s them into the IoInbox of the session's I/O thread
// (server/verdict/io_inbox.h; one per thread, drained in batches by one post), the journal's flusher posts its
// waiter batches to the same executor (the Service's storage::WaiterGroup per I/O thread), and the response is written on that thread.
// Invariant: every request gets exactly one response, every abusable limit (header/body size, read timeouts)
// is explicit, and exceptions never escape into Asio.
// Shutdown: BeginShutdown() closes acceptors and idle connections; busy ones close after their response;
// WaitDrained() waits for the last session; Stop() stops the io_contexts and joins the threads.
// Optional: HTTPS on the main port (--tls-cert/--tls-key; one Session template over a TCP stream or
// an ssl_stream over it) and a separate plain-HTTP admin listener (--admin-listen) that alone serves the
// operational routes. This unit is transport only: what a request means (routes, Origin/CORS, tokens,
// verdicts, response bodies) is server/http/router.h, asked once after the header and once after the body.
// This file owns the listener (acceptors, accept back-off, the connection cap), the I/O threads and shutdown;
// its parts: server/http/session.h (one connection), sweeper.h (connection timeouts), worker.h (one I/O
// thread's state), tls_context.h (the TLS server context).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "server/config/config.h"
#include "server/metrics/metrics.h"
#include "server/http/router.h"

namespace scangate::server {

// Timeouts and connection limits (the HTTP contract in openapi.yaml).
inline constexpr auto kHeaderReadTimeout = std::chrono::seconds(10);  // first byte .. end of header
inline constexpr auto kBodyReadTimeout = std::chrono::seconds(30);    // end of header .. end of body
// A body's minimum rate (like Apache's mod_reqtimeout MinRate): its bytes must start within kBodyGrace of the
// header and then keep kMinBodyBytesPerSecond on average (the deadline is the header's end + kBodyGrace + the
// bytes received so far / the rate, never past kBodyReadTimeout). A trickle (1 byte/s) is closed after ~5 s
// instead of holding its connection and body bytes for 30 s; a 1 MiB batch at LAN or 4G speed is unaffected.
inline constexpr auto kBodyGrace = std::chrono::seconds(5);
inline constexpr std::size_t kMinBodyBytesPerSecond = 16 * 1024;
inline constexpr auto kIdleTimeout = std::chrono::seconds(60);        // keep-alive wait for the next request
inline constexpr auto kWriteTimeout = std::chrono::seconds(30);       // one response write
inline constexpr auto kHandshakeTimeout = std::chrono::seconds(10);   // TLS: accept .. handshake done
inline constexpr std::size_t kMaxConnections = 100'000;               // main listener's sessions; closed above
// The admin listener's own cap (probes, Prometheus, an operator's browser): a flood of the main port cannot
// take its slots, and it cannot be used to exhaust the main one's.
inline constexpr std::size_t kMaxAdminConnections = 256;
inline constexpr auto kAcceptRetryDelay = std::chrono::milliseconds(50);  // after EMFILE/ENFILE on accept

class HttpServer {
 public:
  // `router` and `metrics` must outlive the server.
  HttpServer(const Config& config, Router& router, Metrics& metrics);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds config.threads acceptors (the first to config.port, possibly 0; the rest to the port it got), the
  // admin acceptor (--admin-listen) and starts the I/O threads. With TLS, loads the certificate and key first.
  // Throws boost::system::system_error on bind failure, std::exception on an unusable certificate/key. Call once.
  void Start();
  std::uint16_t port() const { return port_; }
  std::uint16_t admin_port() const { return admin_port_; }  // 0 without --admin-listen
  // SIGHUP: reads --tls-cert and --tls-key again and makes them the context of new connections; connections
  // already open keep theirs (none is dropped). false without TLS. Throws (as Start) on an unusable certificate
  // or key, keeping the previous one. Safe to call from any thread.
  bool ReloadTls();

  // Stops accepting, closes idle keep-alive connections, asks busy ones to close after their response.
  // Safe to call from any thread.
  void BeginShutdown();
  // Blocks until every session is gone or `deadline` passes; true when drained.
  bool WaitDrained(std::chrono::steady_clock::time_point deadline) const;
  // Stops the io_contexts (abandoning what is left) and joins the I/O threads. Idempotent.
  void Stop();

  struct Shared;  // what every session reads: config, router, the stopping flag, the session count
  struct Worker;  // one I/O thread: io_context, acceptor, its sessions

 private:
  Metrics& metrics_;
  std::unique_ptr<Shared> shared_;  // outlives workers_ (declared first): sessions touch it in destructors
  std::uint16_t port_ = 0;
  std::uint16_t admin_port_ = 0;
  std::vector<std::unique_ptr<Worker>> workers_;
};

}  // namespace scangate::server
