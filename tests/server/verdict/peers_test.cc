// Unit tests of the decision's trust in its followers and peers (issue 42; server/verdict/verdict.cc ReadTrust,
// server/verdict/service_peers.cc) with no sockets and no PostgreSQL: a Service over the in-memory FakeStore whose
// follower freshness and peers' coverage are injected hooks, and a fake reader of PostgreSQL.
// - item 2: the follower's freshness is read BEFORE the filter is probed. A hook that, when asked, applies the key
//   to the filter (a poll landing between the probe and the freshness read) must not make a key committed
//   elsewhere `new`;
// - a key the peers do not cover is never inserted or journalled as new: it is read (a duplicate when recorded),
//   waits for coverage (then decided by the exact path), or gets 503 unavailable when --peer-wait passes — in both
//   ack modes.
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <gtest/gtest.h>

#include "core/filter.h"
#include "server/verdict/service.h"
#include "storage/read/lookup.h"
#include "tests/server/fake_store.h"

namespace scangate::server {
namespace {

using test_support::FakeStore;

// Answers every read on the caller's executor (as the real reader does from its thread): found when the FakeStore
// holds the digest, not found otherwise, or unavailable.
class FakeReader final : public storage::DigestReader {
 public:
  FakeReader(FakeStore& store, boost::asio::io_context& ioc) : store_(store), ioc_(ioc) {}
  bool Find(const Digest& d, storage::LookupDone done) override {
    ++reads;
    storage::RecordLookup r;
    if (unavailable) {
      r.status = storage::RecordLookup::Status::kUnavailable;
    } else if (store_.rows.count(ToHex(d)) != 0) {
      r.status = storage::RecordLookup::Status::kFound;
      r.first_seen = FakeStore::kFirstSeen;
    } else {
      r.status = storage::RecordLookup::Status::kNotFound;
    }
    boost::asio::post(ioc_, [done = std::move(done), r] { done(r); });
    return true;
  }
  int reads = 0;
  bool unavailable = false;

 private:
  FakeStore& store_;
  boost::asio::io_context& ioc_;
};

class Rig {
 public:
  Rig(AckMode ack, std::chrono::milliseconds peer_wait = std::chrono::milliseconds(200)) {
    config_.ack = ack;
    config_.journal = false;  // ack=filter: the write-behind path (no journal directory in a unit test)
    config_.request_timeout = std::chrono::milliseconds(3000);
    config_.peer_wait = peer_wait;
    FilterOptions fo;
    fo.capacity = 10'000;
    fo.shards = 1;
    filter_ = std::make_unique<ShardedFilter>(fo);
    service_ = std::make_unique<Service>(config_, Digester::Sha256(), *filter_, store_, metrics_);
    service_->MarkWarm();
  }

  // "new/filter", "new/exact", "duplicate/exact" or "503 <slug>".
  std::string Observe(const std::string& key) {
    std::optional<std::string> got;
    service_->Observe(Observation{key, "", "", ""}, ioc_.get_executor(), metrics_.ForThread(0),
                      [&](std::variant<Verdict, Problem> r) {
                        EXPECT_FALSE(got) << "answered twice";
                        if (auto* v = std::get_if<Verdict>(&r)) {
                          got = std::string(v->is_new ? "new/" : "duplicate/") + (v->via_filter ? "filter" : "exact");
                        } else {
                          got = std::to_string(std::get<Problem>(r).status) + " " + std::get<Problem>(r).slug;
                        }
                      });
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!got && std::chrono::steady_clock::now() < until) {
      ioc_.restart();
      ioc_.run_for(std::chrono::milliseconds(5));
      if (tick_) tick_();
    }
    return got.value_or("no answer");
  }

  // Peers' hooks over `covered`, with the fake reader.
  void AttachPeers(std::atomic<bool>& covered) {
    Service::PeerHooks h;
    h.covered = [&covered](const Digest&, std::int64_t) { return covered.load(); };
    h.reader = &reader_;
    service_->AttachPeers(std::move(h));
  }
  void OnTick(std::function<void()> f) { tick_ = std::move(f); }

  Service& service() { return *service_; }
  ShardedFilter& filter() { return *filter_; }
  FakeStore& store() { return store_; }
  FakeReader& reader() { return reader_; }
  MetricsSnapshot Snapshot() { return service_->Snapshot(); }

 private:
  Config config_;
  boost::asio::io_context ioc_;
  Metrics metrics_{1};
  FakeStore store_;
  FakeReader reader_{store_, ioc_};
  std::unique_ptr<ShardedFilter> filter_;
  std::unique_ptr<Service> service_;
  std::function<void()> tick_;
};

std::string Hex(const std::string& key) { return ToHex(Digester::Sha256()(key)); }

// Item 2. The key is committed elsewhere (its row is in the store) but not yet in this filter; the follower is
// stale until its next poll, which applies the key and then stamps fresh. The hook plays that poll at the moment
// freshness is read. Read before the probe, the probe sees the key: possibly seen, so PostgreSQL decides it —
// duplicate. Seen failing on 1558fbb (this test with main's AttachFollowers signature, fresh_(d) without a time):
// the probe ran first, found the key absent, the hook then vouched for that negative: "new/filter".
TEST(ServiceTrust, FreshnessIsReadBeforeTheProbe) {
  Rig rig(AckMode::kFilter);
  const std::string key = "committed-elsewhere";
  rig.store().rows[Hex(key)] = "";
  const Digest d = Digester::Sha256()(key);
  rig.service().AttachFollowers(
      [&rig, d](const Digest&, BootClock::time_point) {
        const std::array<Digest, 1> one{d};
        rig.filter().InsertBatchConcurrently(one);  // the poll's digests, applied before its stamp
        return true;                                // ... and the stamp: fresh from now on
      },
      [] { return std::string(); });
  EXPECT_EQ(rig.Observe(key), "duplicate/exact") << "a negative probed before the follower applied the key was trusted";
}

// A fresh follower, no peer lagging: the filter's definitely-new is the verdict (the hooks change nothing).
TEST(ServiceTrust, CoveredKeysAreDecidedAsBefore) {
  for (const AckMode ack : {AckMode::kFilter, AckMode::kCommit}) {
    Rig rig(ack);
    std::atomic<bool> covered{true};
    rig.AttachPeers(covered);
    EXPECT_EQ(rig.Observe("fresh"), "new/filter");
    EXPECT_EQ(rig.reader().reads, 0);
  }
}

// Not covered, not recorded: no insert and no write-behind; the key waits --peer-wait, then 503 unavailable.
TEST(ServiceTrust, UncoveredNewKeyWaitsThen503WithoutRecordingIt) {
  for (const AckMode ack : {AckMode::kFilter, AckMode::kCommit}) {
    SCOPED_TRACE(ack == AckMode::kFilter ? "ack=filter" : "ack=commit");
    Rig rig(ack);
    std::atomic<bool> covered{false};
    rig.AttachPeers(covered);
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(rig.Observe("held-by-a-peer"), "503 unavailable");
    EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(200)) << "did not wait --peer-wait";
    EXPECT_EQ(rig.store().rows.count(Hex("held-by-a-peer")), 0u) << "recorded while a peer may hold it";
    EXPECT_EQ(rig.store().submits + rig.store().write_behinds, 0);
    EXPECT_EQ(rig.reader().reads, 1);
    const MetricsSnapshot s = rig.Snapshot();
    EXPECT_EQ(s.peer_uncovered, 1u);
    EXPECT_EQ(s.peer_waits, 1u);
    EXPECT_EQ(s.peer_wait_timeouts, 1u);
  }
}

// Not covered, recorded: the read answers duplicate at once (repeats go on while a peer lags).
TEST(ServiceTrust, UncoveredRecordedKeyIsADuplicateByARead) {
  for (const AckMode ack : {AckMode::kFilter, AckMode::kCommit}) {
    Rig rig(ack);
    std::atomic<bool> covered{false};
    rig.AttachPeers(covered);
    rig.store().rows[Hex("recorded")] = "";
    EXPECT_EQ(rig.Observe("recorded"), "duplicate/exact");
    EXPECT_EQ(rig.store().submits, 0);
    EXPECT_EQ(rig.Snapshot().peer_read_duplicates, 1u);
  }
}

// Coverage arrives while the key waits: it is then decided by the exact path (an insert), recorded once ("via" says
// filter: the filter said new and PostgreSQL confirmed it, as for a stale follower's fallback).
TEST(ServiceTrust, CoverageArrivingDuringTheWaitDecidesTheKeyExactly) {
  for (const AckMode ack : {AckMode::kFilter, AckMode::kCommit}) {
    Rig rig(ack, std::chrono::milliseconds(2000));
    std::atomic<bool> covered{false};
    rig.AttachPeers(covered);
    const auto t0 = std::chrono::steady_clock::now();
    rig.OnTick([&] {
      if (std::chrono::steady_clock::now() - t0 > std::chrono::milliseconds(100)) covered.store(true);
    });
    EXPECT_EQ(rig.Observe("arrives-covered"), "new/filter");
    EXPECT_EQ(rig.store().rows.count(Hex("arrives-covered")), 1u);
    EXPECT_EQ(rig.store().submits, 1) << "not decided by an insert";
    EXPECT_EQ(rig.Snapshot().peer_wait_timeouts, 0u);
  }
}

// A read that fails (PostgreSQL unreachable): 503 at once, nothing recorded.
TEST(ServiceTrust, UncoveredKeyWhoseReadFailsGets503) {
  Rig rig(AckMode::kCommit);
  std::atomic<bool> covered{false};
  rig.AttachPeers(covered);
  rig.reader().unavailable = true;
  EXPECT_EQ(rig.Observe("unreadable"), "503 unavailable");
  EXPECT_EQ(rig.store().submits, 0);
}

}  // namespace
}  // namespace scangate::server
