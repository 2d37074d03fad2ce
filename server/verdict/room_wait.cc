#include "server/verdict/room_wait.h"

#include <deque>
#include <map>
#include <memory>
#include <utility>

#include <boost/asio/execution_context.hpp>
#include <boost/asio/steady_timer.hpp>

namespace scangate::server {
namespace net = boost::asio;

namespace {

using Clock = std::chrono::steady_clock;

// One owner's waiters on one I/O thread, and the timer that retries them.
struct Queue {
  explicit Queue(const net::any_io_executor& ex) : timer(ex) {}
  net::steady_timer timer;
  std::deque<RoomWaiter> waiters;  // FIFO: arrival order (deadlines are nearly ordered too)
  bool armed = false;              // a timer wait is pending
  Clock::duration period = kRoomPollMin;

  void Arm() {
    armed = true;
    timer.expires_after(period);
    timer.async_wait([this](const boost::system::error_code& ec) {
      armed = false;
      if (ec) return;  // operation_aborted: the context is shutting down
      Tick();
    });
  }

  // Expired waiters give up; then the oldest are retried in order until one is refused.
  void Tick() {
    const auto now = Clock::now();
    bool progress = false;
    for (auto it = waiters.begin(); it != waiters.end();) {
      if (it->deadline > now) {
        ++it;
        continue;
      }
      RoomWaiter w = std::move(*it);
      it = waiters.erase(it);
      w.give_up(GiveUp::kTimedOut);
    }
    while (!waiters.empty()) {
      RoomWaiter& front = waiters.front();
      RetryResult r = RetryResult::kDown;
      try {
        r = front.retry();
      } catch (...) {
        // A retry must not throw (the Service's answer 500 themselves); if one does anyway, drop that waiter
        // with a 503 rather than leave this thread's queue stalled behind it.
      }
      if (r == RetryResult::kRefused) break;
      RoomWaiter w = std::move(front);
      waiters.pop_front();
      if (r == RetryResult::kDown) {
        w.give_up(GiveUp::kDown);
      } else {
        progress = true;
      }
    }
    period = progress ? kRoomPollMin : std::min<Clock::duration>(period * 2, kRoomPollMax);
    if (!waiters.empty()) Arm();
  }
};

// The per-io_context registry: one Queue per owner. Destroyed with the context (after its handlers).
class RoomWaitService : public net::execution_context::service {
 public:
  using key_type = RoomWaitService;
  static inline net::execution_context::id id;
  explicit RoomWaitService(net::execution_context& ctx) : net::execution_context::service(ctx) {}
  Queue& For(const void* owner, const net::any_io_executor& ex) {
    auto& q = queues_[owner];
    if (!q) q = std::make_unique<Queue>(ex);
    return *q;
  }

 private:
  void shutdown() override { queues_.clear(); }  // drops waiters (and the sessions they hold) unanswered
  std::map<const void*, std::unique_ptr<Queue>> queues_;
};

}  // namespace

void ParkForRoom(const net::any_io_executor& ex, const void* owner, RoomWaiter w) {
  net::execution_context& ctx = net::query(ex, net::execution::context);
  Queue& q = net::use_service<RoomWaitService>(ctx).For(owner, ex);
  q.waiters.push_back(std::move(w));
  if (!q.armed) {
    q.period = kRoomPollMin;
    q.Arm();
  }
}

}  // namespace scangate::server
