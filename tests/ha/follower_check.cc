// Cross-instance checks of the follower: tests/ha/follower_check.h.
#include "follower_check.h"

#include <atomic>
#include <exception>
#include <thread>
#include <unordered_set>

namespace scangate::ha {

using namespace std::chrono_literals;
using hardening::Clock;

boost::json::object StatsOf(std::uint16_t port) {
  try {
    it::HttpClient c(port);
    const auto r = c.Get("/stats");
    if (r.status == 200) return boost::json::parse(r.body).as_object();
  } catch (const std::exception&) {
  }
  return {};
}

bool WaitSettled(const std::vector<std::uint16_t>& ports, std::chrono::seconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    bool settled = true;
    for (const std::uint16_t port : ports) {
      const boost::json::object o = StatsOf(port);
      if (o.empty() || !o.contains("journal") || !o.contains("follower") ||
          o.at("journal").at("backlog").to_number<std::int64_t>() != 0) {
        settled = false;
        break;
      }
      for (const auto& db : o.at("follower").at("databases").as_array()) {
        if (!db.at("fresh").as_bool()) settled = false;
      }
    }
    if (settled) {
      std::this_thread::sleep_for(200ms);
      return true;
    }
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

std::string FollowerLine(std::uint16_t port) {
  const boost::json::object o = StatsOf(port);
  if (o.empty() || !o.contains("follower")) return "no follower in /stats";
  std::int64_t reconnects = 0, reloads = 0;
  const auto& f = o.at("follower").as_object();
  for (const auto& db : f.at("databases").as_array()) {
    reconnects += db.at("reconnects").to_number<std::int64_t>();
    reloads += db.at("reloads").to_number<std::int64_t>();
  }
  std::string line = "fallbacks " + std::to_string(f.at("fallbacks").to_number<std::int64_t>()) +
                     ", commit-lag fallbacks " + std::to_string(f.at("commit_lag_fallbacks").to_number<std::int64_t>()) +
                     ", reconnects " + std::to_string(reconnects) + ", reloads " + std::to_string(reloads);
  if (o.contains("peers")) {  // issue 42: what the peers' watermark held up
    const auto& p = o.at("peers").as_object();
    line += ", peers: uncovered " + std::to_string(p.at("uncovered").to_number<std::int64_t>()) +
            ", read duplicates " + std::to_string(p.at("read_duplicates").to_number<std::int64_t>()) + ", waits " +
            std::to_string(p.at("waits").to_number<std::int64_t>()) + ", 503 after waiting " +
            std::to_string(p.at("wait_timeouts").to_number<std::int64_t>());
  }
  return line;
}

std::string SendAnsweredToAll(hardening::Ledger& ledger, const std::vector<std::uint16_t>& ports,
                              std::uint64_t* new_answers) {
  const std::vector<std::string> keys = ledger.AnsweredKeys();
  std::atomic<std::uint64_t> fresh{0};
  std::vector<std::thread> ts;
  constexpr std::size_t kThreads = 8;
  for (std::size_t t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      for (std::size_t p = 0; p < ports.size(); ++p) {
        it::HttpClient c(ports[p]);
        for (std::size_t i = t; i < keys.size(); i += kThreads) {
          const auto start = Clock::now();
          const auto r = c.Post("/observe", it::ObserveBody(keys[i]));
          ledger.Record(keys[i], &r, start, Clock::now(), static_cast<int>(p) + 1);
          if (r.status == 201) ++fresh;
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  if (new_answers != nullptr) *new_answers = fresh.load();
  std::string line = std::to_string(keys.size()) + " answered keys sent to all " + std::to_string(ports.size()) +
                     " instances: " + std::to_string(fresh.load()) + " answered new (each a key new twice); followers:";
  for (std::size_t p = 0; p < ports.size(); ++p) {
    line += (p == 0 ? " " : "; ") + std::string(1, static_cast<char>('A' + p)) + " " + FollowerLine(ports[p]);
  }
  return line;
}

CrossDuring::CrossDuring(hardening::Ledger& ledger, const Timeline& timeline, std::vector<std::uint16_t> ports,
                         std::function<std::size_t(const std::string& key)> owner, std::chrono::milliseconds delay)
    : ledger_(ledger), timeline_(timeline), ports_(std::move(ports)), owner_(std::move(owner)), delay_(delay) {}

CrossDuring::~CrossDuring() { Stop(); }

void CrossDuring::Start() {
  thread_ = std::thread([this] { Run(); });
}

void CrossDuring::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void CrossDuring::Run() {
  const auto began = Clock::now();
  std::unordered_set<std::string> crossed;
  while (!stop_) {
    std::this_thread::sleep_for(kPeriod);
    const auto now = Clock::now();
    std::vector<std::string> round;
    for (const Event& e : timeline_.Snapshot()) {  // answered 201 since Start, past the window, not crossed yet
      if (round.size() >= kPerRound) break;
      if (e.status != 201 || e.end < began || now - e.end < delay_ || crossed.count(e.key) != 0) continue;
      crossed.insert(e.key);
      round.push_back(e.key);
    }
    if (round.empty()) continue;
    std::vector<bool> held(ports_.size(), false);  // the owner's journal still held uncommitted keys
    for (std::size_t p = 0; p < ports_.size(); ++p) {
      const boost::json::object o = StatsOf(ports_[p]);
      held[p] = !o.empty() && o.contains("journal") && o.at("journal").at("backlog").to_number<std::int64_t>() > 0;
    }
    std::vector<std::thread> ts;
    for (const std::string& key : round) {
      ts.emplace_back([this, key, &held] {
        const std::size_t from = owner_(key) % ports_.size(), to = (from + 1) % ports_.size();
        ++crossed_;
        if (held[from]) ++while_held_;
        const auto start = Clock::now();
        try {
          it::HttpClient c(ports_[to]);
          const auto r = c.Post("/observe", it::ObserveBody(key));
          ledger_.Record(key, &r, start, Clock::now(), 100 + static_cast<int>(to));
          (r.status == 201 ? news_ : r.status == 200 ? dups_ : r.status == 503 ? unavailable_ : other_) += 1;
        } catch (const std::exception& e) {
          ledger_.Record(key, nullptr, start, Clock::now(), 100 + static_cast<int>(to), e.what());
          ++other_;
        }
      });
    }
    for (auto& t : ts) t.join();
  }
}

std::string CrossDuring::Summary() const {
  return "during the disruption, " + std::to_string(crossed_.load()) + " keys answered 201 were sent " +
         std::to_string(delay_.count()) + " ms later to the other instance (" + std::to_string(while_held_.load()) +
         " while their first instance's journal held uncommitted keys): 201 " + std::to_string(news_.load()) +
         " (each a key new twice), 200 " + std::to_string(dups_.load()) + ", 503 " +
         std::to_string(unavailable_.load()) + ", other " + std::to_string(other_.load());
}

}  // namespace scangate::ha
