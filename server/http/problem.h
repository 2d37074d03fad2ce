// RFC 9457 problem details: every refusal the service answers (4xx, 503, 500) as a Problem with a stable slug
// (type "urn:scangate:problem:<slug>"), and its application/problem+json body. Invariant: a detail never
// echoes client input (a target, a method, a content type, a key or a source may carry a secret or a key);
// exception text never reaches a client (Internal()). Pure: no I/O, no state; any thread.
#pragma once

#include <string>
#include <string_view>

#include "server/http/route.h"

namespace scangate::server {

// An RFC 9457 problem. type is "urn:scangate:problem:" + slug.
struct Problem {
  unsigned status = 500;
  std::string slug;
  std::string title;
  std::string detail;
  std::string ai;  // invalid-gs1 only: the GS1 Application Identifier at fault (extension member "ai")
  unsigned retry_after_seconds = 0;  // Retry-After of a 429 (a 503 always says 1)

  static Problem MalformedJson(std::string detail);
  static Problem MalformedForm(std::string detail);
  // 400 duplicate-member: a JSON object names a member twice (server/http/json_members.h).
  static Problem DuplicateMember(std::string detail);       // 400 malformed-form (urlencoded body)
  static Problem InvalidKey(std::string detail);
  static Problem InvalidSource(std::string detail);
  // 400 invalid-idempotency-key: an Idempotency-Key header (or a batch entry's "request_id") that is not 1..255
  // visible ASCII characters (the header may quote them, as the IETF draft's sf-string), or is given twice.
  static Problem InvalidIdempotencyKey(std::string detail);
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
  static Problem HostNotAllowed();  // 421 host-not-allowed: the Host header is not in --allowed-hosts
  // 403 source-not-allowed: a body "source" that names another terminal than the token's (`terminal`).
  static Problem SourceNotAllowed(std::string_view terminal);
  static Problem RouteNotAllowed(Route route);             // 403 route-not-allowed: the terminal's routes exclude it
  // 403 certificate-not-allowed (mTLS): the client certificate names no terminal, or not the token's.
  static Problem CertificateNotAllowed(std::string detail);
  static Problem RateLimited(unsigned retry_after_seconds);  // 429 rate-limited (+ Retry-After)
  // 429 rate-limited (+ Retry-After): this client address sent too many wrong tokens (checked before verifying).
  static Problem AuthFailuresLimited(unsigned retry_after_seconds);
  static Problem NotRecorded();                           // 404 not-recorded (POST /lookup)
  static Problem Unavailable(std::string detail);
  // 503 unavailable: --max-body-bytes-in-flight is held by other requests' bodies (this one was not read).
  static Problem BodyBudgetSpent();
  // 503 outcome-unknown (+ Retry-After like unavailable): the attempt MAY have recorded the key (in-doubt
  // COMMIT, or the request deadline passed while its transaction was in flight).
  static Problem OutcomeUnknown(std::string detail);
  static Problem Internal();                              // never carries exception text to the client
};

// application/problem+json body of `p`.
std::string ProblemBody(const Problem& p);

}  // namespace scangate::server
