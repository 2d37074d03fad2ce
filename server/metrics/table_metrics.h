// Table metrics: what /metrics and /stats say about scan_keys itself — the de-duplication horizon's expiry
// (rows expired, the oldest row's age, the expiry lag and its falling-behind episodes), the table's and its
// indexes' bytes and dead tuples (storage/horizon/expiry.h reads them after every pass), and the first_seen BRIN
// summarizer (storage/horizon/brin_summarizer.h), and the epochs' switcher (storage/epochs/switcher.h). Invariant: a
// figure is written only when its source runs (an optional snapshot field is empty otherwise), and every vital sign
// is the last pass's (no query per scrape).
// Use: from RenderPrometheus / RenderStatsJson (server/metrics/metrics.cc).
#pragma once

#include <boost/json/object.hpp>

#include "server/metrics/metrics.h"
#include "server/metrics/prom_writer.h"

namespace scangate::server {

// Appends the table's metric families to a Prometheus exposition.
void WriteTableMetrics(PromWriter& w, const MetricsSnapshot& s);
// Adds "retention", "expiry" and "brin" to a /stats object.
void AddTableStats(boost::json::object& o, const MetricsSnapshot& s);

}  // namespace scangate::server
