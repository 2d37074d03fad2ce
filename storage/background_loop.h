// BackgroundLoop: a thread that runs a pass, waits an interval, and runs it again until stopped — the shape
// of storage's maintenance readers (the BRIN summarizer, the expiry), each with a connection of its own.
// Invariant: Stop() wakes a waiting loop at once and joins it; a pass in progress finishes first (a pass that
// waits inside itself uses Wait(), which Stop() cuts short too). Use: one per maintenance unit; Start() once,
// Stop() (or the destructor) before the pass's state goes away.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include <absl/base/thread_annotations.h>

#include "core/mutex.h"

namespace scangate::storage {

class BackgroundLoop {
 public:
  BackgroundLoop() = default;
  ~BackgroundLoop();  // calls Stop()
  BackgroundLoop(const BackgroundLoop&) = delete;
  BackgroundLoop& operator=(const BackgroundLoop&) = delete;

  // Starts the thread, named `name`: runs `pass` (at once when `first_at_once`, else after one `interval`),
  // then again every `interval` until Stop() — or until `pass` returns false (stopped for good). Call once.
  void Start(std::string name, std::chrono::milliseconds interval, bool first_at_once, std::function<bool()> pass);
  // Waits `d` or until Stop(): true when stopping. Safe from any thread (the pass uses it for its own pauses).
  bool Wait(std::chrono::milliseconds d) ABSL_LOCKS_EXCLUDED(mu_);
  // Stops and joins the thread. Idempotent; safe before Start().
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  Mutex mu_;
  CondVar cv_;  // signalled when stop_ is set
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace scangate::storage
