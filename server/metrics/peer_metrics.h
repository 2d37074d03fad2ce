// Peer metrics (issue 42): what /metrics and /stats say about the peers' commit watermark (storage/peers/) — per
// database (partition) how long a request arriving now stays covered, each other journal owner's lag, heartbeat
// age and keys uncommitted, and this instance's own publisher — and what lacking coverage cost: keys read, parked,
// answered 503. Invariant: labels are bounded (partitions, and instance ids of the peers' rows: a handful).
// Use: from RenderPrometheus / RenderStatsJson (server/metrics/metrics.cc).
#pragma once

#include <boost/json/object.hpp>

#include "server/metrics/metrics.h"
#include "server/metrics/prom_writer.h"

namespace scangate::server {

// scangate_peer_covered{partition}, scangate_peer_covered_for_seconds{partition}, scangate_peer_lagging{partition},
// scangate_peer_lag_seconds{partition,instance}, scangate_peer_heartbeat_age_seconds{partition,instance},
// scangate_peer_uncommitted{partition,instance}, scangate_peer_retired_total{partition},
// scangate_watermark_published{partition}, scangate_watermark_age_seconds{partition},
// scangate_watermark_lag_seconds{partition}, scangate_watermark_failures_total{partition},
// scangate_peer_uncovered_total, scangate_peer_read_duplicates_total, scangate_peer_waits_total,
// scangate_peer_wait_timeouts_total, scangate_watermark_unpublished_fallbacks_total. Nothing without peers.
// scangate_watermark_clock_epoch{partition}, scangate_watermark_clock_steps_total{partition} (issue 55) with the
// publishers; scangate_pg_clock_steps_total{partition}, scangate_pg_clock_ahead_seconds{partition} and
// scangate_pg_clock_behind_seconds{partition} on every instance that reads PostgreSQL's clock.
void WritePeerMetrics(PromWriter& w, const MetricsSnapshot& s);
// Adds "peers": {"window_seconds", "uncovered", "read_duplicates", "waits", "wait_timeouts", "unpublished_fallbacks",
// "databases": [{"partition", "covered_for_seconds", "sample_age_seconds", "lagging", "retired_seen", "peers": [...]}],
// "watermark": [{"partition", "published", "connected", "age_seconds", "lag_seconds", "uncommitted", "updates",
// "failures", "error"}]} to /stats. Nothing without peers.
void AddPeerStats(boost::json::object& o, const MetricsSnapshot& s);

}  // namespace scangate::server
