// SystemdNotifier (server/systemd_notify.h): what arrives on a NOTIFY_SOCKET the test binds itself — a unix
// datagram socket standing in for systemd — and that nothing is sent without one.
#include "server/systemd_notify.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include <gtest/gtest.h>

namespace scangate::server {
namespace {

// A bound unix datagram socket at a fresh path, exported as NOTIFY_SOCKET for the test's duration.
class FakeSystemd {
 public:
  FakeSystemd() {
    char dir_template[] = "/tmp/sg-notify-XXXXXX";
    dir_ = ::mkdtemp(dir_template);
    path_ = dir_ + "/notify";
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    path_.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
    bound_ = fd_ >= 0 && ::bind(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
    timeval tv{1, 0};  // a Receive() that finds nothing fails after 1 s instead of hanging the test
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setenv("NOTIFY_SOCKET", path_.c_str(), 1);
  }
  ~FakeSystemd() {
    ::unsetenv("NOTIFY_SOCKET");
    ::unsetenv("WATCHDOG_USEC");
    ::unsetenv("WATCHDOG_PID");
    if (fd_ >= 0) ::close(fd_);
    std::filesystem::remove_all(dir_);
  }
  bool bound() const { return bound_; }
  // The next datagram, or nullopt after 1 s without one.
  std::optional<std::string> Receive() {
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n < 0) return std::nullopt;
    return std::string(buf, static_cast<std::size_t>(n));
  }

 private:
  std::string dir_;
  std::string path_;
  int fd_ = -1;
  bool bound_ = false;
};

// Without NOTIFY_SOCKET (a shell, a test, a container) nothing is sent and nothing fails.
TEST(SystemdNotify, NoSocketIsANoOp) {
  ::unsetenv("NOTIFY_SOCKET");
  ::setenv("WATCHDOG_USEC", "1000000", 1);
  SystemdNotifier n;
  EXPECT_FALSE(n.enabled());
  EXPECT_FALSE(n.watchdog_timeout().has_value());
  EXPECT_FALSE(n.Ready("ready"));
  EXPECT_FALSE(n.Status("x"));
  EXPECT_FALSE(n.Stopping("bye"));
  EXPECT_FALSE(n.Watchdog());
  ::unsetenv("WATCHDOG_USEC");
}

// READY=1 arrives with its STATUS= line, once; a second Ready() only updates the status.
TEST(SystemdNotify, ReadyOnceWithStatus) {
  FakeSystemd systemd;
  ASSERT_TRUE(systemd.bound());
  SystemdNotifier n;
  ASSERT_TRUE(n.enabled());
  EXPECT_TRUE(n.Status("starting: waiting for PostgreSQL (attempt 1)"));
  EXPECT_EQ(systemd.Receive(), "STATUS=starting: waiting for PostgreSQL (attempt 1)");
  EXPECT_TRUE(n.ExtendStartTimeout(std::chrono::seconds(30)));
  EXPECT_EQ(systemd.Receive(), "EXTEND_TIMEOUT_USEC=30000000");
  EXPECT_FALSE(n.ready_sent());
  EXPECT_TRUE(n.Ready("ready: serving on port 8080"));
  EXPECT_TRUE(n.ready_sent());
  EXPECT_EQ(systemd.Receive(), "READY=1\nSTATUS=ready: serving on port 8080");
  EXPECT_TRUE(n.Ready("ready again"));
  EXPECT_EQ(systemd.Receive(), "STATUS=ready again");
  EXPECT_FALSE(n.ExtendStartTimeout(std::chrono::seconds(30)));  // after READY=1: nothing to extend
  EXPECT_TRUE(n.Stopping("stopping:\nmulti-line"));
  EXPECT_EQ(systemd.Receive(), "STOPPING=1\nSTATUS=stopping: multi-line");  // one STATUS line
  EXPECT_EQ(systemd.Receive(), std::nullopt);
}

// WATCHDOG=1 is sent only when the unit's WatchdogSec= (WATCHDOG_USEC) names this process.
TEST(SystemdNotify, WatchdogFollowsWatchdogUsec) {
  FakeSystemd systemd;
  ASSERT_TRUE(systemd.bound());
  {
    SystemdNotifier without;
    EXPECT_FALSE(without.watchdog_timeout().has_value());
    EXPECT_FALSE(without.Watchdog());
  }
  ::setenv("WATCHDOG_USEC", "2500000", 1);
  ::setenv("WATCHDOG_PID", std::to_string(::getpid() + 1).c_str(), 1);  // another process's watchdog
  {
    SystemdNotifier other;
    EXPECT_FALSE(other.watchdog_timeout().has_value());
  }
  ::setenv("WATCHDOG_PID", std::to_string(::getpid()).c_str(), 1);
  SystemdNotifier n;
  ASSERT_TRUE(n.watchdog_timeout().has_value());
  EXPECT_EQ(*n.watchdog_timeout(), std::chrono::microseconds(2'500'000));
  EXPECT_TRUE(n.Watchdog());
  EXPECT_EQ(systemd.Receive(), "WATCHDOG=1");
  EXPECT_EQ(systemd.Receive(), std::nullopt);
}

}  // namespace
}  // namespace scangate::server
