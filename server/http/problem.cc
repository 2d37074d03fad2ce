#include "server/http/problem.h"

#include <cctype>
#include <utility>

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

namespace scangate::server {
namespace json = boost::json;

namespace {

constexpr std::string_view kProblemTypePrefix = "urn:scangate:problem:";

Problem Make(unsigned status, std::string_view slug, std::string_view title, std::string detail) {
  return Problem{status, std::string(slug), std::string(title), std::move(detail), {}, 0};
}

// 429 rate-limited with its Retry-After (whole seconds): the rate limit's and the failed-authentication limit's.
Problem TooManyRequests(std::string detail, unsigned retry_after_seconds) {
  Problem p = Make(429, "rate-limited", "Too many requests", std::move(detail));
  p.retry_after_seconds = retry_after_seconds;
  return p;
}

}  // namespace

Problem Problem::MalformedJson(std::string detail) {
  return Make(400, "malformed-json", "Malformed JSON", std::move(detail));
}
Problem Problem::DuplicateMember(std::string detail) {
  return Make(400, "duplicate-member", "Duplicate JSON member", std::move(detail));
}
Problem Problem::InvalidKey(std::string detail) { return Make(400, "invalid-key", "Invalid key", std::move(detail)); }
Problem Problem::InvalidGs1(std::string ai, std::string detail) {
  Problem p = Make(400, "invalid-gs1", "Not a valid GS1 pack", std::move(detail));
  p.ai = std::move(ai);
  return p;
}
Problem Problem::InvalidSource(std::string detail) {
  return Make(400, "invalid-source", "Invalid source", std::move(detail));
}
Problem Problem::InvalidIdempotencyKey(std::string detail) {
  return Make(400, "invalid-idempotency-key", "Invalid idempotency key", std::move(detail));
}
Problem Problem::InvalidBatch(std::string detail) {
  return Make(400, "invalid-batch", "Invalid batch", std::move(detail));
}
Problem Problem::BadRequest(std::string detail) {
  return Make(400, "bad-request", "Bad HTTP request", std::move(detail));
}
Problem Problem::NotFound(std::string_view target) {
  // The target may carry a key in its query string: it is never echoed.
  (void)target;
  return Make(404, "not-found", "Not found",
              "no such resource; routes: POST /observe, POST /observe/batch, POST /lookup, GET /healthz, /readyz, "
              "/metrics, /stats, /dashboard");
}
Problem Problem::MethodNotAllowed(std::string_view method, Route route) {
  std::string m(method.substr(0, 16));
  for (char& c : m) {
    if (!std::isalpha(static_cast<unsigned char>(c))) c = '?';
  }
  return Make(405, "method-not-allowed", "Method not allowed",
              "method " + m + " is not allowed on " + std::string(RouteLabel(route)) + "; use " +
                  std::string(AllowedMethod(route)));
}
Problem Problem::BodyTooLarge(std::size_t limit) {
  return Make(413, "body-too-large", "Request body too large",
              limit == 0 ? std::string("this route takes no request body")
                         : "the request body exceeds " + std::to_string(limit) + " bytes for this route");
}
Problem Problem::UnsupportedMediaType(std::string_view content_type) {
  (void)content_type;  // not echoed: an arbitrary client string
  return Make(415, "unsupported-media-type", "Unsupported media type",
              "the request body must be JSON: Content-Type application/json (or application/*+json, "
              "application/x-www-form-urlencoded, or none)");
}
Problem Problem::HeaderTooLarge() {
  return Make(431, "header-too-large", "Request header fields too large",
              "the request line and header fields exceed " + std::to_string(kMaxHeaderBytes) + " bytes");
}
Problem Problem::Unauthorized(bool credentials_presented) {
  return Make(401, "unauthorized", "Unauthorized",
              credentials_presented ? "the bearer token is not valid for this service"
                                    : "this route requires an Authorization: Bearer <token> header");
}
Problem Problem::OriginNotAllowed() {
  return Make(403, "origin-not-allowed", "Origin not allowed",
              "requests from this web origin are not allowed; the operator lists allowed origins with --cors-origins");
}
Problem Problem::HostNotAllowed() {
  // The Host value is not echoed (a client string).
  return Make(421, "host-not-allowed", "Host not allowed",
              "this service does not answer to the Host this request names; the operator lists its names with "
              "--allowed-hosts");
}
Problem Problem::SourceNotAllowed(std::string_view terminal) {
  // The terminal id is the caller's own (from the tokens file, [A-Za-z0-9._-]); the body's source is not echoed.
  return Make(403, "source-not-allowed", "Source not allowed",
              "this caller is terminal '" + std::string(terminal) +
                  "'; a \"source\" must be absent or name that terminal");
}
Problem Problem::RouteNotAllowed(Route route) {
  return Make(403, "route-not-allowed", "Route not allowed",
              "this terminal may not use " + std::string(RouteLabel(route)) +
                  " (its routes: its token's line in the tokens file, or --tls-client-routes for a certificate)");
}
Problem Problem::CertificateNotAllowed(std::string detail) {
  return Make(403, "certificate-not-allowed", "Client certificate not allowed", std::move(detail));
}
Problem Problem::RateLimited(unsigned retry_after_seconds) {
  return TooManyRequests("this terminal is over its rate limit (--rate-limit); retry after the Retry-After delay",
                         retry_after_seconds);
}
Problem Problem::AuthFailuresLimited(unsigned retry_after_seconds) {
  return TooManyRequests("too many failed authentications from this address; retry after the Retry-After delay",
                         retry_after_seconds);
}
Problem Problem::NotRecorded() {
  return Make(404, "not-recorded", "Key not recorded", "PostgreSQL holds no record of this key");
}
Problem Problem::MalformedForm(std::string detail) {
  return Make(400, "malformed-form", "Malformed form", std::move(detail));
}
Problem Problem::Unavailable(std::string detail) {
  return Make(503, "unavailable", "Service unavailable", std::move(detail));
}
Problem Problem::BodyBudgetSpent() {
  return Unavailable("the server holds its limit of request bodies in flight (--max-body-bytes-in-flight); "
                     "this body was not read: retry after the Retry-After delay");
}
Problem Problem::OutcomeUnknown(std::string detail) {
  return Make(503, "outcome-unknown", "Outcome unknown", std::move(detail));
}
Problem Problem::Internal() {
  return Make(500, "internal", "Internal server error", "an unexpected error occurred; see the server log");
}

std::string ProblemBody(const Problem& p) {
  json::object o;
  o["type"] = std::string(kProblemTypePrefix) + p.slug;
  o["title"] = p.title;
  o["status"] = p.status;
  o["detail"] = p.detail;
  if (!p.ai.empty()) o["ai"] = p.ai;
  return json::serialize(o);
}

}  // namespace scangate::server
