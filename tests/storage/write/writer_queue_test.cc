// Tests storage/write/writer_queue.h without PostgreSQL: a Submit item takes the priority lane unless a write-behind
// row of its digest is pending (then it stays behind it), lanes alternate, cancelled items are skipped and
// released, a down queue refuses waiting items and MarkDown hands every waiting item back, the pending bound
// holds exactly.
#include "storage/write/writer_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <vector>

namespace scangate::storage {
namespace {

using namespace std::chrono_literals;

Digest D(std::uint8_t b) {
  Digest d{};
  d[0] = b;
  return d;
}

QueuedItem Item(std::uint8_t b, bool write_behind, std::shared_ptr<Ticket> ticket) {
  QueuedItem item;
  item.digest = D(b);
  if (!write_behind) item.done = [](const Result&) {};
  item.write_behind = write_behind;
  item.enqueued = StoreClock::now();
  item.ticket = std::move(ticket);
  return item;
}
QueuedItem Waiting(std::uint8_t b, std::shared_ptr<Ticket> ticket = nullptr) { return Item(b, false, std::move(ticket)); }
QueuedItem Behind(std::uint8_t b) { return Item(b, true, nullptr); }

struct Taker {
  WriterQueue& q;
  PendingBound pending{100};
  std::atomic<std::uint64_t> cancelled{0};
  // The next batch's first bytes; empty when the queue stayed idle for 10 ms.
  std::vector<int> Next(std::size_t limit = 100) {
    std::vector<QueuedItem> batch;
    std::vector<int> out;
    if (q.TakeBatch(batch, limit, 0us, 10ms, cancelled, pending) != WriterQueue::Take::kBatch) return out;
    for (const auto& item : batch) out.push_back(item.digest[0]);
    return out;
  }
};

// A Submit skips the write-behind backlog, unless its digest has a row pending there.
TEST(WriterQueue, SubmitTakesThePriorityLaneUnlessItsRowIsPending) {
  WriterQueue q;
  q.MarkUp();
  ASSERT_TRUE(q.Push(Behind(1), 100));
  ASSERT_TRUE(q.Push(Behind(2), 100));
  ASSERT_TRUE(q.Push(Waiting(3), 100));  // no row of 3 pending: priority lane
  ASSERT_TRUE(q.Push(Waiting(2), 100));  // a row of 2 pending: behind it, in the FIFO
  Taker t{q};
  EXPECT_EQ(t.Next(), (std::vector<int>{3}));
  EXPECT_EQ(t.Next(), (std::vector<int>{1, 2, 2}));
  EXPECT_EQ(t.Next(), (std::vector<int>{}));  // idle
}

// Once the row is finished (ReleaseBehind), a Submit of its digest takes the priority lane again.
TEST(WriterQueue, ReleasedRowNoLongerHoldsItsDigest) {
  WriterQueue q;
  q.MarkUp();
  ASSERT_TRUE(q.Push(Behind(1), 100));
  std::vector<QueuedItem> batch;
  PendingBound pending(100);
  std::atomic<std::uint64_t> cancelled{0};
  ASSERT_EQ(q.TakeBatch(batch, 100, 0us, 10ms, cancelled, pending), WriterQueue::Take::kBatch);
  ASSERT_TRUE(q.Push(Behind(2), 100));
  ASSERT_TRUE(q.Push(Waiting(1), 100));  // row 1 still in a transaction: behind row 2
  q.ReleaseBehind(batch);
  ASSERT_TRUE(q.Push(Waiting(1), 100));  // now the priority lane
  Taker t{q};
  EXPECT_EQ(t.Next(), (std::vector<int>{1}));
  EXPECT_EQ(t.Next(), (std::vector<int>{2, 1}));
}

// Cancelled items are skipped, counted and released from the bound; a taken ticket can no longer cancel.
TEST(WriterQueue, CancelledItemsAreSkipped) {
  WriterQueue q;
  q.MarkUp();
  auto kept = std::make_shared<Ticket>(), dropped = std::make_shared<Ticket>();
  Taker t{q};
  ASSERT_TRUE(t.pending.TryAdd());
  ASSERT_TRUE(t.pending.TryAdd());
  ASSERT_TRUE(q.Push(Waiting(1, kept), 100));
  ASSERT_TRUE(q.Push(Waiting(2, dropped), 100));
  EXPECT_TRUE(dropped->Cancel());
  EXPECT_EQ(t.Next(), (std::vector<int>{1}));
  EXPECT_EQ(t.cancelled.load(), 1u);
  EXPECT_EQ(t.pending.count(), 1u);
  EXPECT_FALSE(kept->Cancel());
}

// Down: waiting items are refused, write-behind rows accepted; MarkDown hands back every waiting item and
// keeps the batch's rows in front, in order.
TEST(WriterQueue, DownRefusesWaitingItemsAndFailsQueuedOnes) {
  WriterQueue q;
  EXPECT_FALSE(q.up());
  EXPECT_FALSE(q.Push(Waiting(1), 100));
  EXPECT_TRUE(q.Push(Behind(2), 100));
  q.MarkUp();
  ASSERT_TRUE(q.Push(Waiting(3), 100));
  ASSERT_TRUE(q.Push(Waiting(2), 100));  // behind row 2
  std::vector<QueuedItem> batch;
  batch.push_back(Behind(7));
  batch.push_back(Waiting(8));
  std::vector<QueuedItem> failed;
  q.MarkDown(batch, failed);
  EXPECT_FALSE(q.up());
  std::vector<int> failed_ids;
  for (const auto& item : failed) failed_ids.push_back(item.digest[0]);
  EXPECT_EQ(failed_ids, (std::vector<int>{8, 2, 3}));
  Taker t{q};
  EXPECT_EQ(t.Next(), (std::vector<int>{7, 2}));
}

// Stop: pushes refused; the writer drains what is queued, then TakeBatch says stopped.
TEST(WriterQueue, StopDrainsThenStops) {
  WriterQueue q;
  q.MarkUp();
  ASSERT_TRUE(q.Push(Behind(1), 100));
  q.Stop();
  EXPECT_FALSE(q.Push(Behind(2), 100));
  Taker t{q};
  EXPECT_EQ(t.Next(), (std::vector<int>{1}));
  std::vector<QueuedItem> batch;
  EXPECT_EQ(q.TakeBatch(batch, 100, 0us, 10ms, t.cancelled, t.pending), WriterQueue::Take::kStopped);
}

// The bound: TryAddUpTo grants exactly the room left.
TEST(PendingBound, GrantsExactlyTheRoomLeft) {
  PendingBound b(5);
  EXPECT_TRUE(b.TryAdd());
  EXPECT_EQ(b.TryAddUpTo(10), 4u);
  EXPECT_TRUE(b.full());
  EXPECT_FALSE(b.TryAdd());
  EXPECT_EQ(b.TryAddUpTo(1), 0u);
  b.Release(2);
  EXPECT_FALSE(b.full());
  EXPECT_EQ(b.TryAddUpTo(3), 2u);
  EXPECT_EQ(b.count(), 5u);
}

}  // namespace
}  // namespace scangate::storage
