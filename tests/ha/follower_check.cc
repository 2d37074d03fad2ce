// Cross-instance checks of the follower: tests/ha/follower_check.h.
#include "follower_check.h"

#include <atomic>
#include <exception>
#include <thread>

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
  return "fallbacks " + std::to_string(f.at("fallbacks").to_number<std::int64_t>()) + ", commit-lag fallbacks " +
         std::to_string(f.at("commit_lag_fallbacks").to_number<std::int64_t>()) + ", reconnects " +
         std::to_string(reconnects) + ", reloads " + std::to_string(reloads);
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

}  // namespace scangate::ha
