#include "server/http/request.h"

#include <algorithm>
#include <array>
#include <cctype>

#include <boost/json/monotonic_resource.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/parse_options.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include "core/utf8.h"

namespace scangate::server {
namespace json = boost::json;

namespace {

constexpr std::string_view kProblemTypePrefix = "urn:scangate:problem:";
// Stack buffer for parsing a typical /observe body without touching the heap; larger bodies spill to the
// default resource through the monotonic resource's upstream.
constexpr std::size_t kParseArenaBytes = 4096;

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Number of Unicode code points of a string already validated as UTF-8 (Boost.JSON rejects invalid UTF-8).
std::size_t CodePoints(std::string_view s) {
  return static_cast<std::size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

// Parses `body` as JSON with the service's limits into storage `sp`; on any error sets `problem`.
json::value ParseJson(std::string_view body, json::storage_ptr sp, std::optional<Problem>& problem) {
  json::parse_options opts;
  opts.max_depth = kMaxJsonDepth;
  opts.allow_invalid_utf8 = false;  // the default, stated: invalid UTF-8 inside strings is a syntax error
  opts.allow_comments = false;
  opts.allow_trailing_commas = false;
  json::error_code ec;
  json::value out = json::parse(json::string_view(body.data(), body.size()), ec, std::move(sp), opts);
  if (ec) {
    if (body.empty()) {
      problem = Problem::MalformedJson("the request body is empty; a JSON object is required");
    } else if (ec == json::error::too_deep) {
      problem = Problem::MalformedJson("JSON nesting is deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    } else {
      problem = Problem::MalformedJson("the request body is not valid JSON (UTF-8): " + ec.message());
    }
  }
  return out;
}

// Validates one key/source pair. `where` prefixes the detail ("" or "keys[3]: ").
std::optional<Problem> ValidateKey(std::string_view key, const std::string& where) {
  if (key.size() < kMinKeyBytes || key.size() > kMaxKeyBytes) {
    return Problem::InvalidKey(where + "\"key\" must be " + std::to_string(kMinKeyBytes) + ".." +
                               std::to_string(kMaxKeyBytes) + " bytes of UTF-8, got " + std::to_string(key.size()));
  }
  if (key.find('\0') != std::string_view::npos) {
    return Problem::InvalidKey(where + "\"key\" must not contain NUL (U+0000)");
  }
  return std::nullopt;
}

std::optional<Problem> ValidateSource(std::string_view source, const std::string& where) {
  if (CodePoints(source) > kMaxSourceChars) {
    return Problem::InvalidSource(where + "\"source\" must be at most " + std::to_string(kMaxSourceChars) +
                                  " characters");
  }
  if (source.find('\0') != std::string_view::npos) {
    return Problem::InvalidSource(where + "\"source\" must not contain NUL (U+0000)");
  }
  return std::nullopt;
}

// Reads {"key": string, "source"?: string|null} from an object; unknown members are ignored.
std::variant<Observation, Problem> ObservationOf(const json::object& obj, const std::string& where) {
  Observation o;
  const json::value* key = obj.if_contains("key");
  if (key == nullptr) return Problem::InvalidKey(where + "member \"key\" is required");
  const json::string* key_str = key->if_string();
  if (key_str == nullptr) return Problem::InvalidKey(where + "\"key\" must be a string");
  if (auto p = ValidateKey(*key_str, where)) return *std::move(p);
  o.key.assign(key_str->data(), key_str->size());
  if (const json::value* src = obj.if_contains("source"); src != nullptr && !src->is_null()) {
    const json::string* src_str = src->if_string();
    if (src_str == nullptr) return Problem::InvalidSource(where + "\"source\" must be a string or null");
    if (auto p = ValidateSource(*src_str, where)) return *std::move(p);
    o.source.assign(src_str->data(), src_str->size());
  }
  return o;
}

Problem Make(unsigned status, std::string_view slug, std::string_view title, std::string detail) {
  return Problem{status, std::string(slug), std::string(title), std::move(detail), {}, 0};
}

}  // namespace

Route RouteOf(std::string_view target) {
  if (auto q = target.find('?'); q != std::string_view::npos) target = target.substr(0, q);
  if (target == "/observe") return Route::kObserve;
  if (target == "/observe/batch") return Route::kObserveBatch;
  if (target == "/healthz") return Route::kHealthz;
  if (target == "/readyz") return Route::kReadyz;
  if (target == "/metrics") return Route::kMetrics;
  if (target == "/stats") return Route::kStats;
  if (target == "/dashboard") return Route::kDashboard;
  if (target == "/lookup") return Route::kLookup;
  return Route::kNotFound;
}

std::string_view RouteLabel(Route route) {
  switch (route) {
    case Route::kObserve: return "/observe";
    case Route::kObserveBatch: return "/observe/batch";
    case Route::kHealthz: return "/healthz";
    case Route::kReadyz: return "/readyz";
    case Route::kMetrics: return "/metrics";
    case Route::kStats: return "/stats";
    case Route::kDashboard: return "/dashboard";
    case Route::kLookup: return "/lookup";
    case Route::kNotFound: break;
  }
  return "other";
}

bool IsClientRoute(Route route) {
  return route == Route::kObserve || route == Route::kObserveBatch || route == Route::kLookup;
}

std::string_view AllowedMethod(Route route) { return IsClientRoute(route) ? "POST" : "GET"; }

std::size_t BodyLimitFor(Route route) {
  switch (route) {
    case Route::kObserve:
    case Route::kLookup: return kMaxObserveBodyBytes;
    case Route::kObserveBatch: return kMaxBatchBodyBytes;
    default: return kMaxOtherBodyBytes;
  }
}

bool IsAdminRoute(Route route) {
  return route == Route::kHealthz || route == Route::kReadyz || route == Route::kMetrics || route == Route::kStats ||
         route == Route::kDashboard;
}

std::optional<std::string_view> BearerToken(std::string_view authorization) {
  constexpr std::string_view kScheme = "bearer";
  if (authorization.size() <= kScheme.size()) return std::nullopt;
  if (Lower(authorization.substr(0, kScheme.size())) != kScheme) return std::nullopt;
  std::string_view rest = authorization.substr(kScheme.size());
  if (rest.front() != ' ') return std::nullopt;
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\t')) rest.remove_suffix(1);
  if (rest.empty() || rest.size() > kMaxBearerTokenBytes) return std::nullopt;
  // token68 = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
  std::size_t i = 0;
  auto token_char = [](unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/';
  };
  while (i < rest.size() && token_char(static_cast<unsigned char>(rest[i]))) ++i;
  if (i == 0) return std::nullopt;
  while (i < rest.size() && rest[i] == '=') ++i;
  if (i != rest.size()) return std::nullopt;
  return rest;
}

std::string WwwAuthenticate(bool credentials_presented) {
  return credentials_presented ? R"(Bearer realm="scangate", error="invalid_token")" : R"(Bearer realm="scangate")";
}

Problem Problem::MalformedJson(std::string detail) {
  return Make(400, "malformed-json", "Malformed JSON", std::move(detail));
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
              "/metrics, /stats");
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
              "the request body exceeds " + std::to_string(limit) + " bytes for this route");
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
Problem Problem::SourceNotAllowed(std::string_view terminal) {
  // The terminal id is the caller's own (from the tokens file, [A-Za-z0-9._-]); the body's source is not echoed.
  return Make(403, "source-not-allowed", "Source not allowed",
              "this token belongs to terminal '" + std::string(terminal) +
                  "'; a \"source\" must be absent or name that terminal");
}
Problem Problem::RouteNotAllowed(Route route) {
  return Make(403, "route-not-allowed", "Route not allowed",
              "this token may not use " + std::string(RouteLabel(route)) + " (its routes in the tokens file)");
}
Problem Problem::RateLimited(unsigned retry_after_seconds) {
  Problem p = Make(429, "rate-limited", "Too many requests",
                   "this terminal is over its rate limit (--rate-limit); retry after the Retry-After delay");
  p.retry_after_seconds = retry_after_seconds;
  return p;
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

std::optional<Problem> CheckContentType(std::string_view content_type) {
  std::string_view media = content_type.substr(0, content_type.find(';'));
  media = Trim(media);
  if (media.empty()) return std::nullopt;
  const std::string m = Lower(media);
  if (m == "application/json" || m == "application/x-www-form-urlencoded") return std::nullopt;
  constexpr std::string_view kApp = "application/";
  constexpr std::string_view kJsonSuffix = "+json";
  if (m.size() > kApp.size() + kJsonSuffix.size() && m.starts_with(kApp) && m.ends_with(kJsonSuffix)) {
    return std::nullopt;
  }
  return Problem::UnsupportedMediaType(content_type);
}

bool IsFormContentType(std::string_view content_type) {
  return Lower(Trim(content_type.substr(0, content_type.find(';')))) == "application/x-www-form-urlencoded";
}

namespace {
int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// WHATWG application/x-www-form-urlencoded percent-decoding of one name or value; nullopt on a bad escape
// (stricter than WHATWG, which passes it through: a client sending one has a bug worth reporting).
std::optional<std::string> FormDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '+') {
      out.push_back(' ');
    } else if (c == '%') {
      if (i + 2 >= s.size()) return std::nullopt;
      const int hi = HexValue(s[i + 1]);
      const int lo = HexValue(s[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// Strict UTF-8 check of a decoded form value (JSON strings get Boost.JSON's; form bytes arrive raw).
bool ValidUtf8(std::string_view s) { return IsValidUtf8(s); }
}  // namespace

std::variant<Observation, Problem> ParseObserveForm(std::string_view body) {
  std::optional<std::string> key;
  std::optional<std::string> source;
  std::size_t start = 0;
  while (start <= body.size()) {
    std::size_t end = body.find('&', start);
    if (end == std::string_view::npos) end = body.size();
    const std::string_view pair = body.substr(start, end - start);
    start = end + 1;
    if (pair.empty()) continue;
    const std::size_t eq = pair.find('=');
    const auto name = FormDecode(pair.substr(0, eq));
    const auto value = FormDecode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1));
    if (!name || !value) return Problem::MalformedForm("the form body has an invalid %-escape");
    std::optional<std::string>* slot = *name == "key" ? &key : *name == "source" ? &source : nullptr;
    if (slot == nullptr) continue;
    if (slot->has_value()) return Problem::MalformedForm("form field \"" + *name + "\" is given more than once");
    if (!ValidUtf8(*value)) return Problem::MalformedForm("form field \"" + *name + "\" is not valid UTF-8");
    *slot = *value;
  }
  if (!key) return Problem::InvalidKey("form field \"key\" is required");
  if (auto p = ValidateKey(*key, "")) return *std::move(p);
  Observation o;
  o.key = *std::move(key);
  if (source) {
    if (auto p = ValidateSource(*source, "")) return *std::move(p);
    o.source = *std::move(source);
  }
  return o;
}

std::variant<Observation, Problem> ParseObservation(std::string_view body, std::string_view content_type) {
  if (IsFormContentType(content_type)) {
    const std::size_t first = body.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos || body[first] != '{') return ParseObserveForm(body);
  }
  return ParseObserve(body);
}

std::variant<Observation, Problem> ParseObserve(std::string_view body) {
  std::array<unsigned char, kParseArenaBytes> arena;
  json::monotonic_resource mr(arena.data(), arena.size());
  std::optional<Problem> problem;
  const json::value v = ParseJson(body, &mr, problem);
  if (problem) return *std::move(problem);
  const json::object* obj = v.if_object();
  if (obj == nullptr) return Problem::InvalidKey("the request body must be a JSON object with a string member \"key\"");
  return ObservationOf(*obj, "");
}

std::variant<BatchRequest, Problem> ParseBatch(std::string_view body) {
  std::array<unsigned char, kParseArenaBytes> arena;
  json::monotonic_resource mr(arena.data(), arena.size());
  std::optional<Problem> problem;
  const json::value v = ParseJson(body, &mr, problem);
  if (problem) return *std::move(problem);
  const json::object* obj = v.if_object();
  if (obj == nullptr) return Problem::InvalidBatch("the request body must be a JSON object with an array member \"keys\"");
  const json::value* keys = obj->if_contains("keys");
  if (keys == nullptr) return Problem::InvalidBatch("member \"keys\" is required");
  const json::array* arr = keys->if_array();
  if (arr == nullptr) return Problem::InvalidBatch("\"keys\" must be an array");
  if (arr->size() < kMinBatchEntries || arr->size() > kMaxBatchEntries) {
    return Problem::InvalidBatch("\"keys\" must hold " + std::to_string(kMinBatchEntries) + ".." +
                                 std::to_string(kMaxBatchEntries) + " entries, got " + std::to_string(arr->size()));
  }
  BatchRequest batch;
  batch.entries.reserve(arr->size());
  for (std::size_t i = 0; i < arr->size(); ++i) {
    const json::value& e = (*arr)[i];
    const std::string where = "keys[" + std::to_string(i) + "]: ";
    if (const json::string* s = e.if_string()) {
      if (auto p = ValidateKey(*s, where)) return *std::move(p);
      batch.entries.push_back(Observation{std::string(s->data(), s->size()), {}});
    } else if (const json::object* o = e.if_object()) {
      auto r = ObservationOf(*o, where);
      if (auto* p = std::get_if<Problem>(&r)) return std::move(*p);
      batch.entries.push_back(std::get<Observation>(std::move(r)));
    } else {
      return Problem::InvalidBatch(where + "an entry must be a string or an object {\"key\", \"source\"}");
    }
  }
  return batch;
}

}  // namespace scangate::server
