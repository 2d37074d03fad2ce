#include "server/metrics/follower_metrics.h"

#include <string>

#include <boost/json/array.hpp>

namespace scangate::server {
namespace {
std::string Label(const std::string& partition) {
  return "partition=\"" + (partition.empty() ? std::string("db") : partition) + "\"";
}
}  // namespace

void WriteFollowerMetrics(PromWriter& w, const MetricsSnapshot& s) {
  if (s.followers.empty()) return;
  w.Header("scangate_follower_fresh", "gauge",
           "1 while this database's follower holds every digest committed there more than --follow-max-lag ago "
           "(the filter's 'definitely new' is trusted); 0 = its new keys are decided in PostgreSQL.");
  for (const auto& [p, f] : s.followers) w.Sample("scangate_follower_fresh", Label(p), std::uint64_t{f.fresh});
  w.Header("scangate_follower_connected", "gauge", "1 while the follower streams from this database.");
  for (const auto& [p, f] : s.followers) w.Sample("scangate_follower_connected", Label(p), std::uint64_t{f.connected});
  w.Header("scangate_follower_lag_seconds", "gauge",
           "How stale the filter may be: time since the follower last passed the server's flush position "
           "(-1: never).");
  for (const auto& [p, f] : s.followers) w.Sample("scangate_follower_lag_seconds", Label(p), f.lag_seconds);
  w.Header("scangate_follower_keys_total", "counter",
           "Digests the follower set in the filter (from the stream and the reloads after a reconnection).");
  for (const auto& [p, f] : s.followers) w.Sample("scangate_follower_keys_total", Label(p), f.keys);
  w.Header("scangate_follower_reconnects_total", "counter", "Follower connections lost or refused after the first.");
  for (const auto& [p, f] : s.followers) w.Sample("scangate_follower_reconnects_total", Label(p), f.reconnects);
  w.Header("scangate_follower_reloads_total", "counter",
           "Windows read again after a reconnection (what committed while the follower was away).");
  for (const auto& [p, f] : s.followers) w.Sample("scangate_follower_reloads_total", Label(p), f.reloads);
  w.Single("scangate_follower_fallbacks_total", "counter",
           "Definitely-new keys decided in PostgreSQL because their database's follower was stale.",
           s.follower_fallbacks);
  w.Single("scangate_commit_lag_fallbacks_total", "counter",
           "Definitely-new keys decided in PostgreSQL because a key this instance answered new had waited longer "
           "than --max-commit-lag for its commit (other instances could not know it yet).",
           s.commit_lag_fallbacks);
}

void AddFollowerStats(boost::json::object& o, const MetricsSnapshot& s) {
  if (s.followers.empty()) return;
  boost::json::array dbs;
  for (const auto& [p, f] : s.followers) {
    dbs.push_back(boost::json::object{{"partition", p},
                                      {"connected", f.connected},
                                      {"fresh", f.fresh},
                                      {"lag_seconds", f.lag_seconds},
                                      {"keys", f.keys},
                                      {"transactions", f.transactions},
                                      {"reconnects", f.reconnects},
                                      {"reloads", f.reloads},
                                      {"error", f.error}});
  }
  o["follower"] = boost::json::object{{"fallbacks", s.follower_fallbacks},
                                      {"commit_lag_fallbacks", s.commit_lag_fallbacks},
                                      {"databases", std::move(dbs)}};
}

}  // namespace scangate::server
