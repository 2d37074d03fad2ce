#include "storage/background_loop.h"

#include <utility>

#include "core/thread_name.h"

namespace scangate::storage {

BackgroundLoop::~BackgroundLoop() { Stop(); }

void BackgroundLoop::Start(std::string name, std::chrono::milliseconds interval, bool first_at_once,
                           std::function<bool()> pass) {
  thread_ = std::thread([this, name = std::move(name), interval, first_at_once, pass = std::move(pass)] {
    SetThreadName(name);
    if (!first_at_once && Wait(interval)) return;
    while (pass() && !Wait(interval)) {
    }
  });
}

bool BackgroundLoop::Wait(std::chrono::milliseconds d) {
  const auto deadline = std::chrono::steady_clock::now() + d;
  const MutexLock lk(&mu_);
  while (!stop_) {
    if (cv_.WaitUntil(&mu_, deadline)) return stop_;  // the time passed (unless stopped meanwhile)
  }
  return true;
}

void BackgroundLoop::Stop() {
  {
    const MutexLock lk(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

}  // namespace scangate::storage
