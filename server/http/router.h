// Router: everything between "a request was parsed" and "this response goes out", with no sockets — the
// route table, method and content-type checks, Origin/CORS policy, bearer-token check (the token names a
// terminal: its routes, its recorded source), the per-terminal rate limit (429), dispatch to the
// Service (verdicts) and the DigestReader (POST /lookup), and response building (problem+json, Allow,
// WWW-Authenticate, Retry-After, CORS headers). The transport (server/http/session.cc: sessions, TLS,
// timeouts, limits) calls Admit() once the header is read and Handle() once the body is. Invariant: every
// request gets exactly one Answer; a request refused by Admit (Origin, token, size) is refused before any
// body byte is read; exceptions stop here and become 500. Unit-tested without sockets in
// tests/server/router_test.cc.
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <absl/functional/any_invocable.h>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "server/http/address_key.h"
#include "server/http/auth.h"
#include "server/http/body_budget.h"
#include "server/http/client_certificate.h"
#include "server/http/content_type.h"
#include "server/http/origin.h"
#include "server/http/rate_limit.h"
#include "server/http/token_store.h"
#include "server/config/config.h"
#include "server/metrics/metrics.h"
#include "server/http/request.h"
#include "server/verdict/service.h"
#include "storage/read/lookup.h"

namespace scangate::server {

// Which listener accepted a connection: the main one (/observe*, /lookup, plus the operational routes unless
// --admin-listen is set) or the admin one (operational routes only, plain HTTP).
enum class Listener : std::uint8_t { kMain, kAdmin };

// CORS preflight cache lifetime (Access-Control-Max-Age): browsers cap it (Chromium at 2 h).
inline constexpr int kCorsMaxAgeSeconds = 600;

// Failed authentication per client address (tokens on): this many wrong tokens at once, then this many per
// second; past it 429 rate-limited (the connection closes) before any token is verified, for as long as the
// address keeps failing. A till with a mistyped token sees 401 for its first attempts; a guesser gets one
// attempt per second per address (behind a proxy every client shares the proxy's address: see docs/security.md).
inline constexpr double kAuthFailureBurst = 20;
inline constexpr double kAuthFailuresPerSecond = 1;


class Router {
 public:
  using Request = boost::beast::http::request<boost::beast::http::string_body>;
  using Header = boost::beast::http::request_header<>;
  using Response = boost::beast::http::response<boost::beast::http::string_body>;

  // Status, headers and body of a response; the transport sets version, keep-alive and Content-Length.
  struct Answer {
    Response res;
    bool close = false;  // close the connection after this answer (a refused body is never read)
  };
  // Move-only: a callable of up to 16 bytes (the session's shared_ptr) is held inline, without an allocation.
  using Respond = absl::AnyInvocable<void(Answer)>;

  // What the transport needs once the header is read.
  struct Admission {
    Route route = Route::kNotFound;
    std::size_t body_limit = kMaxOtherBodyBytes;
    std::optional<Answer> answer;  // set: send it now and do not read the body (close when a body follows)
    // Tokens on: the caller's terminal (it keeps the TokenVerifier snapshot it came from alive). Pass it to
    // Handle; null with tokens off.
    std::shared_ptr<const Terminal> terminal;
    // The body's bytes in --max-body-bytes-in-flight (server/http/body_budget.h): keep it until the response is
    // written, then release it (destroying it releases too).
    BodyBudget::Hold body_hold;
  };

  // All references must outlive the Router. `lookups` may be null: POST /lookup then answers 503.
  Router(const Config& config, Service& service, storage::DigestReader* lookups);

  // Header stage, before any body byte: route (with the --admin-listen split), Origin policy (403), CORS preflight
  // (204), unknown path (404), method (405), a body on a route that takes none or past the route's limit (413),
  // bearer token (401), the token's
  // routes (403 route-not-allowed), the rate limit of its terminal or of `peer` with tokens off (429).
  // `tls`: the connection is HTTPS (for scangate's own origin). `cert`: the connection's verified client
  // certificate (mTLS on the main listener; null otherwise): its terminal is the caller's, or must be the token's
  // (403 certificate-not-allowed). Never throws. Safe to call concurrently.
  Admission Admit(const Header& h, Listener listener, bool tls, const boost::asio::ip::address& peer = {},
                  const ClientCertificate* cert = nullptr) const;

  // The whole request, `route` from an Admit that answered nothing (its path, method and body are the route's:
  // a HEAD is answered as a GET, the transport sends the header only). `done` runs exactly once on `ex` (inline or later). Call on the
  // thread that owns `ex` and `counters`.
  // `terminal`: Admission::terminal (tokens on: the recorded source is its id; a body source naming
  // another terminal is 403 source-not-allowed). `peer`: Admit's (with tokens off, the rate limit's key: a
  // batch is charged its other keys there).
  void Handle(Route route, const Request& req, const boost::asio::any_io_executor& ex, ThreadCounters& counters,
              Respond done, const Terminal* terminal = nullptr, const boost::asio::ip::address& peer = {});

  // Rereads --tokens-file (SIGHUP) and swaps the new tokens in; a file that fails to read or parse keeps the
  // old tokens and throws std::runtime_error (the message names the file and line, never a token or hash).
  // Returns the number of tokens now in force. Safe to call concurrently with requests.
  std::size_t ReloadTokens();

  // A problem answer for `route` (transport errors too: 400 bad HTTP, 413, 431, 500). `h`, when known,
  // adds the CORS headers an allowed origin needs to read it.
  Answer ProblemAnswer(const Problem& p, Route route, const Header* h, bool close = false) const;

 private:
  bool OriginListed(std::string_view normalized) const;
  // Access-Control-Allow-Origin + Vary for an allowed origin on a client route.
  void AddCors(Response& res, Route route, const Header* h) const;
  Answer Ok(boost::beast::http::status status, std::string body, std::string_view content_type, Route route,
            const Header* h) const;
  // Operational GET routes (/healthz, /readyz, /metrics, /stats, /dashboard): one case each. A new one (say
  // GET /version) needs a Route value (request.h), its path in RouteOf and RouteLabel, IsAdminRoute
  // (request.cc), and its case here (server/http/router_admin.cc).
  Answer AdminAnswer(Route route, const Header& h);
  class Reply;  // the request's one answer, shared by the completions that may give it (router.cc)
  void HandleObserve(const Request& req, const boost::asio::any_io_executor& ex, ThreadCounters& counters,
                     const Reply& done, const Terminal* terminal, const boost::asio::ip::address& peer);
  void HandleBatch(const Request& req, const boost::asio::any_io_executor& ex, ThreadCounters& counters,
                   const Reply& done, const Terminal* terminal, const boost::asio::ip::address& peer);
  // The Service's metrics plus the rate limiter's.
  MetricsSnapshot Snapshot() const;
  // Token check (401), the client certificate's terminal (403), the caller's routes (403) and the rate limit
  // (429): the refusal, or nothing.
  std::optional<Answer> CheckCaller(const Header& h, Route route, bool has_body, const boost::asio::ip::address& peer,
                                    const ClientCertificate* cert, std::shared_ptr<const Terminal>& terminal) const;
  void HandleLookup(const Request& req, const boost::asio::any_io_executor& ex, const Reply& done,
                    const Terminal* terminal);

  const Config& config_;
  Service& service_;
  storage::DigestReader* const lookups_;
  TokenStore tokens_;
  std::unique_ptr<RateLimiter> limiter_;  // null: --rate-limit=0
  // Wrong tokens per client address (tokens on, whatever --rate-limit says): kAuthFailureBurst at once, then
  // kAuthFailuresPerSecond; past it 429 before any token is verified.
  // mutable: internally synchronised (sharded locks); Admit is const.
  mutable RateLimiter auth_failures_{kAuthFailuresPerSecond, kAuthFailureBurst};
  // Request bodies in flight (--max-body-bytes-in-flight), taken by Admit. mutable: lock-free, Admit is const.
  mutable BodyBudget body_budget_{static_cast<std::size_t>(config_.max_body_bytes_in_flight)};
  std::vector<std::string> cors_origins_;  // normalized
};

}  // namespace scangate::server
