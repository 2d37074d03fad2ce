// The real scangate under a stand-in for systemd's notification socket (NOTIFY_SOCKET, the Type=notify unit of
// deploy/debian/scangate.service): READY=1 once /readyz answers 200 and never while PostgreSQL is unreachable,
// STATUS= lines, WATCHDOG=1 pings while serving, STOPPING=1 on SIGTERM.
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "harness.h"

extern char** environ;

namespace scangate::it {
namespace {

using Clock = std::chrono::steady_clock;

// A bound unix datagram socket exported as NOTIFY_SOCKET (and WATCHDOG_USEC) to the processes the test starts.
class NotifySocket {
 public:
  NotifySocket() {
    char dir_template[] = "/tmp/sg-notify-it-XXXXXX";
    dir_ = ::mkdtemp(dir_template);
    const std::string path = dir_ + "/notify";
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    path.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
    bound_ = fd_ >= 0 && ::bind(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
    timeval tv{0, 200'000};  // Receive() polls: a deadline loop, never a hang
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setenv("NOTIFY_SOCKET", path.c_str(), 1);
    ::setenv("WATCHDOG_USEC", "1000000", 1);  // no WATCHDOG_PID: the child takes it as its own
  }
  ~NotifySocket() {
    ::unsetenv("NOTIFY_SOCKET");
    ::unsetenv("WATCHDOG_USEC");
    if (fd_ >= 0) ::close(fd_);
    std::filesystem::remove_all(dir_);
  }
  bool bound() const { return bound_; }
  // Every datagram received until `until` returns true for one of them or `timeout` passes; all are kept.
  template <class Pred>
  bool ReceiveUntil(Pred until, std::chrono::seconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n < 0) continue;
      messages_.emplace_back(buf, static_cast<std::size_t>(n));
      if (until(messages_.back())) return true;
    }
    return false;
  }
  bool Received(const std::string& prefix) const {
    for (const auto& m : messages_) {
      if (m.rfind(prefix, 0) == 0) return true;
    }
    return false;
  }
  std::string All() const {
    std::string s;
    for (const auto& m : messages_) s += "[" + m + "] ";
    return s;
  }

 private:
  std::string dir_;
  int fd_ = -1;
  bool bound_ = false;
  std::vector<std::string> messages_;
};

auto StartsWith(const std::string& prefix) {
  return [prefix](const std::string& m) { return m.rfind(prefix, 0) == 0; };
}

// Started by the harness (which returns once /readyz is 200): READY=1 arrives after the start-up STATUS lines,
// the watchdog is pinged every maintenance tick, and SIGTERM sends STOPPING=1 before the exit.
TEST(ServiceSystemd, ReadyWatchdogStopping) {
  NotifySocket systemd;
  ASSERT_TRUE(systemd.bound());
  ScangateProcess server;
  ASSERT_TRUE(server.Start());
  // The harness saw /readyz 200; READY=1 follows within a maintenance tick.
  ASSERT_TRUE(systemd.ReceiveUntil(StartsWith("READY=1"), std::chrono::seconds(10))) << systemd.All();
  EXPECT_TRUE(systemd.Received("STATUS=starting: listening on port " + std::to_string(server.port())))
      << systemd.All();
  EXPECT_TRUE(systemd.ReceiveUntil(StartsWith("WATCHDOG=1"), std::chrono::seconds(5))) << systemd.All();
  HttpClient client(server.port());
  EXPECT_EQ(client.Post("/observe", ObserveBody(UniqueKey("systemd"))).status, 201);  // new
  EXPECT_EQ(server.Stop(), 0);
  EXPECT_TRUE(systemd.ReceiveUntil(StartsWith("STOPPING=1"), std::chrono::seconds(5))) << systemd.All();
}

// PostgreSQL unreachable: the process stays up retrying, says so in STATUS=, extends the start timeout, and
// never sends READY=1 (systemd keeps the unit "activating"); SIGTERM still stops it with STOPPING=1.
TEST(ServiceSystemd, NoReadyWhilePostgresUnreachable) {
  NotifySocket systemd;
  ASSERT_TRUE(systemd.bound());
  const std::string binary = Env().server_binary;
  // Port 1 on loopback: nothing listens there, every connection attempt is refused at once.
  std::vector<std::string> args{binary, "--database-url=postgresql://scangate@127.0.0.1:1/scangate",
                                "--listen=127.0.0.1", "--port=0", "--threads=1"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  ASSERT_EQ(::posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ), 0);
  const bool ready = systemd.ReceiveUntil(StartsWith("READY=1"), std::chrono::seconds(4));
  EXPECT_FALSE(ready) << systemd.All();
  EXPECT_TRUE(systemd.Received("STATUS=starting: waiting for PostgreSQL (attempt ")) << systemd.All();
  EXPECT_TRUE(systemd.Received("EXTEND_TIMEOUT_USEC=")) << systemd.All();
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  EXPECT_TRUE(systemd.ReceiveUntil(StartsWith("STOPPING=1"), std::chrono::seconds(10))) << systemd.All();
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
}

}  // namespace
}  // namespace scangate::it
