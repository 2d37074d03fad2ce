// The Router's operational routes (/healthz, /readyz, /metrics, /stats, /dashboard) and the snapshot /metrics
// and /stats render: the Service's figures plus the Router's own (body budget, rate limits, authentication
// failures). Kept apart from router.cc, which admits and answers the client routes.
#include <string>
#include <string_view>

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include "server/http/router.h"
#include "server/metrics/dashboard.h"

namespace scangate::server {
namespace http = boost::beast::http;

namespace {
constexpr std::string_view kJson = "application/json";
constexpr std::string_view kPrometheusText = "text/plain; version=0.0.4; charset=utf-8";
}  // namespace

MetricsSnapshot Router::Snapshot() const {
  MetricsSnapshot s = service_.Snapshot();
  s.body_bytes_in_flight = body_budget_.in_flight();
  s.body_bytes_limit = body_budget_.limit();
  s.body_budget_refused = body_budget_.refused();
  for (const auto& [label, n] : auth_failures_.Stats().limited) s.auth_failures_limited += n;
  if (limiter_) {
    s.rate_limit = limiter_->Stats();
    s.rate_limit_per_second = config_.rate_limit;
    s.rate_limit_burst = static_cast<std::uint64_t>(limiter_->burst());
  }
  return s;
}

Router::Answer Router::AdminAnswer(Route route, const Header& h) {
  switch (route) {
    case Route::kHealthz:
      return Ok(http::status::ok, R"({"status":"ok"})", kJson, route, &h);
    case Route::kReadyz:
    {
      // An unusable journal leaves the instance ready (new keys are decided in PostgreSQL) but is named.
      // So does a stale follower (--follow: its database's new keys are decided in PostgreSQL meanwhile).
      const std::string journal = service_.JournalState();
      const std::string follower = service_.FollowerState();
      // So does a lagging peer (issue 42: its database's new keys wait or get 503 meanwhile; repeats are answered).
      const std::string peers = service_.PeerState();
      if (service_.ready()) {
        if (journal.empty() && follower.empty() && peers.empty()) {
          return Ok(http::status::ok, R"({"status":"ready"})", kJson, route, &h);
        }
        boost::json::object body{{"status", "ready"}};
        if (!journal.empty()) body["journal"] = journal;
        if (!follower.empty()) body["follower"] = follower;
        if (!peers.empty()) body["peers"] = peers;
        return Ok(http::status::ok, boost::json::serialize(body), kJson, route, &h);
      }
      std::string detail = !service_.warm() ? "warm start from PostgreSQL still running" : "PostgreSQL is unavailable";
      if (!journal.empty()) detail += "; the local journal is " + journal;
      return ProblemAnswer(Problem::Unavailable(detail), route, &h);
    }
    case Route::kMetrics:
      return Ok(http::status::ok, RenderPrometheus(Snapshot()), kPrometheusText, route, &h);
    case Route::kStats:
      return Ok(http::status::ok, RenderStatsJson(Snapshot()), kJson, route, &h);
    case Route::kDashboard: {  // static page (server/metrics/dashboard.h); it polls /stats from the same origin
      Answer a = Ok(http::status::ok, std::string(DashboardHtml()), kDashboardContentType, route, &h);
      a.res.set("Content-Security-Policy", kDashboardCsp);
      a.res.set(http::field::cache_control, "no-store");
      return a;
    }
    default:
      return ProblemAnswer(Problem::NotFound(h.target()), Route::kNotFound, &h);
  }
}

}  // namespace scangate::server
