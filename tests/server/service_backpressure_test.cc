// Black-box tests of issue 8's backpressure (real scangate, real PostgreSQL): a request that finds the write
// queue full (--queue-limit) waits for room (--queue-wait) and then succeeds, instead of 503 at once; only
// past the bound is it answered 503 unavailable (nothing recorded). The writer is stalled by an uncommitted
// row of the test's own (a writer inserting that digest blocks on its lock), so the queue stays full for as
// long as the test wants.
#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "harness.h"

namespace scangate::it {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr auto kEventually = 60s;

// One request on a fresh connection; a transport error (timeout, reset) is a test failure and status 0,
// never an exception escaping a client thread.
HttpResponse PostOrFail(std::uint16_t port, const std::string& target, const std::string& body) {
  try {
    return HttpClient(port).Post(target, body);
  } catch (const std::exception& e) {
    ADD_FAILURE() << target << ": " << e.what();
    return HttpResponse{};
  }
}

// A request whose key's row the test holds uncommitted (RowBlocker): in flight on the only writer, which
// blocks on the row lock until Release(); Join() returns its response.
class StalledRequest {
 public:
  explicit StalledRequest(std::uint16_t port)
      : key_(UniqueKey("bp-stalled")),
        blocker_({key_}),
        thread_([this, port] { response_ = PostOrFail(port, "/observe", ObserveBody(key_)); }) {}
  ~StalledRequest() {
    if (!thread_.joinable()) return;
    blocker_.Release();  // a test that failed early: end the stall so the thread can finish
    thread_.join();
  }
  void Release() { blocker_.Release(); }
  HttpResponse Join() {
    thread_.join();
    return response_;
  }

 private:
  std::string key_;
  RowBlocker blocker_;
  HttpResponse response_;
  std::thread thread_;  // last: starts once the row is held
};

double Metric(HttpClient& c, std::string_view name) { return MetricValue(c.Get("/metrics").body, name).value_or(-1); }

// Polls until the metric reaches `at_least`, or `give_up` says there is no point waiting any longer.
bool WaitForMetric(HttpClient& c, std::string_view name, double at_least, const std::function<bool()>& give_up) {
  const auto deadline = Clock::now() + kEventually;
  while (Clock::now() < deadline && !give_up()) {
    if (Metric(c, name) >= at_least) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

// Queue of 2 with the writer stalled: 8 concurrent requests (7 single, 1 batch) find it full and wait;
// once the stall ends every one is answered new (201/200), none 503, in both ack modes.
TEST(Backpressure, FullQueueWaitsThenSucceeds) {
  for (const char* ack : {"--ack=commit", "--ack=filter"}) {
    SCOPED_TRACE(ack);
    ScangateProcess server({ack, "--journal=off", "--writers=1", "--queue-limit=2", "--queue-wait=30s",
                            "--request-timeout=40s"});
    ASSERT_TRUE(server.Start());
    Pg pg;
    HttpClient admin(server.port());
    StalledRequest stalled(server.port());
    ASSERT_TRUE(pg.WaitForLockWaiter()) << "the writer never blocked on the test's row";

    constexpr int kClients = 8;  // the last one posts a batch
    std::vector<std::string> keys;
    std::vector<HttpResponse> responses(kClients);
    for (int i = 0; i < kClients; ++i) keys.push_back(UniqueKey("bp-wait"));
    std::vector<std::thread> clients;
    std::atomic<int> answered{0};
    for (int i = 0; i < kClients; ++i) {
      clients.emplace_back([&, i] {
        responses[i] = i + 1 < kClients
                           ? PostOrFail(server.port(), "/observe", ObserveBody(keys[i]))
                           : PostOrFail(server.port(), "/observe/batch", "{\"keys\":[" + JsonString(keys[i]) + "]}");
        ++answered;
      });
    }
    // One item fits beside the stalled one; the other 7 requests wait for room (none is answered meanwhile).
    EXPECT_TRUE(WaitForMetric(admin, "scangate_queue_waits_total", kClients - 1, [&] { return answered > 1; }))
        << admin.Get("/metrics").body;
    stalled.Release();
    for (auto& t : clients) t.join();
    
    const HttpResponse stalled_r = stalled.Join();
    EXPECT_EQ(stalled_r.status, 201) << stalled_r;
    for (int i = 0; i < kClients; ++i) {
      const int want = i + 1 < kClients ? 201 : 200;
      EXPECT_EQ(responses[i].status, want) << "request " << i << ": " << responses[i];
      if (responses[i].status != want) continue;
      const auto body = responses[i].json();
      const auto& verdict = i + 1 < kClients ? body.at("verdict") : body.at("results").at(0).at("verdict");
      EXPECT_EQ(verdict, "new") << responses[i];
    }
    EXPECT_EQ(Metric(admin, "scangate_queue_wait_timeouts_total"), 0);
    std::vector<std::string> hexes;
    for (const auto& k : keys) hexes.push_back(Sha256Hex(k));
    // ack=filter: write-behind rows land within the flush interval; poll.
    const auto deadline = Clock::now() + kEventually;
    while (pg.CountDigests(hexes) != kClients && Clock::now() < deadline) std::this_thread::sleep_for(20ms);
    EXPECT_EQ(pg.CountDigests(hexes), kClients);
    EXPECT_EQ(server.Stop(), 0);
  }
}

// The same stall with --queue-wait=300ms: a request that finds the queue full waits about that long, then
// gets 503 unavailable + Retry-After (not before the bound, well before the request deadline), and its key
// is not recorded. /metrics counts the wait and its time-out.
TEST(Backpressure, PastTheBoundIs503Unavailable) {
  ScangateProcess server({"--writers=1", "--queue-limit=1", "--queue-wait=300ms", "--request-timeout=20s"});
  ASSERT_TRUE(server.Start());
  Pg pg;
  HttpClient admin(server.port());
  StalledRequest stalled(server.port());
  ASSERT_TRUE(pg.WaitForLockWaiter()) << "the writer never blocked on the test's row";

  const std::string refused = UniqueKey("bp-refused");
  HttpClient c(server.port());
  const auto t0 = Clock::now();
  const HttpResponse r = c.Post("/observe", ObserveBody(refused));
  const auto took = Clock::now() - t0;
  EXPECT_TRUE(IsProblem(r, 503, "unavailable")) << r;
  EXPECT_EQ(r.header("retry-after"), "1");
  EXPECT_GE(took, 300ms - 20ms) << "answered 503 before the queue wait passed";
  EXPECT_LT(took, 15s) << "waited to the request deadline instead of the queue wait";
  EXPECT_EQ(Metric(admin, "scangate_queue_waits_total"), 1);
  EXPECT_EQ(Metric(admin, "scangate_queue_wait_timeouts_total"), 1);

  stalled.Release();
  const HttpResponse stalled_r = stalled.Join();
  EXPECT_EQ(stalled_r.status, 201) << stalled_r;
  EXPECT_EQ(pg.CountDigest(Sha256Hex(refused)), 0) << "a key answered 'unavailable' was written";
  // Room again: the same connection's next request is answered at once.
  const HttpResponse again = c.Post("/observe", ObserveBody(refused));
  EXPECT_EQ(again.status, 201) << again;
  EXPECT_EQ(server.Stop(), 0);
}

// A batch with more Store-bound entries than the room left: the entries that do not fit wait for room
// (counted as queue waits) instead of the whole batch being answered 503; once the stall ends the batch is
// answered 200 with every key new and recorded. (Before, a batch refused part-way was one 503.)
TEST(Backpressure, BatchLargerThanTheRoomWaitsForIt) {
  ScangateProcess server({"--writers=1", "--queue-limit=2", "--queue-wait=30s", "--request-timeout=40s"});
  ASSERT_TRUE(server.Start());
  Pg pg;
  HttpClient admin(server.port());
  StalledRequest stalled(server.port());
  ASSERT_TRUE(pg.WaitForLockWaiter()) << "the writer never blocked on the test's row";

  // One slot is free beside the stalled item: the first key takes it, the other two wait.
  std::vector<std::string> keys = {UniqueKey("bp-batch"), UniqueKey("bp-batch"), UniqueKey("bp-batch")};
  HttpResponse batch_r;
  std::atomic<bool> answered{false};
  std::thread batch_t([&] {
    batch_r = PostOrFail(server.port(), "/observe/batch",
                         "{\"keys\":[" + JsonString(keys[0]) + "," + JsonString(keys[1]) + "," + JsonString(keys[2]) +
                             "]}");
    answered = true;
  });
  EXPECT_TRUE(WaitForMetric(admin, "scangate_queue_waits_total", 2, [&] { return answered.load(); }))
      << admin.Get("/metrics").body;
  EXPECT_FALSE(answered.load()) << "the batch was answered while its entries had no room";  // (its body below)
  stalled.Release();
  batch_t.join();
  const HttpResponse stalled_r = stalled.Join();
  EXPECT_EQ(stalled_r.status, 201) << stalled_r;
  ASSERT_EQ(batch_r.status, 200) << batch_r;
  const auto body = batch_r.json();
  for (std::size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(body.at("results").at(i).at("verdict"), "new") << batch_r;
    EXPECT_EQ(pg.CountDigest(Sha256Hex(keys[i])), 1) << i;
  }
  EXPECT_EQ(Metric(admin, "scangate_queue_wait_timeouts_total"), 0);
  EXPECT_EQ(server.Stop(), 0);
}

}  // namespace
}  // namespace scangate::it
