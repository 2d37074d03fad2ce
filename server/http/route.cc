#include "server/http/route.h"

namespace scangate::server {

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

bool MethodAllowed(Route route, std::string_view method) {
  return method == AllowedMethod(route) || (!IsClientRoute(route) && method == "HEAD");
}

std::string_view AllowHeader(Route route) { return IsClientRoute(route) ? "POST" : "GET, HEAD"; }

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

}  // namespace scangate::server
