#include "server/metrics/peer_metrics.h"

#include <string>

#include <boost/json/array.hpp>

namespace scangate::server {
namespace {
std::string Partition(const std::string& partition) {
  return "partition=\"" + (partition.empty() ? std::string("db") : partition) + "\"";
}
std::string PeerLabels(const std::string& partition, const storage::PeerInfo& p) {
  return Partition(partition) + ",instance=\"" + p.id + "\"";  // a UUID: no character to escape
}
bool Any(const MetricsSnapshot& s) { return !s.peer_views.empty() || !s.publishers.empty(); }
}  // namespace

void WritePeerMetrics(PromWriter& w, const MetricsSnapshot& s) {
  if (!s.pg_clock_steps.empty()) {
    w.Header("scangate_pg_clock_steps_total", "counter",
             "Steps of PostgreSQL's clock this instance's clock reader saw (a reading outside the bounds it held by more "
             "than 5 ms, also across a restart or failover): each opened a new clock epoch, and the peers' watermarks "
             "covered nothing until republished.");
    for (const auto& [p, n] : s.pg_clock_steps) w.Sample("scangate_pg_clock_steps_total", Partition(p), n);
  }
  if (!s.pg_clock_ahead_seconds.empty()) {
    w.Header("scangate_pg_clock_ahead_seconds", "gauge",
             "Every forward step of PostgreSQL's clock recorded in the database: rows written before a step are aged "
             "by the time since, not by the jump, so they expire that much later by the clock.");
    for (const auto& [p, v] : s.pg_clock_ahead_seconds) w.Sample("scangate_pg_clock_ahead_seconds", Partition(p), v);
    w.Header("scangate_pg_clock_behind_seconds", "gauge",
             "Every step back of PostgreSQL's clock recorded in the database: rows written before a step are aged by "
             "the time since, so they expire that much earlier by the clock.");
    for (const auto& [p, v] : s.pg_clock_behind_seconds) w.Sample("scangate_pg_clock_behind_seconds", Partition(p), v);
  }
  if (!Any(s)) return;
  if (!s.peer_views.empty()) {
    w.Header("scangate_peer_covered", "gauge",
             "1 while every running journal owner of this database covers a request arriving now (its keys may be "
             "decided new here); 0 = new keys are read, wait or get 503 (a peer lags, died with keys in its journal, "
             "or its watermark cannot be read).");
    for (const auto& [p, v] : s.peer_views) {
      w.Sample("scangate_peer_covered", Partition(p), std::uint64_t{v.covered_for_seconds >= 0});
    }
    w.Header("scangate_peer_covered_for_seconds", "gauge",
             "How much longer a request arriving now stays covered by the last sample of the peers' watermark "
             "(negative: by how much coverage is short).");
    for (const auto& [p, v] : s.peer_views) w.Sample("scangate_peer_covered_for_seconds", Partition(p), v.covered_for_seconds);
    w.Header("scangate_peer_lagging", "gauge", "Running journal owners whose watermark is behind by more than the window.");
    for (const auto& [p, v] : s.peer_views) w.Sample("scangate_peer_lagging", Partition(p), v.lagging);
    w.Header("scangate_peer_lag_seconds", "gauge",
             "now() - covered_until of each other instance's row: keys it answered new since are not known committed.");
    for (const auto& [p, v] : s.peer_views) {
      for (const auto& peer : v.peers) w.Sample("scangate_peer_lag_seconds", PeerLabels(p, peer), peer.lag_seconds);
    }
    w.Header("scangate_peer_heartbeat_age_seconds", "gauge", "Since each other instance last updated its row.");
    for (const auto& [p, v] : s.peer_views) {
      for (const auto& peer : v.peers) {
        w.Sample("scangate_peer_heartbeat_age_seconds", PeerLabels(p, peer), peer.heartbeat_age_seconds);
      }
    }
    w.Header("scangate_peer_uncommitted", "gauge", "Keys each other instance answered new and had not committed, at its last heartbeat.");
    for (const auto& [p, v] : s.peer_views) {
      for (const auto& peer : v.peers) w.Sample("scangate_peer_uncommitted", PeerLabels(p, peer), peer.uncommitted);
    }
    w.Header("scangate_peer_retired_total", "counter",
             "Running journal owners seen retired by an operator (scangate --retire-instance): an explicit loss window.");
    for (const auto& [p, v] : s.peer_views) w.Sample("scangate_peer_retired_total", Partition(p), v.retired_seen);
  }
  if (!s.publishers.empty()) {
    w.Header("scangate_watermark_published", "gauge", "1 while this instance's row is registered and held by this process (0: not yet, its lease lapsed, or it was "
             "fenced because another process took its identity over).");
    for (const auto& [p, m] : s.publishers) w.Sample("scangate_watermark_published", Partition(p), std::uint64_t{m.published});
    w.Header("scangate_watermark_age_seconds", "gauge",
             "Since this instance last updated its row (-1: never): the other instances wait once it passes the window.");
    for (const auto& [p, m] : s.publishers) w.Sample("scangate_watermark_age_seconds", Partition(p), m.age_seconds);
    w.Header("scangate_watermark_lag_seconds", "gauge",
             "now() - covered_until at this instance's last update: how far behind its own commits are.");
    for (const auto& [p, m] : s.publishers) w.Sample("scangate_watermark_lag_seconds", Partition(p), m.lag_seconds);
    w.Header("scangate_watermark_failures_total", "counter", "Watermark connections or updates that failed.");
    for (const auto& [p, m] : s.publishers) w.Sample("scangate_watermark_failures_total", Partition(p), m.failures);
    w.Header("scangate_watermark_clock_epoch", "gauge",
             "The database's clock epoch this instance's watermark is published under (-1: none yet); it grows when "
             "PostgreSQL restarts, fails over or its clock steps.");
    for (const auto& [p, m] : s.publishers) w.Sample("scangate_watermark_clock_epoch", Partition(p), static_cast<double>(m.clock_epoch));
    w.Header("scangate_watermark_clock_steps_total", "counter",
             "Steps of PostgreSQL's clock this instance saw (now() outside what its boot clock allowed since the last "
             "reading): each opened a new clock epoch, and the peers' watermarks covered nothing until republished.");
    for (const auto& [p, m] : s.publishers) w.Sample("scangate_watermark_clock_steps_total", Partition(p), m.clock_steps);
  }
  w.Single("scangate_peer_uncovered_total", "counter",
           "Keys that could not be decided new when they arrived because a peer's watermark did not cover them.",
           s.peer_uncovered);
  w.Single("scangate_peer_read_duplicates_total", "counter",
           "Of those, answered duplicate by a read of PostgreSQL (the key was committed).", s.peer_read_duplicates);
  w.Single("scangate_peer_waits_total", "counter", "Of those, parked to wait for the peers' coverage (--peer-wait).",
           s.peer_waits);
  w.Single("scangate_peer_wait_timeouts_total", "counter",
           "Keys answered 503 because the peers did not cover them within --peer-wait (or the request deadline).",
           s.peer_wait_timeouts);
  w.Single("scangate_watermark_unpublished_fallbacks_total", "counter",
           "Definitely-new keys decided in PostgreSQL because this instance's own row was not registered or held (or, with "
           "--journal=off, its presence lock was not confirmed).",
           s.unpublished_fallbacks);
}

void AddPeerStats(boost::json::object& o, const MetricsSnapshot& s) {
  if (!Any(s)) return;
  boost::json::array dbs;
  for (const auto& [p, v] : s.peer_views) {
    boost::json::array peers;
    for (const auto& peer : v.peers) {
      peers.push_back(boost::json::object{{"instance", peer.id},
                                          {"incarnation", peer.incarnation},
                                          {"state", peer.state},
                                          {"host", peer.host},
                                          {"pid", peer.pid},
                                          {"lag_seconds", peer.lag_seconds},
                                          {"heartbeat_age_seconds", peer.heartbeat_age_seconds},
                                          {"uncommitted", peer.uncommitted},
                                          {"clock_epoch_current", peer.clock_current}});
    }
    dbs.push_back(boost::json::object{{"partition", p},
                                      {"covered", v.covered_for_seconds >= 0},
                                      {"covered_for_seconds", v.covered_for_seconds},
                                      {"sample_age_seconds", v.sample_age_seconds},
                                      {"lagging", v.lagging},
                                      {"retired_seen", v.retired_seen},
                                      {"peers", std::move(peers)}});
  }
  boost::json::array mine;
  for (const auto& [p, m] : s.publishers) {
    mine.push_back(boost::json::object{{"partition", p},
                                       {"published", m.published},
                                       {"lease", m.lease},
                                       {"connected", m.connected},
                                       {"age_seconds", m.age_seconds},
                                       {"lag_seconds", m.lag_seconds},
                                       {"uncommitted", m.uncommitted},
                                       {"updates", m.updates},
                                       {"failures", m.failures},
                                       {"clock_epoch", m.clock_epoch},
                                       {"clock_steps", m.clock_steps},
                                       {"error", m.error}});
  }
  o["peers"] = boost::json::object{{"window_seconds", s.peer_window_seconds},
                                   {"uncovered", s.peer_uncovered},
                                   {"read_duplicates", s.peer_read_duplicates},
                                   {"waits", s.peer_waits},
                                   {"wait_timeouts", s.peer_wait_timeouts},
                                   {"unpublished_fallbacks", s.unpublished_fallbacks},
                                   {"databases", std::move(dbs)},
                                   {"watermark", std::move(mine)}};
}

}  // namespace scangate::server
