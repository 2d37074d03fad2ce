// Service's backpressure hooks (--queue-wait, issue 8): a request whose Store item is refused because the
// write queue is full waits for room on its I/O thread (server/room_wait.h) instead of getting 503 at once.
// Under a closed-loop overload this turns a flood of fast 503s (which starve PostgreSQL of CPU) into waiting:
// an HTTP/1.1 session reads no new request while one is unanswered (server/http_server.cc), so waiting
// requests also stop their connections' reading, and 2xx/s settles at the rate PostgreSQL drains the queue.
// Bounds: min(--queue-wait, --request-timeout) from the refusal, then 503 unavailable (nothing recorded: the
// item was never queued). A Store that is down (not full) answers 503 at once, waiting or not.
#include <exception>
#include <memory>
#include <string>
#include <utility>

#include "server/log.h"
#include "server/room_wait.h"
#include "server/service.h"

namespace scangate::server {
namespace net = boost::asio;

namespace {
constexpr std::string_view kQueueFullDetail =
    "the write queue stayed full for the queue wait (PostgreSQL is behind); nothing was recorded: retry after "
    "the Retry-After delay";
constexpr std::string_view kDownWhileWaitingDetail =
    "PostgreSQL became unavailable while the request waited for room in the write queue; nothing was "
    "recorded: retry after the Retry-After delay";

// Set while a parked batch runs again from its waiter, so that it does not park a second time (its wait
// is over; a refusal now is answered as before). I/O threads only; one flag per thread.
thread_local bool resuming_batch = false;
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

bool Service::WaitBeforeBatch(const BatchRequest& batch, const net::any_io_executor& ex, ThreadCounters& counters,
                              BatchDone& done) {
  // A batch whose entries go to the Store waits while it is full. Room taken by another request between
  // the wake-up and the batch's submissions parks the refused entries again (ObserveBatch), not 503. With
  // the journal, new keys go to the journal, and its drain keeps the Store's queue full under load on
  // purpose: such a batch does not wait here (its possibly-seen entries, if the queue is full, wait one by
  // one in ObserveBatch, as single requests do).
  if (resuming_batch || journal_ != nullptr || !(store_.full() || OthersWaitForRoom()) || !MayWaitForRoom()) {
    return false;
  }
  auto copy = std::make_shared<BatchRequest>(batch);
  auto answer = std::make_shared<BatchDone>(std::move(done));
  WaitForRoom(
      ex, counters,
      [this, copy, answer, ex, &counters] {
        resuming_batch = true;
        try {
          ObserveBatch(*copy, ex, counters, *answer);  // a copy: `answer` stays usable for the 500 below
        } catch (const std::exception& e) {
          Log(LogLevel::kError, "error", {{"where", "batch resumed after waiting for room"}, {"what", e.what()}});
          // As Router::Handle does for a throwing ObserveBatch (digest failure): 500; its answer-once guard
          // drops this one if the batch already answered.
          (*answer)(Problem::Internal());
        }
        resuming_batch = false;
        return true;
      },
      [answer](Problem problem) { (*answer)(std::move(problem)); });
  return true;
}

}  // namespace scangate::server
