// Cross-instance checks of the follower (issue 32) for the fault tests (tests/ha, tests/partitions): wait until
// every --ack=filter instance has committed its journal and its followers are fresh, then send every key the
// ledger saw answered to every instance, recording each answer in the ledger — so a `new` anywhere shows as a
// key new twice in the ledger's own check. Black-box: /stats and POST /observe only.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <boost/json.hpp>

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

}  // namespace scangate::ha
