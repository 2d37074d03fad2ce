// RoomWait: requests whose Store item was refused because the write queue is full wait here for room
// (--queue-wait), instead of getting 503 at once (backpressure, issue 8). One FIFO of waiters per I/O
// thread and per owner (the Service), kept in the thread's io_context as an Asio service, so its timer and
// the waiters' callbacks die with that context. Nothing blocks: a waiter is a pair of callbacks; one timer
// per thread retries the oldest waiters (short capped backoff) while any wait. Sibling: the journal's own
// wait for room (storage/journal/journal_drain.h, --journal-max-bytes).
// Threading: everything runs on the I/O thread of the executor passed to Park (single-threaded io_context).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

#include <boost/asio/any_io_executor.hpp>

namespace scangate::server {

// Poll period of a thread's waiters: starts at kRoomPollMin after a retry that got in (room appears in
// bursts: a committed batch frees up to --batch-limit items at once), doubles while the queue stays full,
// up to kRoomPollMax. A committed batch takes ~5-200 ms here, so 4 ms adds little latency; the cap keeps
// a stalled PostgreSQL to <= 250 wake-ups/s per I/O thread. Room found late costs latency, not throughput:
// the queue still holds queue_limit - freed items for the writers.
inline constexpr auto kRoomPollMin = std::chrono::microseconds(250);
inline constexpr auto kRoomPollMax = std::chrono::milliseconds(4);

enum class RetryResult : std::uint8_t {
  kIn,       // the refused step went through (or the request was answered): the waiter is done
  kRefused,  // still no room: keep waiting (the waiters behind it are not tried this round)
  kDown,     // refused because the Store is down (not full): the waiter gives up now
};

enum class GiveUp : std::uint8_t { kTimedOut, kDown };

struct RoomWaiter {
  std::chrono::steady_clock::time_point deadline;  // give up (kTimedOut) once it passes
  std::function<RetryResult()> retry;               // tries the refused step again; must not throw
  std::function<void(GiveUp)> give_up;              // answers 503; the waiter is then dropped
};

// Queues `w` behind this thread's other waiters of `owner` and starts the thread's poll timer if idle.
// Call on the I/O thread that runs `ex`; `retry` and `give_up` run there later, never inline, and exactly
// one of them finishes the waiter (retry -> kIn, or give_up). `owner` must outlive the io_context's run.
void ParkForRoom(const boost::asio::any_io_executor& ex, const void* owner, RoomWaiter w);

}  // namespace scangate::server
