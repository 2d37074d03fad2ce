#include "storage/peers/peer_view.h"

#include <algorithm>
#include <utility>

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

namespace scangate::storage {
namespace {

namespace json = boost::json;

std::int64_t IntOf(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr || v->is_null()) return 0;
  if (v->is_int64()) return v->as_int64();
  if (v->is_uint64()) return static_cast<std::int64_t>(v->as_uint64());
  if (v->is_double()) return static_cast<std::int64_t>(v->as_double());
  return 0;
}

bool BoolOf(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v != nullptr && v->is_bool() && v->as_bool();
}

std::string StringOf(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v != nullptr && v->is_string() ? std::string(v->as_string()) : std::string();
}

// The rows of PeersJsonSql; throws on a malformed text.
std::vector<PeerInfo> Parse(std::string_view text) {
  std::vector<PeerInfo> peers;
  const json::value v = json::parse(text);
  for (const json::value& row : v.as_array()) {
    const json::object& o = row.as_object();
    PeerInfo p;
    p.id = StringOf(o, "id");
    p.incarnation = StringOf(o, "incarnation");
    p.state = StringOf(o, "state");
    p.lag_seconds = static_cast<double>(IntOf(o, "lag_us")) * 1e-6;
    p.heartbeat_age_seconds = static_cast<double>(IntOf(o, "age_us")) * 1e-6;
    p.uncommitted = static_cast<std::uint64_t>(std::max<std::int64_t>(0, IntOf(o, "uncommitted")));
    p.host = StringOf(o, "host");
    p.pid = IntOf(o, "pid");
    p.clock_current = BoolOf(o, "clock");  // absent: not known to be current — covers nothing
    peers.push_back(std::move(p));
  }
  return peers;
}

std::string Describe(const PeerInfo& p) {
  return p.id + (p.host.empty() ? std::string() : " (" + p.host + ")");
}

}  // namespace

PeerView::PeerView(bool await_self, std::chrono::nanoseconds window, std::string label,
                   std::shared_ptr<LogSink> log)
    : window_ns_(window.count()), label_(std::move(label)), log_(log ? std::move(log) : StderrLogSink()) {
  MutexLock lock(&mu_);
  self_known_ = !await_self;
}

void PeerView::SetSelf(std::string self, std::string incarnation) {
  MutexLock lock(&mu_);
  self_ = std::move(self);
  self_incarnation_ = std::move(incarnation);
  self_known_ = true;
}

void PeerView::Apply(std::string_view rows_json, std::int64_t sent_ns) {
  std::vector<PeerInfo> all;
  try {
    all = Parse(rows_json);
  } catch (const std::exception& e) {
    // Covers nothing new: the deadline stays where the last good sample put it, and lapses.
    boost::json::object f{{"error", std::string("malformed peer rows: ") + e.what()}};
    if (!label_.empty()) f["partition"] = label_;
    log_->Write(LogSeverity::kError, "peers", std::move(f));
    return;
  }
  std::string self, self_incarnation;
  {
    MutexLock lock(&mu_);
    if (!self_known_) return;  // its own row could pass for a lagging peer: nothing is covered until it is known
    self = self_;
    self_incarnation = self_incarnation_;
  }
  std::vector<PeerInfo> peers;
  std::int64_t worst_lag_ns = 0;
  bool epoch_stale = false;  // a running peer's covered_until is of another clock epoch: it covers nothing (6.)
  for (PeerInfo& p : all) {
    if (p.id == self && p.incarnation == self_incarnation) continue;  // another incarnation is a peer (issue 55)
    if (p.state == "running") {
      worst_lag_ns = std::max(worst_lag_ns, static_cast<std::int64_t>(p.lag_seconds * 1e9));
      epoch_stale = epoch_stale || !p.clock_current;
    }
    peers.push_back(std::move(p));
  }
  NoteTransitions(peers);
  {
    MutexLock lock(&mu_);
    peers_ = std::move(peers);
    sent_ns_ = sent_ns;
    ++samples_;
  }
  // release: the follower applied this snapshot's keys to the filter before calling Apply; a Covered() that
  // reads this value (acquire) and then probes the filter sees them (the argument, 3.).
  // 1, not 0: sampled, covering no request (a boot time is never 1 ns).
  deadline_ns_.store(epoch_stale ? 1 : sent_ns + window_ns_ - worst_lag_ns, std::memory_order_release);
}

void PeerView::NoteTransitions(const std::vector<PeerInfo>& peers) {
  for (const PeerInfo& p : peers) {
    Seen& s = seen_[p.id];
    const bool lagging = p.state == "running" && static_cast<std::int64_t>(p.lag_seconds * 1e9) > window_ns_;
    boost::json::object f{{"instance", p.id}, {"host", p.host}, {"state", p.state},
                          {"lag_seconds", p.lag_seconds}, {"heartbeat_age_seconds", p.heartbeat_age_seconds},
                          {"uncommitted", p.uncommitted}, {"clock_epoch_current", p.clock_current}};
    if (!label_.empty()) f["partition"] = label_;
    if (s.state != p.state) {
      if (p.state == "retired" && s.state == "running") {
        // The operator's explicit loss window: what it held uncommitted may now be answered new again here.
        MutexLock lock(&mu_);
        ++retired_seen_;
      }
      if (!s.state.empty() || p.state == "running") {
        log_->Write(p.state == "retired" ? LogSeverity::kWarn : LogSeverity::kInfo, "peer", f);
      }
      s.state = p.state;
    }
    if (lagging != s.lagging) {
      f["lagging"] = lagging;
      log_->Write(lagging ? LogSeverity::kWarn : LogSeverity::kInfo, "peer", f);
      s.lagging = lagging;
    }
    const bool current = p.state != "running" || p.clock_current;
    if (current != s.clock_current) {
      // Its covered_until is of another clock epoch (PostgreSQL's clock stepped, or the server restarted): new keys
      // wait for it to publish again under the current one.
      if (!current) f["note"] = "its watermark was computed under another clock epoch: not trusted until it republishes";
      log_->Write(current ? LogSeverity::kInfo : LogSeverity::kWarn, "peer", std::move(f));
      s.clock_current = current;
    }
  }
  // A peer no longer listed left more than a minute ago: forget it.
  for (auto it = seen_.begin(); it != seen_.end();) {
    const bool listed = std::any_of(peers.begin(), peers.end(), [&](const PeerInfo& p) { return p.id == it->first; });
    it = listed ? std::next(it) : seen_.erase(it);
  }
}

std::string PeerView::Lagging(std::int64_t now_ns) const {
  if (Covered(now_ns)) return {};
  MutexLock lock(&mu_);
  if (samples_ == 0) return "peers not read yet";
  std::string out;
  for (const PeerInfo& p : peers_) {
    if (p.state != "running") continue;
    if (!p.clock_current) {
      if (!out.empty()) out += "; ";
      out += "instance " + Describe(p) + " has not published under PostgreSQL's current clock epoch yet (the clock "
             "stepped or the server restarted)";
      continue;
    }
    if (static_cast<std::int64_t>(p.lag_seconds * 1e9) <= window_ns_ / 2) continue;
    if (!out.empty()) out += "; ";
    out += "instance " + Describe(p) + " " + std::to_string(p.lag_seconds) + " s behind, " +
           std::to_string(p.uncommitted) + " keys uncommitted, heartbeat " + std::to_string(p.heartbeat_age_seconds) +
           " s ago";
  }
  if (out.empty()) out = "peers not read for " + std::to_string(static_cast<double>(now_ns - sent_ns_) * 1e-9) + " s";
  return out;
}

PeerViewStats PeerView::Stats(std::int64_t now_ns) const {
  PeerViewStats s;
  s.covered_for_seconds = static_cast<double>(deadline_ns_.load(std::memory_order_relaxed) - now_ns) * 1e-9;
  MutexLock lock(&mu_);  // relaxed above: a figure for a scrape
  s.sampled = samples_ > 0;
  s.samples = samples_;
  s.sample_age_seconds = samples_ == 0 ? -1 : static_cast<double>(now_ns - sent_ns_) * 1e-9;
  s.retired_seen = retired_seen_;
  s.peers = peers_;
  for (const PeerInfo& p : peers_) {
    if (p.state == "running" && (!p.clock_current || static_cast<std::int64_t>(p.lag_seconds * 1e9) > window_ns_)) {
      ++s.lagging;
    }
  }
  return s;
}

}  // namespace scangate::storage
