// IoInbox: hands items from other threads (the Store's writers) to one I/O thread in batches.
// Invariant: every item Post()ed is handled exactly once, on the inbox's executor, in Post order; at most one drain
// is posted at a time, so a writer finishing a batch of n keys costs each I/O thread one post (one queue lock, at
// most one wake-up) instead of n. Items are values, not closures: the handler is fixed at construction, so a Post
// allocates nothing (a std::function per completion did: issue 44). Use one per I/O thread (its single-threaded
// io_context's executor) for completions that arrive in bursts; the inbox must outlive every handler it posts (the
// Service owns it, and the io_context is stopped and joined before the Service goes away).
#pragma once

#include <utility>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/functional/any_invocable.h>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/post.hpp>

#include "core/mutex.h"

namespace scangate::server {

template <typename Item>
class IoInbox {
 public:
  // `handle` runs on the executor, once per item; it must not throw (it answers a request): one that does is
  // contained so the rest of the batch still runs.
  IoInbox(boost::asio::any_io_executor ex, absl::AnyInvocable<void(Item&)> handle)
      : ex_(std::move(ex)), handle_(std::move(handle)) {}
  IoInbox(const IoInbox&) = delete;
  IoInbox& operator=(const IoInbox&) = delete;

  // Queues `item` for the executor. Safe from any thread; never blocks on I/O.
  void Post(Item item) {
    bool post;
    {
      const MutexLock lk(&mu_);
      items_.push_back(std::move(item));
      post = !std::exchange(drain_posted_, true);
    }
    if (post) boost::asio::post(ex_, [this] { Drain(); });
  }

 private:
  // On the executor: takes everything queued so far (later Posts arm the next drain) and handles it.
  void Drain() {
    {
      const MutexLock lk(&mu_);
      running_.swap(items_);  // running_ is empty here: keeps both vectors' capacity between drains
      drain_posted_ = false;
    }
    for (Item& item : running_) {
      try {
        handle_(item);
      } catch (...) {
        // A completion must not throw; never let one stop the others (they answer other requests).
      }
    }
    running_.clear();
  }

  const boost::asio::any_io_executor ex_;
  absl::AnyInvocable<void(Item&)> handle_;  // the executor's thread only
  Mutex mu_;
  std::vector<Item> items_ ABSL_GUARDED_BY(mu_);
  bool drain_posted_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Item> running_;  // the executor's thread only (one drain at a time)
};

}  // namespace scangate::server
