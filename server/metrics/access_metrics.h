// Access metrics: what /metrics and /stats say about the request bodies in flight (server/http/body_budget.h),
// connections and requests refused for abuse, and the per-terminal rate limit (server/http/rate_limit.h) — 429s by terminal and the buckets held. Invariant: the label set is bounded — terminal ids come from the
// tokens file (at most kMaxRateLimitLabels, the rest as "(other)"), client addresses are never a label (one
// "(address)" aggregate). The rate limit's are written only when the limiter runs (MetricsSnapshot::rate_limit).
// Use: from RenderPrometheus / RenderStatsJson (server/metrics/metrics.cc).
#pragma once

#include <boost/json/object.hpp>

#include "server/metrics/metrics.h"
#include "server/metrics/prom_writer.h"

namespace scangate::server {

// Appends scangate_body_bytes_in_flight, _limit, scangate_body_budget_refused_total,
// scangate_connections_refused_total{reason}, scangate_tls_client_certificate_refused_total,
// scangate_auth_failures_limited_total and (limiter on)
// scangate_rate_limited_total{terminal}, scangate_rate_limit_buckets and _evictions_total.
void WriteAccessMetrics(PromWriter& w, const MetricsSnapshot& s);
// Adds "body_budget": {"in_flight_bytes", "limit_bytes", "refused"}, "refused": {"connections_per_address",
// "connections_full", "client_certificates", "auth_failures_limited"} and (limiter on) "rate_limit":
// {"per_second", "burst", "buckets", "evictions", "limited": {terminal: n}} to /stats.
void AddAccessStats(boost::json::object& o, const MetricsSnapshot& s);

}  // namespace scangate::server
