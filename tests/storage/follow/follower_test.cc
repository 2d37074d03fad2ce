// Tests storage/follow/follower.h (the poll method, and the logical one where it differs) against real PostgreSQL —
// fixture "pg" (a database of this test's own, and one more made here) and fixture "pg_standby" (a primary and its
// streaming standby) — with an in-test TCP proxy (tcp_proxy.h) where the network must go silent (issue 42):
// - item 1: a partition moved (Retarget) while the follower is still opening its connection to the old server is
//   not lost: a key committed at the new server is followed (on 87ad733 the follower kept following the old one);
// - item 5: the follower's connections get the writers' keepalives and tcp_user_timeout; a network that goes silent
//   under a poll is noticed within statement_timeout + kAnswerGrace (the follower reconnects), and Stop() returns at
//   once while a poll waits for its answer (on 87ad733 both waited for ever: a blocking PQexecParams);
// - item 6: a standby is refused at every connection — never fresh, the error names it, retried (not a setting
//   that stops the start) — while its primary is followed (on 87ad733 the poll follower was fresh on the standby,
//   and the logical one stopped the start as if wal_level were wrong).
#include "storage/follow/follower.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <future>
#include <set>
#include <string>
#include <thread>

#include <pqxx/pqxx>

#include "core/mutex.h"
#include "storage/follow/follower_connection.h"
#include "storage/start/migrations.h"
#include "tests/storage/follow/tcp_proxy.h"
#include "tests/storage/pg_test_db.h"

namespace scangate::storage {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// `url` (postgresql://user@host:port/db?query) with its port or database replaced.
std::string WithPort(const std::string& url, std::uint16_t port) {
  const auto colon = url.rfind(':', url.find('/', url.find("//") + 2));
  const auto slash = url.find('/', colon);
  return url.substr(0, colon + 1) + std::to_string(port) + url.substr(slash);
}
std::string WithDatabase(const std::string& url, const std::string& db) {
  const auto slash = url.rfind('/'), query = url.find('?', slash);
  return url.substr(0, slash + 1) + db + (query == std::string::npos ? "" : url.substr(query));
}
std::uint16_t PortOf(const std::string& url) {
  const auto colon = url.rfind(':', url.find('/', url.find("//") + 2));
  return static_cast<std::uint16_t>(std::stoi(url.substr(colon + 1)));
}

bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds bound) {
  const auto deadline = Clock::now() + bound;
  while (Clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return done();
}

void Insert(const std::string& url, const Digest& d) {
  pqxx::connection c(url);
  pqxx::work tx(c);
  tx.exec_params("INSERT INTO scan_keys (digest) VALUES (scangate_stored_digest($1::bytea))", HexBytea(d));
  tx.commit();
}

// What a follower applied, and its reload: every digest of `reload_url`'s scan_keys (empty: none).
struct Applied {
  Mutex mu;
  std::set<Digest> digests ABSL_GUARDED_BY(mu);
  std::string reload_url;

  Follower::Apply apply() {
    return [this](std::span<const Digest> ds) {
      MutexLock lock(&mu);
      digests.insert(ds.begin(), ds.end());
    };
  }
  Follower::Reload reload() {
    return [this](const Follower::Apply& sink) -> std::uint64_t {
      if (reload_url.empty()) return 0;
      pqxx::connection c(reload_url);
      pqxx::nontransaction tx(c);
      std::vector<Digest> ds;
      for (const auto& row : tx.exec("SELECT uuid_send(digest) FROM scan_keys")) {  // sql/013's 16-byte layout
        const pqxx::binarystring b(row[0]);
        Digest d{};
        std::memcpy(d.data(), b.data(), std::min(b.size(), d.size()));
        ds.push_back(d);
      }
      sink(ds);
      return ds.size();
    };
  }
  // Whether `d` was applied, as the follower reads digests back: in their stored form (core/digest.h StoredDigest).
  bool Has(const Digest& d) {
    MutexLock lock(&mu);
    return digests.contains(StoredDigest(d));
  }
};

FollowerOptions Options(const std::string& conninfo, FollowMethod method = FollowMethod::kPoll) {
  FollowerOptions o;
  o.method = method;
  o.conninfo = conninfo;
  o.probe_interval = 20ms;
  o.reconnect_delay = 50ms;
  return o;
}

// Stop() of `f` on another thread: true when it returned within `bound`. When it did not, `release` frees the
// thread (the test has failed by then) and the call is waited for, so the test ends either way.
bool StopsWithin(Follower& f, std::chrono::milliseconds bound, const std::function<void()>& release) {
  auto stopped = std::async(std::launch::async, [&f] { f.Stop(); });
  const bool in_time = stopped.wait_for(bound) == std::future_status::ready;
  if (!in_time) release();
  stopped.get();
  return in_time;
}

// Item 1. The follower's first connection hangs in its start-up (the proxy holds it) while the partition moves; once
// it opens, the follower must leave the old server for the new one rather than forget the move.
TEST(FollowerTest, RetargetWhileConnectingIsNotLost) {
  MigrateOnce();
  const std::string old_url = PgTestUrl();
  const std::string moved_db = "follower_test_moved";
  {
    pqxx::connection c(old_url);
    pqxx::nontransaction tx(c);
    tx.exec("DROP DATABASE IF EXISTS " + moved_db);
    tx.exec("CREATE DATABASE " + moved_db);
  }
  const std::string moved_url = WithDatabase(old_url, moved_db);
  {
    pqxx::connection c(moved_url);
    ApplyMigrations(c);
  }
  test::TcpProxy proxy(PortOf(old_url));
  proxy.Blackhole(true);  // the follower's connection to the old server opens only once released
  Applied applied;
  applied.reload_url = moved_url;
  Follower f(Options(WithPort(old_url, proxy.port())), applied.apply(), applied.reload());
  auto started = std::async(std::launch::async, [&f] { return f.Start(); });
  std::this_thread::sleep_for(300ms);  // the follower's thread waits in its connect to the old server
  f.Retarget(moved_url);
  proxy.Blackhole(false);
  started.get();
  const Digest d = RandomDigest();
  Insert(moved_url, d);
  EXPECT_TRUE(WaitFor([&] { return applied.Has(d); }, 10s))
      << "a key committed at the server the partition moved to was never followed: the follower stayed on the old "
         "one; " << f.Stats().error;
  EXPECT_GE(f.Stats().reconnects, 1u);
  f.Stop();
}

// Item 5. Open() applies the defaults it is given: the writers' keepalives and tcp_user_timeout on the socket.
TEST(FollowerTest, ConnectionsGetTheWritersTimeouts) {
  ConnectionDefaults d;
  d.tcp_user_timeout = 12345ms;
  const follow_detail::ConnPtr c = follow_detail::Open(PgTestUrl(), d, "scangate-follower", false, "test");
  const int fd = PQsocket(c.get());
  int v = 0;
  socklen_t len = sizeof v;
  ASSERT_EQ(::getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &v, &len), 0);
  EXPECT_EQ(v, 1);
  ASSERT_EQ(::getsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &v, &len), 0);
  EXPECT_EQ(v, d.keepalives_idle_s);
  ASSERT_EQ(::getsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &v, &len), 0);
  EXPECT_EQ(v, d.keepalives_interval_s);
  ASSERT_EQ(::getsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &v, &len), 0);
  EXPECT_EQ(v, d.keepalives_count);
  unsigned timeout = 0;
  len = sizeof timeout;
  ASSERT_EQ(::getsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &timeout, &len), 0);
  EXPECT_EQ(timeout, 12345u);
}

// Item 5. The network goes silent under the polls (nothing answers, nothing is closed): the follower gives the
// connection up within statement_timeout + kAnswerGrace and tries again; Stop() then returns within the connect's
// bound (the URL's connect_timeout, 3 s) even while a reconnection hangs too.
TEST(FollowerTest, SilentNetworkIsNoticedAndStopIsBounded) {
  MigrateOnce();
  test::TcpProxy proxy(PortOf(PgTestUrl()));
  Applied applied;
  FollowerOptions o = Options(WithPort(PgTestUrl(), proxy.port()));
  o.statement_timeout = 500ms;
  Follower f(o, applied.apply(), applied.reload());
  ASSERT_TRUE(f.Start()) << f.Stats().error;
  ASSERT_TRUE(WaitFor([&] { return f.Fresh(); }, 5s));
  proxy.Blackhole(true);
  const auto silent = Clock::now();
  const bool noticed = WaitFor([&] { return f.Stats().reconnects >= 1; }, o.statement_timeout + 1s + 3s);
  EXPECT_TRUE(noticed) << "a poll without an answer held the follower: " << f.Stats().error;
  if (noticed) {
    EXPECT_LE(Clock::now() - silent, o.statement_timeout + follow_detail::kAnswerGrace + 1s);
    EXPECT_NE(f.Stats().error.find("no answer"), std::string::npos) << f.Stats().error;
  }
  EXPECT_FALSE(f.Fresh());
  EXPECT_TRUE(StopsWithin(f, 3s + 2s, [&] {
    proxy.CloseAll();
    proxy.Blackhole(false);
  })) << "Stop() waited for a connection that will never answer";
}

// Item 5. Stop() while a poll waits for an answer that will not come (its bound far away): it returns at once.
TEST(FollowerTest, StopWhileAPollWaitsReturnsAtOnce) {
  MigrateOnce();
  test::TcpProxy proxy(PortOf(PgTestUrl()));
  Applied applied;
  FollowerOptions o = Options(WithPort(PgTestUrl(), proxy.port()));
  o.statement_timeout = 60s;
  Follower f(o, applied.apply(), applied.reload());
  ASSERT_TRUE(f.Start()) << f.Stats().error;
  ASSERT_TRUE(WaitFor([&] { return f.Fresh(); }, 5s));
  proxy.Blackhole(true);
  std::this_thread::sleep_for(200ms);  // a poll is sent and waits
  EXPECT_TRUE(StopsWithin(f, 1s, [&] {
    proxy.CloseAll();
    proxy.Blackhole(false);
  })) << "Stop() waited for a poll's answer";
}

std::string StandbyDir() {
  const char* dir = std::getenv("SCANGATE_TEST_PG_STANDBY_DIR");
  return dir != nullptr ? dir : "";
}

// Item 6. A follower pointed at a standby never calls itself fresh and says why (both methods), and the cause is
// retried, not a setting that stops the start; pointed at its primary, it follows.
TEST(FollowerTest, StandbyIsRefusedAndItsPrimaryFollowed) {
  const std::string primary = ReadFileLine(StandbyDir() + "/primary_url");
  const std::string standby = ReadFileLine(StandbyDir() + "/standby_url");
  ASSERT_FALSE(primary.empty() || standby.empty()) << "fixture pg_standby did not run";
  {
    pqxx::connection c(primary);
    ApplyMigrations(c);
  }
  ASSERT_TRUE(WaitFor(
      [&] {
        pqxx::connection c(standby);
        pqxx::nontransaction tx(c);
        return tx.exec1("SELECT count(*) FROM pg_attribute WHERE attrelid = to_regclass('scan_keys') "
                        "AND attname = 'commit_xid'")[0].as<int>() == 1;
      },
      10s))
      << "the standby never replayed the migrations";
  for (const FollowMethod method : {FollowMethod::kPoll, FollowMethod::kLogical}) {
    SCOPED_TRACE(FollowMethodName(method));
    Applied applied;
    Follower f(Options(standby, method), applied.apply(), applied.reload());
    EXPECT_FALSE(f.Start());
    EXPECT_EQ(f.SetupError(), "") << "a standby stopped the start like a wrong setting";
    const bool ever_fresh = WaitFor([&] { return f.Fresh(); }, 1s);
    EXPECT_FALSE(ever_fresh) << "fresh on a standby, whose snapshots miss the primary's running transactions";
    EXPECT_NE(f.Stats().error.find("standby"), std::string::npos) << f.Stats().error;
    f.Stop();
  }
  Applied applied;
  Follower f(Options(primary), applied.apply(), applied.reload());
  ASSERT_TRUE(f.Start()) << f.Stats().error;
  EXPECT_TRUE(WaitFor([&] { return f.Fresh(); }, 5s)) << f.Stats().error;
  const Digest d = RandomDigest();
  Insert(primary, d);
  EXPECT_TRUE(WaitFor([&] { return applied.Has(d); }, 5s));
  f.Stop();
}

}  // namespace
}  // namespace scangate::storage
