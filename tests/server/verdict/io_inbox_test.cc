// server/verdict/io_inbox.h on a real io_context (no sockets): items posted from several threads are each handled
// exactly once, on the executor's thread, each thread's in its Post order; a burst costs one drain, not one per
// item; a handler that throws does not stop the rest of its drain; items are moved, never copied (a move-only
// item compiles and arrives whole).
#include "server/verdict/io_inbox.h"

#include <atomic>
#include <cstddef>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

namespace scangate::server {
namespace {

struct Item {
  int thread = 0;
  int seq = 0;
  std::unique_ptr<int> payload;  // move-only, as StoredAnswer's shared state is never copied
};

TEST(IoInbox, EveryItemOnceOnTheExecutorInEachThreadsOrder) {
  boost::asio::io_context io;
  auto guard = boost::asio::make_work_guard(io);
  std::thread runner([&] { io.run(); });
  const std::thread::id runner_id = runner.get_id();

  constexpr int kThreads = 4;
  constexpr int kPerThread = 20'000;
  std::vector<std::vector<int>> seen(kThreads);  // the runner's thread only
  std::atomic<int> handled{0};
  std::atomic<int> off_thread{0};
  IoInbox<Item> inbox(io.get_executor(), [&](Item& item) {
    if (std::this_thread::get_id() != runner_id) off_thread.fetch_add(1);
    ASSERT_NE(item.payload, nullptr);
    EXPECT_EQ(*item.payload, item.seq);
    seen[item.thread].push_back(item.seq);
    handled.fetch_add(1);
  });

  std::vector<std::thread> posters;
  for (int t = 0; t < kThreads; ++t) {
    posters.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) inbox.Post(Item{t, i, std::make_unique<int>(i)});
    });
  }
  for (auto& p : posters) p.join();
  while (handled.load() < kThreads * kPerThread) std::this_thread::yield();
  guard.reset();
  runner.join();

  EXPECT_EQ(handled.load(), kThreads * kPerThread);
  EXPECT_EQ(off_thread.load(), 0);
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(seen[t].size(), static_cast<std::size_t>(kPerThread)) << t;
    for (int i = 0; i < kPerThread; ++i) ASSERT_EQ(seen[t][i], i) << "thread " << t;
  }
}

// A burst posted while no drain has run yet is handled by one drain: one post to the executor, not one per item.
TEST(IoInbox, ABurstIsOneDrain) {
  boost::asio::io_context io;
  std::vector<int> order;
  IoInbox<Item> inbox(io.get_executor(), [&](Item& item) { order.push_back(item.seq); });
  for (int i = 0; i < 100; ++i) inbox.Post(Item{0, i, std::make_unique<int>(i)});
  EXPECT_EQ(io.poll_one(), 1u);  // one handler ran: the drain
  EXPECT_EQ(order.size(), 100u);
  EXPECT_EQ(io.poll(), 0u);  // nothing else was posted
  io.restart();  // the context ran out of work and stopped
  inbox.Post(Item{0, 100, std::make_unique<int>(100)});  // the next Post arms a new drain
  EXPECT_EQ(io.poll(), 1u);
  EXPECT_EQ(order.size(), 101u);
}

// A handler that throws is contained: the drain goes on with the next item.
TEST(IoInbox, AThrowingHandlerDoesNotStopTheDrain) {
  boost::asio::io_context io;
  std::vector<int> order;
  IoInbox<Item> inbox(io.get_executor(), [&](Item& item) {
    order.push_back(item.seq);
    if (item.seq == 1) throw std::runtime_error("a completion that throws");
  });
  for (int i = 0; i < 3; ++i) inbox.Post(Item{0, i, std::make_unique<int>(i)});
  io.poll();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
}

}  // namespace
}  // namespace scangate::server
