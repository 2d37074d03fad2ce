// Follower metrics (issue 32): what /metrics and /stats say about the followers (storage/follow/follower.h) — per
// followed database whether the filter is trusted now, how stale it may be, what was applied and how often the
// connection was lost — and how many definitely-new keys were decided in PostgreSQL because a follower was stale.
// Invariant: the label set is bounded (one sample per partition). Written only with --follow on (ack=filter).
// Use: from RenderPrometheus / RenderStatsJson (server/metrics/metrics.cc).
#pragma once

#include <boost/json/object.hpp>

#include "server/metrics/metrics.h"
#include "server/metrics/prom_writer.h"

namespace scangate::server {

// Appends scangate_follower_fresh{partition}, scangate_follower_connected{partition},
// scangate_follower_lag_seconds{partition}, scangate_follower_keys_total{partition},
// scangate_follower_reconnects_total{partition}, scangate_follower_reloads_total{partition} and
// scangate_follower_fallbacks_total. Nothing without followers.
void WriteFollowerMetrics(PromWriter& w, const MetricsSnapshot& s);
// Adds "follower": {"fallbacks", "databases": [{"partition", "connected", "fresh", "lag_seconds", "keys",
// "transactions", "reconnects", "reloads", "error"}]} to /stats. Nothing without followers.
void AddFollowerStats(boost::json::object& o, const MetricsSnapshot& s);

}  // namespace scangate::server
