// Request bodies of the HTTP service: parsing and validation with Boost.JSON (and
// application/x-www-form-urlencoded for /observe and /lookup), and the Idempotency-Key header. Routes and their
// limits: route.h; the media types read: content_type.h; bearer credentials: auth.h; problem bodies: problem.h; the
// bodies of successful answers: answer_body.h. No I/O, no clock,
// no global state, so it can be unit-tested and fuzzed. Invariant: every rejected input yields a Problem with a
// 4xx status and a stable slug; nothing here ever throws for any byte string given as a body.
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
#include "server/http/problem.h"
#include "server/http/route.h"

namespace scangate::server {

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

// One observation: the raw key (never logged) and its optional source tag ("" when absent). Idempotency-Key
// (issue 34): `idempotency_key`, the header of /observe or the "request_id" of a batch entry ("" when absent:
// then the observation is decided exactly as without the feature), and `scope`, whose idempotency keys they
// are (the Router sets it: the terminal, else the source, else the client address).
struct Observation {
  std::string key;
  std::string source;
  std::string idempotency_key;
  std::string scope;
};

// The longest idempotency key accepted (Idempotency-Key header, a batch entry's "request_id"): Stripe's limit.
inline constexpr std::size_t kMaxIdempotencyKeyBytes = 255;
// An Idempotency-Key header's value as the key it carries: 1..255 visible ASCII characters (0x21-0x7E), or the
// IETF draft's sf-string form, the same quoted (spaces allowed inside, no '"' or '\\'); else a 400
// invalid-idempotency-key problem. Pure.
std::variant<std::string, Problem> ParseIdempotencyKey(std::string_view header);
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
