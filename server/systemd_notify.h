// SystemdNotifier: systemd's service notification protocol (sd_notify(3), libsystemd) for the Type=notify unit
// (deploy/debian/scangate.service): READY=1 once the instance would answer /readyz 200, STATUS= lines, STOPPING=1
// at shutdown, WATCHDOG=1 pings and EXTEND_TIMEOUT_USEC= while start-up is still making progress.
// Invariant: outside systemd (NOTIFY_SOCKET unset) every call is a no-op, so the binary behaves the same under a
// unit, a shell or a test. Used by App (server/app.cc) from its main thread only.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace scangate::server {

class SystemdNotifier {
 public:
  // Reads NOTIFY_SOCKET and the watchdog settings (WATCHDOG_USEC, WATCHDOG_PID) once, leaving them in the
  // environment.
  SystemdNotifier();

  // True when the process was started with a notification socket; nothing is sent otherwise.
  bool enabled() const { return enabled_; }
  // The unit's WatchdogSec= (WATCHDOG_USEC) when it names this process; nullopt: no watchdog, Watchdog() sends
  // nothing.
  std::optional<std::chrono::microseconds> watchdog_timeout() const { return watchdog_timeout_; }

  // Each call sends one datagram; false when disabled or the send failed (the service goes on either way: a
  // missing notification is systemd's timeout to report, not a reason to stop serving). Single-threaded:
  // App's main thread.
  bool Ready(std::string_view status);  // READY=1 + STATUS=; later calls only update STATUS
  bool Status(std::string_view status);
  bool Stopping(std::string_view status);                // STOPPING=1 + STATUS=
  bool Watchdog();                                       // WATCHDOG=1, only when watchdog_timeout() is set
  bool ExtendStartTimeout(std::chrono::microseconds by);  // EXTEND_TIMEOUT_USEC=, before Ready() only
  bool ready_sent() const { return ready_sent_; }

 private:
  bool Send(const std::string& state);

  bool enabled_ = false;
  std::optional<std::chrono::microseconds> watchdog_timeout_;
  bool ready_sent_ = false;
};

}  // namespace scangate::server
