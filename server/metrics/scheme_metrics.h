// Digest-scheme metrics (issue 55): what /metrics and /stats say about the digest scheme each database records
// (storage/scheme/scheme_record.h) — whether a rotation keeps the previous secret needed and until when, whether
// this instance's scheme is still the database's (--ack=filter's lease, storage/scheme/scheme_watch.h) — and the
// keys a rotation found under the previous digest. Labels: partitions only. Use: from RenderPrometheus /
// RenderStatsJson (server/metrics/metrics.cc).
#pragma once

#include <boost/json/object.hpp>

#include "server/metrics/metrics.h"
#include "server/metrics/prom_writer.h"

namespace scangate::server {

// scangate_digest_previous_needed_until_seconds{partition} (Unix time until which the previous secret must stay
// set; 0 without a rotation, +Inf with --retention=off), scangate_digest_previous_can_go{partition} (1 when it may be
// removed now), scangate_digest_scheme_fenced{partition} (1: the database records another scheme; this instance is
// fenced), scangate_digest_previous_duplicates_total.
void WriteSchemeMetrics(PromWriter& w, const MetricsSnapshot& s);
// Adds "digest_scheme": {"fingerprint", "previous_secret", "previous_duplicates", "databases": [{"partition",
// "rotation", "rotation_started_at", "previous_needed_until", "previous_can_go", "lease", "fenced"}]} to /stats.
void AddSchemeStats(boost::json::object& o, const MetricsSnapshot& s);

}  // namespace scangate::server
