// Service's backpressure hooks (--queue-wait, issue 8): a request whose Store item is refused because the
// write queue is full waits for room on its I/O thread (server/verdict/room_wait.h) instead of getting 503 at once.
// Under a closed-loop overload this turns a flood of fast 503s (which starve PostgreSQL of CPU) into waiting:
// an HTTP/1.1 session reads no new request while one is unanswered (server/http/session.cc), so waiting
// requests also stop their connections' reading, and 2xx/s settles at the rate PostgreSQL drains the queue.
// Bounds: min(--queue-wait, --request-timeout) from the refusal, then 503 unavailable (nothing recorded: the
// item was never queued). A Store that is down (not full) answers 503 at once, waiting or not.
#include <memory>
#include <string>
#include <utility>

#include "server/verdict/room_wait.h"
#include "server/verdict/service.h"

namespace scangate::server {
namespace net = boost::asio;

namespace {
constexpr std::string_view kQueueFullDetail =
    "the write queue stayed full for the queue wait (PostgreSQL is behind); nothing was recorded: retry after "
    "the Retry-After delay";
constexpr std::string_view kDownWhileWaitingDetail =
    "PostgreSQL became unavailable while the request waited for room in the write queue; nothing was "
    "recorded: retry after the Retry-After delay";

}  // namespace

void Service::WaitForRoom(const net::any_io_executor& ex, ThreadCounters& counters, std::function<bool()> submit,
                          std::function<void(Problem)> refuse) {
  counters.queue_waits.Inc();
  parked_.fetch_add(1, std::memory_order_relaxed);  // relaxed: see parked_
  RoomWaiter w;
  w.deadline = std::chrono::steady_clock::now() + queue_wait_;
  w.retry = [this, submit = std::move(submit)] {
    if (store_.full()) return store_.up() ? RetryResult::kRefused : RetryResult::kDown;  // no room yet
    if (submit()) {
      parked_.fetch_sub(1, std::memory_order_relaxed);
      return RetryResult::kIn;
    }
    return store_.up() ? RetryResult::kRefused : RetryResult::kDown;  // another thread took the room
  };
  w.give_up = [this, &counters, refuse = std::move(refuse)](GiveUp why) {
    parked_.fetch_sub(1, std::memory_order_relaxed);
    if (why == GiveUp::kTimedOut) {
      counters.queue_wait_timeouts.Inc();
      refuse(Problem::Unavailable(std::string(kQueueFullDetail)));
    } else {
      refuse(Problem::Unavailable(std::string(kDownWhileWaitingDetail)));
    }
  };
  ParkForRoom(ex, this, std::move(w));
}

}  // namespace scangate::server
