// The service's routes: which path is which route, the one method each accepts, its body limit, and which
// routes are the clients' (/observe*, /lookup: tokens, CORS) and which are operational (/healthz, /readyz,
// /metrics, /stats, /dashboard). Invariant: a target maps to exactly one route, kNotFound for anything not an
// exact path; the query string never selects a route. Pure functions: no I/O, no state; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace scangate::server {

// Request size limits (the HTTP contract in openapi.yaml).
inline constexpr std::size_t kMaxObserveBodyBytes = 16 * 1024;    // POST /observe and /lookup: 413 above
inline constexpr std::size_t kMaxBatchBodyBytes = 1024 * 1024;    // POST /observe/batch: 413 above
// The operational routes and unknown paths take no body: a request with one is answered at its header (404, 405 or
// 413) and its connection closed, unread, so it never holds --max-body-bytes-in-flight (issue 43).
inline constexpr std::size_t kMaxOtherBodyBytes = 0;
inline constexpr std::size_t kMaxHeaderBytes = 8 * 1024;          // request line + fields: 431 above

enum class Route : std::uint8_t { kObserve, kObserveBatch, kHealthz, kReadyz, kMetrics, kStats, kDashboard, kLookup, kNotFound };
inline constexpr std::size_t kRouteCount = 9;

// Maps a request target (path plus optional query) to its route; the query string is ignored.
Route RouteOf(std::string_view target);
// Label used in metrics and logs, e.g. "/observe", "other" for kNotFound.
std::string_view RouteLabel(Route route);
// Routes a browser may call (CORS, --cors-origins): POST /observe, /observe/batch, /lookup. They also take a
// bearer token when --tokens-file is set.
bool IsClientRoute(Route route);
// The one method each route accepts ("POST" or "GET"; a GET route answers HEAD too, RFC 9110 §9.3.2).
std::string_view AllowedMethod(Route route);
// Whether `method` (as sent) is served on `route`: its AllowedMethod, or HEAD on a GET route.
bool MethodAllowed(Route route, std::string_view method);
// The Allow header of a 405 on `route`: "POST", or "GET, HEAD".
std::string_view AllowHeader(Route route);
// Body size limit applied once the header of a request to `route` has been read.
std::size_t BodyLimitFor(Route route);
// Operational routes (/healthz, /readyz, /metrics, /stats, /dashboard): never need a token; with --admin-listen they are
// served only on the admin listener, and /observe* only on the main one.
bool IsAdminRoute(Route route);

}  // namespace scangate::server
