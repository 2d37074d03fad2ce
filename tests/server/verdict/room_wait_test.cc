// server/verdict/room_wait.h on a real io_context (no sockets, no PostgreSQL): waiters are retried in arrival order
// once there is room, never inline; a waiter past its deadline gives up (kTimedOut); a retry that reports
// the Store down gives up (kDown) at once; the poll timer stops when no one waits.
#include "server/verdict/room_wait.h"

#include <chrono>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <gtest/gtest.h>

namespace scangate::server {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

struct Log {
  std::vector<std::string> events;
};

RoomWaiter Waiter(Log& log, const std::string& name, const int& room, bool& down, Clock::duration bound) {
  RoomWaiter w;
  w.deadline = Clock::now() + bound;
  w.retry = [&log, &room, &down, name] {
    if (down) return RetryResult::kDown;
    if (room <= 0) return RetryResult::kRefused;
    log.events.push_back("in:" + name);
    return RetryResult::kIn;
  };
  w.give_up = [&log, name](GiveUp why) {
    log.events.push_back((why == GiveUp::kTimedOut ? "timeout:" : "down:") + name);
  };
  return w;
}

// Room appears later: every waiter gets in, in arrival order, and none is run inline by ParkForRoom.
TEST(RoomWait, FifoOnceRoomAppears) {
  boost::asio::io_context ioc{1};
  Log log;
  int room = 0;
  bool down = false;
  const int owner = 0;
  for (const char* n : {"a", "b", "c"}) ParkForRoom(ioc.get_executor(), &owner, Waiter(log, n, room, down, 10s));
  EXPECT_TRUE(log.events.empty()) << "retried inline";
  boost::asio::steady_timer later(ioc, 20ms);
  later.async_wait([&](const boost::system::error_code&) { room = 1; });
  ioc.run_for(20s);  // returns early once no waiter is left: the timer is not re-armed for an empty queue
  EXPECT_TRUE(ioc.stopped()) << "the poll timer kept running with no waiter";
  EXPECT_EQ(log.events, (std::vector<std::string>{"in:a", "in:b", "in:c"}));
}

// No room ever: each waiter gives up at its own deadline, the shorter bound first.
TEST(RoomWait, DeadlineGivesUp) {
  boost::asio::io_context ioc{1};
  Log log;
  int room = 0;
  bool down = false;
  const int owner = 0;
  const auto t0 = Clock::now();
  ParkForRoom(ioc.get_executor(), &owner, Waiter(log, "long", room, down, 200ms));
  ParkForRoom(ioc.get_executor(), &owner, Waiter(log, "short", room, down, 50ms));
  ioc.run_for(20s);  // bounded: a waiter that never gives up fails the test instead of hanging it
  EXPECT_GE(Clock::now() - t0, 200ms);
  EXPECT_EQ(log.events, (std::vector<std::string>{"timeout:short", "timeout:long"}));
}

// The Store goes down while they wait: they give up at the next retry, long before their deadline.
TEST(RoomWait, DownGivesUpAtOnce) {
  boost::asio::io_context ioc{1};
  Log log;
  int room = 0;
  bool down = false;
  const int owner = 0;
  ParkForRoom(ioc.get_executor(), &owner, Waiter(log, "a", room, down, 60s));
  ParkForRoom(ioc.get_executor(), &owner, Waiter(log, "b", room, down, 60s));
  boost::asio::steady_timer later(ioc, 10ms);
  later.async_wait([&](const boost::system::error_code&) { down = true; });
  const auto t0 = Clock::now();
  ioc.run_for(20s);  // bounded: a waiter that never gives up fails the test instead of hanging it
  EXPECT_LT(Clock::now() - t0, 30s);
  EXPECT_EQ(log.events, (std::vector<std::string>{"down:a", "down:b"}));
}

}  // namespace
}  // namespace scangate::server
