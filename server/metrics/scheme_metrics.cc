#include "server/metrics/scheme_metrics.h"

#include <limits>
#include <string>

#include <boost/json/array.hpp>

#include "core/time_format.h"

namespace scangate::server {
namespace {
constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

std::string Partition(const std::string& partition) {
  return "partition=\"" + (partition.empty() ? std::string("db") : partition) + "\"";
}

// The previous secret may go: no rotation recorded, or its horizon (pins and packs included) has passed by
// PostgreSQL's clock, as the start check judges it (storage/scheme/scheme_record.h) — never by this host's wall
// clock, whatever its offset; not while that clock is unknown.
bool CanGo(const MetricsSnapshot::DigestSchemeSample& d) {
  return !d.rotation ||
         (d.previous_needed_until_us != kNever && d.pg_now_us && *d.pg_now_us >= d.previous_needed_until_us);
}
}  // namespace

void WriteSchemeMetrics(PromWriter& w, const MetricsSnapshot& s) {
  if (!s.digest_schemes.empty()) {
    w.Header("scangate_digest_previous_needed_until_seconds", "gauge",
             "Unix time, by PostgreSQL's clock, until which the previous digest secret must stay set (the rotation's "
             "start + the horizon, or the latest keep_until of a row then held, moved by the steps of that clock "
             "recorded since the start); 0 without a rotation, +Inf with --retention=off.");
    for (const auto& d : s.digest_schemes) {
      const double v = !d.rotation ? 0.0
                       : d.previous_needed_until_us == kNever ? std::numeric_limits<double>::infinity()
                                                               : static_cast<double>(d.previous_needed_until_us) / 1e6;
      w.Sample("scangate_digest_previous_needed_until_seconds", Partition(d.partition), v);
    }
    w.Header("scangate_digest_previous_can_go", "gauge",
             "1 when --digest-secret-previous-file may be removed (no rotation needs it any more, by PostgreSQL's "
             "clock; 0 while this instance has no reading of that clock).");
    for (const auto& d : s.digest_schemes) {
      w.Sample("scangate_digest_previous_can_go", Partition(d.partition), std::uint64_t{CanGo(d)});
    }
    w.Header("scangate_digest_scheme_fenced", "gauge",
             "1 when the database records another digest scheme than this instance's (another instance rotated the "
             "secret): its inserts are refused and it answers no key new; restart it with the new secret.");
    for (const auto& d : s.digest_schemes) {
      w.Sample("scangate_digest_scheme_fenced", Partition(d.partition), std::uint64_t{d.fenced});
    }
  }
  w.Single("scangate_digest_previous_duplicates_total", "counter",
           "Keys answered duplicate because PostgreSQL holds them under the previous digest secret (a rotation).",
           s.previous_digest_duplicates);
}

void AddSchemeStats(boost::json::object& o, const MetricsSnapshot& s) {
  boost::json::array dbs;
  for (const auto& d : s.digest_schemes) {
    boost::json::object x{{"partition", d.partition.empty() ? std::string("db") : d.partition},
                          {"rotation", d.rotation},
                          {"previous_can_go", CanGo(d)},
                          {"fenced", d.fenced}};
    if (d.rotation) {
      x["rotation_started_at"] = Rfc3339Micros(d.rotation_started_us);
      x["previous_needed_until"] =
          d.previous_needed_until_us == kNever ? std::string("never") : Rfc3339Micros(d.previous_needed_until_us);
    }
    if (d.watched) x["lease"] = d.confirmed;
    dbs.push_back(std::move(x));
  }
  o["digest_scheme"] = boost::json::object{{"fingerprint", s.digest_fingerprint},
                                           {"previous_secret", s.digest_previous_set},
                                           {"previous_duplicates", s.previous_digest_duplicates},
                                           {"databases", std::move(dbs)}};
}

}  // namespace scangate::server
