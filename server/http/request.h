// The pure request/response layer of the HTTP service: routing, content-type policy, body parsing and
// validation with Boost.JSON (and application/x-www-form-urlencoded for /observe and /lookup), and the RFC 9457
// problem bodies (the bodies of successful answers: answer_body.h). No I/O, no clock, no global state, so it can be unit-tested and
// fuzzed. Invariant: every rejected input yields a Problem with
// a 4xx status and a stable slug; nothing here ever throws for any byte string given as a body.
// The I/O side lives in server/http/http_server.h, routing/dispatch in server/http/router.h, the verdict logic in
// server/verdict/service.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "server/http/answer_body.h"

namespace scangate::server {

// Request limits (the HTTP contract in openapi.yaml).
inline constexpr std::size_t kMaxObserveBodyBytes = 16 * 1024;    // POST /observe and /lookup: 413 above
inline constexpr std::size_t kMaxBatchBodyBytes = 1024 * 1024;    // POST /observe/batch: 413 above
inline constexpr std::size_t kMaxOtherBodyBytes = 16 * 1024;      // any other route: 413 above
inline constexpr std::size_t kMaxHeaderBytes = 8 * 1024;          // request line + fields: 431 above
inline constexpr std::size_t kMaxJsonDepth = 8;                   // nesting depth: 400 malformed-json above
inline constexpr std::size_t kMinKeyBytes = 1;
inline constexpr std::size_t kMaxKeyBytes = 512;                  // UTF-8 bytes after JSON unescaping
inline constexpr std::size_t kMaxSourceChars = 64;                // Unicode code points
inline constexpr std::size_t kMinBatchEntries = 1;
inline constexpr std::size_t kMaxBatchEntries = 1000;
static_assert(kMaxBatchEntries * (kMinKeyBytes + 3) <= kMaxBatchBodyBytes,
              "a full batch of short keys must fit in the batch body limit");
static_assert(kMaxKeyBytes * 6 + kMaxSourceChars * 12 + 64 <= kMaxObserveBodyBytes,
              "a maximal key and source, fully \\u-escaped, must fit in the /observe body limit");

enum class Route : std::uint8_t { kObserve, kObserveBatch, kHealthz, kReadyz, kMetrics, kStats, kDashboard, kLookup, kNotFound };
inline constexpr std::size_t kRouteCount = 9;

// Maps a request target (path plus optional query) to its route; the query string is ignored.
Route RouteOf(std::string_view target);
// Label used in metrics and logs, e.g. "/observe", "other" for kNotFound.
std::string_view RouteLabel(Route route);
// Routes a browser may call (CORS, --cors-origins): POST /observe, /observe/batch, /lookup. They also take a
// bearer token when --tokens-file is set.
bool IsClientRoute(Route route);
// The one method each route accepts ("POST" or "GET"); the Allow header of a 405.
std::string_view AllowedMethod(Route route);
// Body size limit applied once the header of a request to `route` has been read.
std::size_t BodyLimitFor(Route route);
// Operational routes (/healthz, /readyz, /metrics, /stats, /dashboard): never need a token; with --admin-listen they are
// served only on the admin listener, and /observe* only on the main one.
bool IsAdminRoute(Route route);

// Access control (--tokens-file). Bearer credentials of an Authorization header value (RFC 6750 section 2.1:
// scheme "Bearer", case-insensitive, one or more spaces, a token68). nullopt when the value is absent or
// not of that form; the token is never logged or echoed.
inline constexpr std::size_t kMaxBearerTokenBytes = 4096;  // longer credentials are rejected unhashed
std::optional<std::string_view> BearerToken(std::string_view authorization);
// WWW-Authenticate value of a 401: the realm, plus error="invalid_token" when credentials were presented.
std::string WwwAuthenticate(bool credentials_presented);

// An RFC 9457 problem. type is "urn:scangate:problem:" + slug.
struct Problem {
  unsigned status = 500;
  std::string slug;
  std::string title;
  std::string detail;
  std::string ai;  // invalid-gs1 only: the GS1 Application Identifier at fault (extension member "ai")
  unsigned retry_after_seconds = 0;  // Retry-After of a 429 (a 503 always says 1)

  static Problem MalformedJson(std::string detail);
  static Problem MalformedForm(std::string detail);       // 400 malformed-form (urlencoded body)
  static Problem InvalidKey(std::string detail);
  static Problem InvalidSource(std::string detail);
  // 400 invalid-gs1 (--keys=gs1): the key is not a GS1 pack; `ai` names the Application Identifier at fault
  // ("" when none: empty input, a malformed Digital Link...). The detail never quotes the key.
  static Problem InvalidGs1(std::string ai, std::string detail);
  static Problem InvalidBatch(std::string detail);
  static Problem BadRequest(std::string detail);         // HTTP-level syntax error (not JSON)
  static Problem NotFound(std::string_view target);
  static Problem MethodNotAllowed(std::string_view method, Route route);
  static Problem BodyTooLarge(std::size_t limit);
  static Problem UnsupportedMediaType(std::string_view content_type);
  static Problem HeaderTooLarge();
  static Problem Unauthorized(bool credentials_presented);  // 401 unauthorized (+ WWW-Authenticate)
  static Problem OriginNotAllowed();                      // 403 origin-not-allowed (Origin header, CORS)
  // 403 source-not-allowed: a body "source" that names another terminal than the token's (`terminal`).
  static Problem SourceNotAllowed(std::string_view terminal);
  static Problem RouteNotAllowed(Route route);             // 403 route-not-allowed: the token's routes exclude it
  static Problem RateLimited(unsigned retry_after_seconds);  // 429 rate-limited (+ Retry-After)
  static Problem NotRecorded();                           // 404 not-recorded (POST /lookup)
  static Problem Unavailable(std::string detail);
  // 503 outcome-unknown (+ Retry-After like unavailable): the attempt MAY have recorded the key (in-doubt
  // COMMIT, or the request deadline passed while its transaction was in flight).
  static Problem OutcomeUnknown(std::string detail);
  static Problem Internal();                              // never carries exception text to the client
};

// application/problem+json body of `p`.
std::string ProblemBody(const Problem& p);

// Content-Type policy: application/json (any parameters), application/*+json,
// application/x-www-form-urlencoded (curl -d's default) and an absent/empty header are accepted;
// anything else (text/plain, multipart/form-data, ...) is a 415 problem.
std::optional<Problem> CheckContentType(std::string_view content_type);
// True for application/x-www-form-urlencoded (any parameters, any case).
bool IsFormContentType(std::string_view content_type);

// One observation: the raw key (never logged) and its optional source tag ("" when absent).
struct Observation {
  std::string key;
  std::string source;
};
struct BatchRequest {
  std::vector<Observation> entries;
};

// POST /observe body {"key": "...", "source": "..."}; unknown members are ignored.
std::variant<Observation, Problem> ParseObserve(std::string_view body);
// POST /observe or /lookup body under `content_type` (already accepted by CheckContentType). Under
// application/x-www-form-urlencoded a body whose first non-whitespace byte is '{' is JSON (curl -d '{...}'
// sends that type), any other body is the form it claims to be: ParseObserveForm. Otherwise JSON.
std::variant<Observation, Problem> ParseObservation(std::string_view body, std::string_view content_type);
// application/x-www-form-urlencoded body "key=...&source=...": '&'-separated pairs, '+' is a space, %XX
// percent-decoded (a bad escape is 400 malformed-form); "key" required once, "source" optional (at most
// once; empty = absent); other names ignored; same key/source validation as JSON (valid UTF-8 required).
std::variant<Observation, Problem> ParseObserveForm(std::string_view body);
// POST /observe/batch body {"keys": ["k", {"key": "k", "source": "s"}, ...]}; any invalid entry rejects
// the whole batch and the detail names its index.
std::variant<BatchRequest, Problem> ParseBatch(std::string_view body);

}  // namespace scangate::server
