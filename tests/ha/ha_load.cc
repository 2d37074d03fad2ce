// Load, timeline and readiness probe for the high-availability tests (see ha_load.h).
#include "ha_load.h"

#include <algorithm>
#include <sstream>

namespace scangate::ha {
namespace {

constexpr auto kReconnectBackoff = std::chrono::milliseconds(20);
constexpr auto kUnavailableBackoff = std::chrono::milliseconds(100);  // Retry-After: 1, honoured loosely
constexpr auto kProbeInterval = std::chrono::milliseconds(100);
constexpr std::string_view kProblemPrefix = "urn:scangate:problem:";

bool Ok(int status) { return status == 200 || status == 201; }

}  // namespace

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

std::string ProblemSlug(const std::string& body) {
  boost::system::error_code ec;
  const boost::json::value v = boost::json::parse(body, ec);
  if (ec || !v.is_object()) return "-";
  const auto* t = v.as_object().if_contains("type");
  if (t == nullptr || !t->is_string()) return "-";
  std::string s(t->as_string());
  if (s.rfind(kProblemPrefix, 0) == 0) s.erase(0, kProblemPrefix.size());
  return s;
}

void Timeline::Add(Event e) {
  std::lock_guard lock(mu_);
  events_.push_back(std::move(e));
}

std::vector<Event> Timeline::Snapshot() const {
  std::lock_guard lock(mu_);
  return events_;
}

std::optional<Clock::time_point> Timeline::LastFailure() const {
  std::lock_guard lock(mu_);
  std::optional<Clock::time_point> last;
  for (const auto& e : events_) {
    if (!Ok(e.status) && (!last || e.end > *last)) last = e.end;
  }
  return last;
}

std::string GapReport::Summary() const {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(0);
  os << "longest gap without a 2xx " << gap_ms << " ms (from " << gap_start_ms << " to " << gap_end_ms
     << " ms after the event); 2xx " << ok << ", connection errors " << conn_errors << ", 503:";
  if (problems.empty()) os << " none";
  for (const auto& [slug, n] : problems) os << " " << slug << "=" << n;
  os << ", other statuses " << other;
  return os.str();
}

GapReport MeasureGap(const std::vector<Event>& events, Clock::time_point at, Clock::time_point until) {
  GapReport r;
  const auto from = at - std::chrono::seconds(2);
  std::vector<Clock::time_point> oks;
  for (const auto& e : events) {
    if (e.end < from || e.end > until) continue;
    if (Ok(e.status)) {
      ++r.ok;
      oks.push_back(e.end);
    } else if (e.status == 0) {
      ++r.conn_errors;
    } else if (e.status == 503) {
      ++r.problems[e.problem];
      if (e.problem == "outcome-unknown") r.outcome_unknown_keys.push_back(e.key);
    } else {
      ++r.other;
    }
  }
  std::sort(oks.begin(), oks.end());
  for (std::size_t i = 1; i < oks.size(); ++i) {
    const double g = Ms(oks[i] - oks[i - 1]);
    if (g > r.gap_ms) {
      r.gap_ms = g;
      r.gap_start_ms = Ms(oks[i - 1] - at);
      r.gap_end_ms = Ms(oks[i] - at);
    }
  }
  return r;
}

// -------------------------------------------------------------------------------------------------
// HaLoad

HaLoad::HaLoad(hardening::Ledger& ledger, Timeline& timeline, HaLoadOptions options, std::vector<std::uint16_t> ports)
    : ledger_(ledger), timeline_(timeline), options_(std::move(options)), ports_(std::move(ports)) {}

HaLoad::~HaLoad() { Stop(); }

void HaLoad::Start() {
  for (int i = 0; i < options_.threads; ++i) workers_.emplace_back([this, i] { Worker(i); });
}

std::size_t HaLoad::Drain(std::chrono::seconds timeout) {
  draining_ = true;
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    {
      std::lock_guard lock(mu_);
      if (pending_.empty() && inflight_.load() == 0) return 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::lock_guard lock(mu_);
  return pending_.size();
}

void HaLoad::Stop() {
  stop_ = true;
  for (auto& t : workers_) {
    if (t.joinable()) t.join();
  }
  workers_.clear();
}

bool HaLoad::WaitVerdicts(std::uint64_t n, std::chrono::seconds timeout) const {
  const std::uint64_t target = verdicts_.load() + n;
  const auto deadline = Clock::now() + timeout;
  while (verdicts_.load() < target) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

std::optional<std::string> HaLoad::NextKey(std::mt19937_64& rng, bool& retransmit) {
  std::lock_guard lock(mu_);
  retransmit = false;
  if (!pending_.empty()) {
    std::string k = std::move(pending_.front());
    pending_.pop_front();
    retransmit = true;
    ++inflight_;
    return k;
  }
  if (draining_) return std::nullopt;
  ++inflight_;
  std::uniform_real_distribution<double> u(0.0, 1.0);
  if (!answered_.empty() && u(rng) < options_.repeat_fraction) {
    return answered_[std::uniform_int_distribution<std::size_t>(0, answered_.size() - 1)(rng)];
  }
  std::string key = it::UniqueKey(options_.key_tag);
  while (options_.accept_key && !options_.accept_key(key)) key = it::UniqueKey(options_.key_tag);
  return key;
}

void HaLoad::Worker(int index) {
  std::mt19937_64 rng(0x4a11'0000ull + static_cast<std::uint64_t>(index));
  std::vector<std::unique_ptr<it::HttpClient>> clients(ports_.size());  // one per port, opened on first use
  while (!stop_) {
    bool retransmit = false;
    std::optional<std::string> key = NextKey(rng, retransmit);
    if (!key) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    const std::size_t target = options_.key_affinity ? std::hash<std::string>{}(*key) % ports_.size()
                                                     : static_cast<std::size_t>(index) % ports_.size();
    auto& client = clients[target];
    if (!client) {
      try {
        client = std::make_unique<it::HttpClient>(ports_[target]);
      } catch (const std::exception&) {  // nothing sent: a retransmission stays pending, a fresh key is dropped
        if (retransmit) {
          std::lock_guard lock(mu_);
          pending_.push_front(*key);
        }
        --inflight_;
        std::this_thread::sleep_for(kReconnectBackoff);
        continue;
      }
    }
    ++requests_;
    const auto start = Clock::now();
    bool requeue = false;
    std::chrono::milliseconds backoff{0};
    try {
      const it::HttpResponse r = client->Post("/observe", it::ObserveBody(*key));
      const auto end = Clock::now();
      ledger_.Record(*key, &r, start, end, index);
      timeline_.Add({start, end, r.status, r.status == 503 ? ProblemSlug(r.body) : std::string(), *key,
                     r.has_header("retry-after")});
      if (Ok(r.status)) {
        ++verdicts_;
        if (r.status == 201 || retransmit) {
          std::lock_guard lock(mu_);
          answered_.push_back(*key);
        }
      } else if (r.status == 503) {
        requeue = true;
        backoff = kUnavailableBackoff;
      }
      if (!r.keep_alive) client.reset();
    } catch (const std::exception& e) {
      const auto end = Clock::now();
      ledger_.Record(*key, nullptr, start, end, index, e.what());
      timeline_.Add({start, end, 0, "", *key, false});
      requeue = true;
      client.reset();
      backoff = kReconnectBackoff;
    }
    if (requeue) {
      std::lock_guard lock(mu_);
      pending_.push_back(*key);
    }
    --inflight_;
    if (backoff.count() > 0) std::this_thread::sleep_for(backoff);
    if (options_.pause.count() > 0) std::this_thread::sleep_for(options_.pause);
  }
}

// -------------------------------------------------------------------------------------------------
// ReadyProbe

ReadyProbe::ReadyProbe(std::vector<std::uint16_t> ports) : ports_(std::move(ports)), samples_(ports_.size()) {
  thread_ = std::thread([this] {
    while (!stop_) {
      for (std::size_t i = 0; i < ports_.size(); ++i) {
        int status = 0;
        try {
          it::HttpClient c(ports_[i]);
          status = c.Get("/readyz").status;
        } catch (const std::exception&) {
        }
        std::lock_guard lock(mu_);
        samples_[i].push_back({Clock::now(), status});
      }
      std::this_thread::sleep_for(kProbeInterval);
    }
  });
}

ReadyProbe::~ReadyProbe() { Stop(); }

void ReadyProbe::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

std::string ReadyProbe::Describe(std::size_t i, Clock::time_point at) const {
  std::lock_guard lock(mu_);
  std::optional<Clock::time_point> down, up;
  std::map<int, int> statuses;
  for (const auto& s : samples_[i]) {
    if (s.t < at) continue;
    if (!down) {
      if (s.status != 200) {
        down = s.t;
        ++statuses[s.status];
      }
    } else if (!up) {
      if (s.status == 200) {
        up = s.t;
      } else {
        ++statuses[s.status];
      }
    }
  }
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(0);
  if (!down) return "/readyz stayed 200";
  os << "/readyz not 200 from " << Ms(*down - at) << " ms";
  if (up) {
    os << " to " << Ms(*up - at) << " ms (" << Ms(*up - *down) << " ms)";
  } else {
    os << " until the end of the probe";
  }
  os << ", answers:";
  for (const auto& [st, n] : statuses) os << " " << (st == 0 ? std::string("no-connection") : std::to_string(st)) << "x" << n;
  return os.str();
}

}  // namespace scangate::ha
