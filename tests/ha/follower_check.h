// Cross-instance checks of the follower (issue 32) for the fault tests (tests/ha, tests/partitions): wait until
// every --ack=filter instance has committed its journal and its followers are fresh, then send every key the
// ledger saw answered to every instance, recording each answer in the ledger — so a `new` anywhere shows as a
// key new twice in the ledger's own check. Black-box: /stats and POST /observe only.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <boost/json.hpp>

#include "ha_load.h"
#include "util.h"

namespace scangate::ha {

// /stats of the instance at `port`, parsed ({} when it does not answer).
boost::json::object StatsOf(std::uint16_t port);

// Every instance at `ports` has journal backlog 0 and every follower of it (one per database or partition) is
// fresh, then 200 ms more (past the followers' probe of the last commits). False after `timeout`.
bool WaitSettled(const std::vector<std::uint16_t>& ports, std::chrono::seconds timeout);

// "fallbacks F, commit-lag fallbacks C, reconnects R, reloads L" of the followers of the instance at `port`.
std::string FollowerLine(std::uint16_t port);

// Sends every answered key of `ledger` to every port (8 threads), recording instance p + 1 for ports[p]. Returns
// the line to report: how many keys, how many `new` answers (each one a key new twice) and each instance's
// FollowerLine. `new_answers`, when given, receives the count.
std::string SendAnsweredToAll(hardening::Ledger& ledger, const std::vector<std::uint16_t>& ports,
                              std::uint64_t* new_answers = nullptr);

// Issue 42: the cross-check DURING a disruption. While it runs, every `period` it takes up to `per_round` keys the
// timeline shows answered 201 — by the instance their key routes to (`owner`: the load's key affinity) — at least
// `delay` ago (past the window W, so the promise applies) and not crossed yet, and sends each to another instance
// (owner + 1), recording the answer in the ledger: a 201 there is a key new twice (the ledger's check fails on it).
// For each round it reads the owners' /stats journal backlog first, so the summary says how many keys were crossed
// while their first instance still held keys it had not committed ("before the first drained").
class CrossDuring {
 public:
  CrossDuring(hardening::Ledger& ledger, const Timeline& timeline, std::vector<std::uint16_t> ports,
              std::function<std::size_t(const std::string& key)> owner,
              std::chrono::milliseconds delay = std::chrono::milliseconds(2500));
  ~CrossDuring();  // Stop()
  void Start();
  void Stop();
  // "crossed N keys (M while their first instance's journal held uncommitted keys): 201 a, 200 b, 503 c, other d"
  std::string Summary() const;
  std::uint64_t news() const { return news_.load(); }

 private:
  void Run();

  hardening::Ledger& ledger_;
  const Timeline& timeline_;
  std::vector<std::uint16_t> ports_;
  std::function<std::size_t(const std::string&)> owner_;
  std::chrono::milliseconds delay_;
  static constexpr std::size_t kPerRound = 8;
  static constexpr auto kPeriod = std::chrono::milliseconds(250);
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> crossed_{0}, while_held_{0}, news_{0}, dups_{0}, unavailable_{0}, other_{0};
  std::thread thread_;
};

}  // namespace scangate::ha
