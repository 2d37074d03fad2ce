#include "server/http/router.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <memory>
#include <type_traits>
#include <utility>

#include <boost/asio/post.hpp>
#include <boost/beast/http/field.hpp>

#include "core/time_format.h"
#include "server/http/ascii.h"
#include "server/http/router_reply.h"
#include "server/log.h"

namespace scangate::server {
namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

// Runs a completion body; an exception (bad_alloc while serializing, say) becomes a 500 instead of escaping
// into Asio.
template <typename Done, typename Fn>
void Guarded(const Router& router, Route route, const Router::Header* h, const Done& done, Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    Log(LogLevel::kError, "error", {{"where", "request completion"}, {"what", e.what()}});
    done(router.ProblemAnswer(Problem::Internal(), route, h, /*close=*/true));
  }
}

constexpr std::string_view kJson = "application/json";
constexpr std::string_view kProblemJson = "application/problem+json";
constexpr std::string_view kCorsMethods = "POST, OPTIONS";
constexpr std::string_view kCorsHeaders = "Content-Type, Authorization, Idempotency-Key";
// Not CORS-safelisted: a page needs Retry-After after a 503, Idempotent-Replayed to tell a retry's answer.
constexpr std::string_view kCorsExposed = "Retry-After, Idempotent-Replayed";
constexpr std::string_view kIdempotencyKeyHeader = "Idempotency-Key";
constexpr std::string_view kReplayedHeader = "Idempotent-Replayed";
constexpr std::string_view kLookupUnavailable = "PostgreSQL is unavailable for lookups; retry after the Retry-After delay";

// The rate limit's bucket: the caller's terminal id (tokens on), else its client address's key (in `buf`).
std::string_view RateBucket(const Terminal* terminal, const net::ip::address& peer, unsigned ipv6_prefix_bits,
                            AddressKeyBuffer& buf) {
  return terminal != nullptr ? std::string_view(terminal->id) : AddressKey(peer, ipv6_prefix_bits, buf);
}

// Tokens on: the recorded source is the token's terminal. A body source that is absent or names that
// terminal is fine; one naming anything else is refused (a till must not speak for another).
std::optional<Problem> BindSource(Observation& o, const Terminal* terminal) {
  if (terminal == nullptr) return std::nullopt;
  if (!o.source.empty() && o.source != terminal->id) return Problem::SourceNotAllowed(terminal->id);
  o.source = terminal->id;
  return std::nullopt;
}

// Idempotency-Key (issue 34): whose idempotency keys an observation's are — its source (with tokens or client
// certificates, the terminal's id: BindSource ran), else the client's address (PROXY protocol: the client's).
// A till's retry comes from the same terminal or source; an idempotency key of another caller is another key.
void ScopeIdempotency(Observation& o, const net::ip::address& peer) {
  if (o.idempotency_key.empty()) return;
  o.scope = o.source.empty() ? "address:" + peer.to_string() : "source:" + o.source;
}

// The request's Transfer-Encoding, if any, is one this server reads exactly as a proxy would: one field,
// exactly "chunked", HTTP/1.1. Anything else is a 400 problem.
std::optional<Problem> FramingProblem(const Router::Header& h) {
  const auto [first, last] = h.equal_range(http::field::transfer_encoding);
  if (first == last) return std::nullopt;
  if (h.version() < 11) {
    return Problem::BadRequest("Transfer-Encoding is not allowed in an HTTP/1.0 request; send Content-Length");
  }
  if (std::next(first) != last || !EqualsIgnoringAsciiCase(TrimOws(first->value()), "chunked")) {
    return Problem::BadRequest("Transfer-Encoding must be exactly \"chunked\" (no other transfer coding is "
                               "supported); or send Content-Length");
  }
  return std::nullopt;
}

// A request the route table refuses: an unknown path (404), a method the route does not serve (405: HEAD is a
// GET route's), or a body on a route that takes none (413).
std::optional<Problem> RouteProblem(const Router::Header& h, Route route, bool has_body) {
  if (route == Route::kNotFound) return Problem::NotFound(h.target());
  if (!MethodAllowed(route, h.method_string())) return Problem::MethodNotAllowed(h.method_string(), route);
  if (has_body && BodyLimitFor(route) == 0) return Problem::BodyTooLarge(0);
  return std::nullopt;
}

// --keys=gs1: a found pack's record for the lookup body, and how the looked-up scan compares with it.
PackRecord PackRecordOf(const storage::PackAttrs& scan, const storage::RecordLookup& r) {
  PackRecord p;
  if (r.expiry) p.expiry = IsoDate(*r.expiry);
  p.lot_recorded = r.lot.has_value();
  if (r.keep_until_us) p.keep_until = Rfc3339Micros(*r.keep_until_us);
  storage::PackAttrs recorded;
  recorded.lot = r.lot;
  recorded.expiry = r.expiry;
  p.mismatch = Service::Mismatch(scan, recorded);
  return p;
}
}  // namespace

Router::Router(const Config& config, Service& service, storage::DigestReader* lookups)
    : config_(config), service_(service), lookups_(lookups), tokens_(config.tokens_file, config.terminals) {
  for (const std::string& o : config.cors_origins) cors_origins_.push_back(NormalizeOrigin(o));
  if (config.rate_limit > 0) {
    limiter_ = std::make_unique<RateLimiter>(config.rate_limit, std::max<std::uint32_t>(1, config.rate_burst));
  }
}

std::size_t Router::ReloadTokens() { return tokens_.Reload(); }

bool Router::OriginListed(std::string_view normalized) const {
  return std::find(cors_origins_.begin(), cors_origins_.end(), normalized) != cors_origins_.end();
}

void Router::AddCors(Response& res, Route route, const Header* h) const {
  if (h == nullptr || !IsClientRoute(route)) return;
  const auto it = h->find(http::field::origin);
  if (it == h->end() || !OriginListed(NormalizeOrigin(it->value()))) return;
  res.set(http::field::access_control_allow_origin, it->value());
  res.set(http::field::access_control_expose_headers, kCorsExposed);
  res.set(http::field::vary, "Origin");
}

Router::Answer Router::ProblemAnswer(const Problem& p, Route route, const Header* h, bool close) const {
  Answer a;
  a.close = close;
  a.res.result(static_cast<http::status>(p.status));
  if (p.status == 503) a.res.set(http::field::retry_after, "1");
  if (p.status == 429) a.res.set(http::field::retry_after, std::to_string(std::max(1u, p.retry_after_seconds)));
  if (p.status == 405) a.res.set(http::field::allow, AllowHeader(route));
  if (p.status == 401) {
    const bool presented = h != nullptr && !(*h)[http::field::authorization].empty();
    a.res.set(http::field::www_authenticate, WwwAuthenticate(presented));
  }
  a.res.set(http::field::content_type, kProblemJson);
  a.res.body() = ProblemBody(p);
  AddCors(a.res, route, h);
  return a;
}

Router::Answer Router::Ok(http::status status, std::string body, std::string_view content_type, Route route,
                          const Header* h) const {
  Answer a;
  a.res.result(status);
  a.res.set(http::field::content_type, content_type);
  a.res.body() = std::move(body);
  AddCors(a.res, route, h);
  return a;
}

Router::Admission Router::Admit(const Header& h, Listener listener, bool tls, const net::ip::address& peer,
                                const ClientCertificate* cert) const {
  Admission ad;
  // A body follows (a refused request then closes: its body is never read).
  const auto length = h[http::field::content_length];
  const bool has_body = !length.empty() ? length != "0" : !h[http::field::transfer_encoding].empty();
  try {
    ad.route = RouteOf(h.target());
    // Framing this server does not read exactly as a proxy in front of it may: 400 and close (RFC 9112 §6.1,
    // §6.3), never a body-less request with the unread bytes left to be parsed as the next one (smuggling).
    if (auto framing = FramingProblem(h)) {
      ad.answer = ProblemAnswer(*framing, ad.route, nullptr, /*close=*/true);
      return ad;
    }
    // With --admin-listen the operational routes live only there, and the client routes never do.
    if (listener == Listener::kAdmin ? !IsAdminRoute(ad.route) : config_.admin_split() && IsAdminRoute(ad.route)) {
      ad.route = Route::kNotFound;
    }
    ad.body_limit = BodyLimitFor(ad.route);
    // --allowed-hosts: a Host this service does not answer to is a DNS-rebinding page (a name of the
    // attacker's that resolves here) or a misdirected request: 421, every route (a rebinding page could read
    // /stats or /lookup answers). No Host at all (an HTTP/1.0 health check) is not a browser's: it passes.
    if (const auto it = h.find(http::field::host); it != h.end() && !HostListed(it->value(), config_.allowed_hosts)) {
      ad.answer = ProblemAnswer(Problem::HostNotAllowed(), ad.route, nullptr, has_body);
      return ad;
    }
    // Origin policy, for every route: a browser names the page's origin; only scangate's own and the
    // --cors-origins list may call. Closes the no-preflight "simple request" hole (a form POST or
    // fetch(no-cors) from any web page). Clients that send no Origin (terminals, curl) are unaffected.
    // scangate's own origin is derived from Host, which a DNS-rebinding page controls: it is trusted only
    // when Host was checked (--allowed-hosts) or names an address or localhost (no name to rebind).
    if (const auto it = h.find(http::field::origin); it != h.end()) {
      const std::string origin = NormalizeOrigin(it->value());
      const std::string_view host = h[http::field::host];
      const bool own = (!config_.allowed_hosts.empty() || IsAddressOrLocalhost(host)) && origin == OwnOrigin(host, tls);
      if (!OriginListed(origin) && !own) {
        ad.answer = ProblemAnswer(Problem::OriginNotAllowed(), ad.route, nullptr, has_body);
        return ad;
      }
    }
    // CORS preflight from a listed origin: no token needed (browsers send none on a preflight).
    if (h.method() == http::verb::options && IsClientRoute(ad.route) && h.find(http::field::origin) != h.end() &&
        OriginListed(NormalizeOrigin(h[http::field::origin]))) {
      Answer a;
      a.close = has_body;
      a.res.result(http::status::no_content);
      a.res.set(http::field::access_control_allow_origin, h[http::field::origin]);
      a.res.set(http::field::access_control_allow_methods, kCorsMethods);
      a.res.set(http::field::access_control_allow_headers, kCorsHeaders);
      a.res.set(http::field::access_control_max_age, std::to_string(kCorsMaxAgeSeconds));
      a.res.set(http::field::vary, "Origin");
      ad.answer = std::move(a);
      return ad;
    }
    // A path or method this server does not serve, or a body on a route that takes none, is answered here, from
    // the header: with a body, the connection closes unread, so it never holds body budget (issue 43: any host
    // could otherwise spend --max-body-bytes-in-flight on POST /x, which needs no token).
    if (auto p = RouteProblem(h, ad.route, has_body)) {
      ad.answer = ProblemAnswer(*p, ad.route, &h, has_body);
      return ad;
    }
    // The body's declared size: Content-Length (already validated as a number by the HTTP parser), else the
    // route's limit (a chunked body may grow to it). Checked here (413), taken from the budget below.
    std::size_t declared = ad.body_limit;
    if (!length.empty()) {
      const auto [p, ec] = std::from_chars(length.data(), length.data() + length.size(), declared);
      if (ec == std::errc::result_out_of_range || (ec == std::errc() && declared > ad.body_limit)) {
        ad.answer = ProblemAnswer(Problem::BodyTooLarge(ad.body_limit), ad.route, &h, /*close=*/true);
        return ad;
      }
    }
    if (IsClientRoute(ad.route)) ad.answer = CheckCaller(h, ad.route, has_body, peer, cert, ad.terminal);
    // Admitted with a body: its declared bytes come out of the global budget before any is read; none left:
    // 503 and close, the body unread.
    if (!ad.answer && has_body) {
      if (body_budget_.Take(declared, kMaxObserveBodyBytes)) {
        ad.body_hold = BodyBudget::Hold(&body_budget_, declared);
      } else {
        ad.answer = ProblemAnswer(Problem::BodyBudgetSpent(), ad.route, &h, /*close=*/true);
      }
    }
  } catch (const std::exception& e) {
    Log(LogLevel::kError, "error", {{"where", "request admission"}, {"what", e.what()}});
    ad.answer = ProblemAnswer(Problem::Internal(), ad.route, nullptr, /*close=*/true);
  }
  return ad;
}

std::optional<Router::Answer> Router::CheckCaller(const Header& h, Route route, bool has_body,
                                                 const net::ip::address& peer, const ClientCertificate* cert,
                                                 std::shared_ptr<const Terminal>& terminal) const {
  AddressKeyBuffer address_buf{};
  if (cert && !cert->terminal) return ProblemAnswer(Problem::CertificateNotAllowed(cert->problem), route, &h, has_body);
  if (std::shared_ptr<const TokenVerifier> tokens = tokens_.Current(); tokens->enabled()) {
    // Failed authentication is limited per client address before any token is verified: an address past
    // its failures gets 429 (and the connection closes) even with a valid token, so guessing costs the
    // guesser time, and the server no hashing or comparing against every stored hash.
    const std::string_view address = AddressKey(peer, config_.ipv6_prefix_length, address_buf);
    const auto now = std::chrono::steady_clock::now();
    if (const RateLimiter::Decision d = auth_failures_.Peek(address, now); !d.allowed) {
      return ProblemAnswer(Problem::AuthFailuresLimited(static_cast<unsigned>(d.retry_after.count())), route, &h,
                           /*close=*/true);
    }
    const auto token = BearerToken(h[http::field::authorization]);
    const auto index = token ? tokens->Verify(*token) : std::nullopt;
    if (!index) {
      const bool presented = !h[http::field::authorization].empty();
      // A request without credentials is a client that was not configured, not a guess: not counted.
      if (presented) {
        if (const auto d = auth_failures_.Acquire(address, RateLimiter::KeyKind::kAddress, now); !d.allowed) {
          return ProblemAnswer(Problem::AuthFailuresLimited(static_cast<unsigned>(d.retry_after.count())), route, &h,
                               /*close=*/true);
        }
      }
      return ProblemAnswer(Problem::Unauthorized(presented), route, &h, has_body);
    }
    // Aliasing: points at the entry, owns the snapshot (a reload meanwhile frees nothing this request uses).
    terminal = std::shared_ptr<const Terminal>(tokens, &tokens->terminal(*index));
    // mTLS and tokens: a token is good only from its own terminal's certificate (a copied token is not enough).
    if (cert && cert->terminal->id != terminal->id) {
      return ProblemAnswer(Problem::CertificateNotAllowed("the token's terminal is not the client certificate's"),
                           route, &h, has_body);
    }
  } else if (cert) {
    terminal = cert->terminal;
  }
  if (terminal && (terminal->routes & RouteBit(route)) == 0) {
    return ProblemAnswer(Problem::RouteNotAllowed(route), route, &h, has_body);
  }
  if (limiter_) {
    const auto kind = terminal ? RateLimiter::KeyKind::kTerminal : RateLimiter::KeyKind::kAddress;
    const RateLimiter::Decision d =
        limiter_->Acquire(RateBucket(terminal.get(), peer, config_.ipv6_prefix_length, address_buf), kind,
                          std::chrono::steady_clock::now());
    if (!d.allowed) {
      return ProblemAnswer(Problem::RateLimited(static_cast<unsigned>(d.retry_after.count())), route, &h, has_body);
    }
  }
  return std::nullopt;
}

void Router::Handle(Route route, const Request& req, const net::any_io_executor& ex, ThreadCounters& counters,
                    Respond done, const Terminal* terminal, const net::ip::address& peer) {
  const Reply once(*this, std::move(done));
  try {
    // Admit answered an unknown path, a method the route does not serve and a body it takes none of.
    if (!IsClientRoute(route)) return once(AdminAnswer(route, req));
    if (auto p = CheckContentType(req[http::field::content_type])) return once(ProblemAnswer(*p, route, &req));
    switch (route) {
      case Route::kObserve: return HandleObserve(req, ex, counters, once, terminal, peer);
      case Route::kObserveBatch: return HandleBatch(req, ex, counters, once, terminal, peer);
      case Route::kLookup: return HandleLookup(req, ex, once, terminal);
      default: return once(ProblemAnswer(Problem::NotFound(req.target()), Route::kNotFound, &req));
    }
  } catch (const std::exception& e) {
    // Exceptions stop here: a 500 problem, the reason only in the log (digest/JSON errors carry no key).
    Log(LogLevel::kError, "error", {{"where", "request handler"}, {"what", e.what()}});
    once(ProblemAnswer(Problem::Internal(), route, &req, /*close=*/true));
  }
}

void Router::HandleObserve(const Request& req, const net::any_io_executor& ex, ThreadCounters& counters,
                           const Reply& done, const Terminal* terminal, const net::ip::address& peer) {
  auto parsed = ParseObservation(req.body(), req[http::field::content_type]);
  if (auto* p = std::get_if<Problem>(&parsed)) return done(ProblemAnswer(*p, Route::kObserve, &req));
  if (auto p = BindSource(std::get<Observation>(parsed), terminal)) return done(ProblemAnswer(*p, Route::kObserve, &req));
  if (const auto [first, last] = req.equal_range(kIdempotencyKeyHeader); first != last) {
    if (std::next(first) != last) {
      return done(ProblemAnswer(Problem::InvalidIdempotencyKey("the Idempotency-Key header is given twice"),
                                Route::kObserve, &req));
    }
    auto key = ParseIdempotencyKey(first->value());
    if (auto* p = std::get_if<Problem>(&key)) return done(ProblemAnswer(*p, Route::kObserve, &req));
    std::get<Observation>(parsed).idempotency_key = std::move(std::get<std::string>(key));
    ScopeIdempotency(std::get<Observation>(parsed), peer);
  }
  done.KeepCorsHeader(req);  // for the CORS headers of the later answer
  // The completion holds the Reply alone (16 bytes: inline in the Service's AnyInvocable, no allocation).
  auto answer = [done](std::variant<Verdict, Problem> r) {
    const Router& self = done.router();
    Guarded(self, Route::kObserve, done.header(), done, [&] {
      if (auto* p = std::get_if<Problem>(&r)) return done(self.ProblemAnswer(*p, Route::kObserve, done.header()));
      const Verdict& v = std::get<Verdict>(r);
      Answer a = self.Ok(v.is_new ? http::status::created : http::status::ok, VerdictBody(v), kJson, Route::kObserve,
                         done.header());
      if (v.replayed) a.res.set(kReplayedHeader, "true");
      done(std::move(a));
    });
  };
  static_assert(sizeof(answer) <= 2 * sizeof(void*) && std::is_nothrow_move_constructible_v<decltype(answer)>,
                "the Service completion must stay inline in its AnyInvocable (no allocation per request)");
  service_.Observe(std::get<Observation>(parsed), ex, counters, std::move(answer));
}

void Router::HandleBatch(const Request& req, const net::any_io_executor& ex, ThreadCounters& counters,
                         const Reply& done, const Terminal* terminal, const net::ip::address& peer) {
  auto parsed = ParseBatch(req.body());
  if (auto* p = std::get_if<Problem>(&parsed)) return done(ProblemAnswer(*p, Route::kObserveBatch, &req));
  const std::size_t keys = std::get<BatchRequest>(parsed).entries.size();
  for (Observation& o : std::get<BatchRequest>(parsed).entries) {  // one foreign source refuses the whole batch
    if (auto p = BindSource(o, terminal)) return done(ProblemAnswer(*p, Route::kObserveBatch, &req));
    ScopeIdempotency(o, peer);
  }
  if (limiter_ && keys > 1) {
    // A batch counts its keys: the header's check (CheckCaller, the same RateBucket) took one token before the
    // body was read; the others are charged now, into debt if need be, so the caller's next requests wait.
    AddressKeyBuffer address_buf{};
    limiter_->Charge(RateBucket(terminal, peer, config_.ipv6_prefix_length, address_buf), static_cast<double>(keys - 1),
                     std::chrono::steady_clock::now());
  }
  done.KeepCorsHeader(req);
  service_.ObserveBatch(std::get<BatchRequest>(parsed), ex, counters,
                        [done](std::variant<std::vector<Verdict>, Problem> r) {
                          const Router& self = done.router();
                          Guarded(self, Route::kObserveBatch, done.header(), done, [&] {
                            if (auto* p = std::get_if<Problem>(&r)) {
                              return done(self.ProblemAnswer(*p, Route::kObserveBatch, done.header()));
                            }
                            done(self.Ok(http::status::ok, BatchBody(std::get<std::vector<Verdict>>(r)), kJson,
                                         Route::kObserveBatch, done.header()));
                          });
                        });
}

void Router::HandleLookup(const Request& req, const net::any_io_executor& ex, const Reply& done,
                          const Terminal* terminal) {
  auto parsed = ParseObservation(req.body(), req[http::field::content_type]);
  if (auto* p = std::get_if<Problem>(&parsed)) return done(ProblemAnswer(*p, Route::kLookup, &req));
  // Read as an observation of the key would be (--keys=gs1: the pack's identity, and its attributes to compare).
  auto read = service_.ReadKey(std::get<Observation>(parsed).key);
  if (auto* p = std::get_if<Problem>(&read)) return done(ProblemAnswer(*p, Route::kLookup, &req));
  const ScanKey& k = std::get<ScanKey>(read);
  const bool gs1 = config_.keys == KeysMode::kGs1;
  done.KeepCorsHeader(req);  // for the CORS headers of the later answer
  // Tokens on: which terminal recorded a pack is the audit right's to see; a till sees its own records' source.
  std::optional<std::string> own_terminal;
  if (terminal != nullptr && (terminal->routes & kRouteBitAudit) == 0) own_terminal = terminal->id;
  // A rotation (--digest-secret-previous-file): a key not found under its digest is looked up under the previous
  // secret's, and answered as that row holds it (its lot compared as the previous secret digested it).
  std::optional<ScanKey> previous = service_.ReadPreviousKey(std::get<Observation>(parsed).key);
  auto answer = [this, ex, done, gs1, own_terminal, hex = ToHex(k.digest)](const storage::PackAttrs& scan,
                                                                           const storage::RecordLookup& r) {
    // Runs on the reader's thread: hop back to the session's executor, never block here.
    net::post(ex, [this, done, gs1, own_terminal, scan, hex, r] {
      Guarded(*this, Route::kLookup, done.header(), done, [&] {
        const bool hidden = own_terminal && r.source && *r.source != *own_terminal;
        switch (r.status) {
          case storage::RecordLookup::Status::kFound:
            return done(Ok(http::status::ok,
                           gs1 ? LookupBody(hex, r.first_seen, r.source, PackRecordOf(scan, r), hidden)
                               : LookupBody(hex, r.first_seen, r.source, hidden),
                           kJson, Route::kLookup, done.header()));
          case storage::RecordLookup::Status::kNotFound:
            return done(ProblemAnswer(Problem::NotRecorded(), Route::kLookup, done.header()));
          case storage::RecordLookup::Status::kUnavailable:
            return done(ProblemAnswer(Problem::Unavailable(std::string(kLookupUnavailable)), Route::kLookup,
                                      done.header()));
        }
      });
    });
  };
  auto on_result = [this, answer, scan = k.attrs, previous](const storage::RecordLookup& r) {
    if (r.status != storage::RecordLookup::Status::kNotFound || !previous) return answer(scan, r);
    // Not under the current digest: the answer is the previous digest's. A second lookup the reader refuses (its
    // queue full, PostgreSQL known down) is no "not recorded" — the key may be recorded under the previous
    // secret — but unavailable (503).
    if (!lookups_->Find(previous->digest,
                        [answer, pscan = previous->attrs](const storage::RecordLookup& pr) { answer(pscan, pr); })) {
      answer(scan, storage::RecordLookup{});  // status kUnavailable
    }
  };
  if (lookups_ == nullptr || !lookups_->Find(k.digest, std::move(on_result))) {
    done(ProblemAnswer(Problem::Unavailable(std::string(kLookupUnavailable)), Route::kLookup, &req));
  }
}

}  // namespace scangate::server
