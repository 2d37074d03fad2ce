#include "server/systemd_notify.h"

#include <systemd/sd-daemon.h>

#include <cstdint>
#include <cstdlib>

namespace scangate::server {
namespace {
// A STATUS= line is one line: a newline would start another assignment in the datagram.
std::string OneLine(std::string_view text) {
  std::string s(text);
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}
}  // namespace

SystemdNotifier::SystemdNotifier() {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  enabled_ = socket != nullptr && socket[0] != '\0';
  std::uint64_t usec = 0;
  // > 0: WATCHDOG_USEC is set and WATCHDOG_PID (when set) is this process; unset_environment = 0 keeps both.
  if (enabled_ && sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
    watchdog_timeout_ = std::chrono::microseconds(usec);
  }
}

bool SystemdNotifier::Send(const std::string& state) {
  if (!enabled_) return false;
  return sd_notify(0, state.c_str()) > 0;  // 0: NOTIFY_SOCKET unset; < 0: -errno
}

bool SystemdNotifier::Ready(std::string_view status) {
  if (ready_sent_) return Status(status);
  const bool sent = Send("READY=1\nSTATUS=" + OneLine(status));
  ready_sent_ = true;
  return sent;
}

bool SystemdNotifier::Status(std::string_view status) { return Send("STATUS=" + OneLine(status)); }

bool SystemdNotifier::Stopping(std::string_view status) { return Send("STOPPING=1\nSTATUS=" + OneLine(status)); }

bool SystemdNotifier::Watchdog() {
  if (!watchdog_timeout_) return false;
  return Send("WATCHDOG=1");
}

bool SystemdNotifier::ExtendStartTimeout(std::chrono::microseconds by) {
  if (ready_sent_) return false;  // the start-up timeout no longer runs
  return Send("EXTEND_TIMEOUT_USEC=" + std::to_string(by.count()));
}

}  // namespace scangate::server
