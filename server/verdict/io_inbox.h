// IoInbox: hands calls from other threads (the Store's writers) to one I/O thread in batches.
// Invariant: every call Post()ed runs exactly once, on the inbox's executor, in Post order; at most one drain is
// posted at a time, so a writer finishing a batch of n keys costs each I/O thread one post (one queue lock, at
// most one wake-up) instead of n. Use one per I/O thread (its single-threaded io_context's executor) for
// completions that arrive in bursts; the inbox must outlive every handler it posts (the Service owns it, and
// the io_context is stopped and joined before the Service goes away).
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/post.hpp>

#include "core/mutex.h"

namespace scangate::server {

class IoInbox {
 public:
  explicit IoInbox(boost::asio::any_io_executor ex) : ex_(std::move(ex)) {}
  IoInbox(const IoInbox&) = delete;
  IoInbox& operator=(const IoInbox&) = delete;

  // Queues `call` to run on the executor. Safe from any thread; never blocks on I/O. `call` must not throw
  // (it answers a request); one that does is contained so the rest of the batch still runs.
  void Post(std::function<void()> call) {
    bool post;
    {
      const MutexLock lk(&mu_);
      calls_.push_back(std::move(call));
      post = !std::exchange(drain_posted_, true);
    }
    if (post) boost::asio::post(ex_, [this] { Drain(); });
  }

 private:
  // On the executor: takes everything queued so far (later Posts arm the next drain) and runs it.
  void Drain() {
    {
      const MutexLock lk(&mu_);
      running_.swap(calls_);  // running_ is empty here: keeps both vectors' capacity between drains
      drain_posted_ = false;
    }
    for (auto& call : running_) {
      try {
        call();
      } catch (...) {
        // A completion must not throw; never let one stop the others (they answer other requests).
      }
    }
    running_.clear();
  }

  const boost::asio::any_io_executor ex_;
  Mutex mu_;
  std::vector<std::function<void()>> calls_ ABSL_GUARDED_BY(mu_);
  bool drain_posted_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::function<void()>> running_;  // the executor's thread only (one drain at a time)
};

}  // namespace scangate::server
