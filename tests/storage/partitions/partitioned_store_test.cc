// Tests storage/partitions/partitioned_store.h (and storage/partitions/partitioned_reader.h) on the fixture's
// PostgreSQL: 4 partition databases and a proxy database holding the PL/Proxy cluster "scangate", all created per test
// with unique names and dropped afterwards. Digests are random: every expectation is computed from PartitionOf.
#include "storage/partitions/partitioned_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <fstream>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <pqxx/pqxx>

#include "storage/start/migrations.h"
#include "storage/partitions/partitioned_reader.h"
#include "tests/answer_within.h"
#include "tests/storage/event_log.h"
#include "tests/storage/pg_test_db.h"
#include "tests/storage/scratch_db.h"

namespace scangate::storage {
namespace {

using namespace std::chrono_literals;

constexpr std::size_t kPartitions = 4;
constexpr auto kEventually = 20s;  // liveness bound (not a performance assertion)

std::uint32_t RouteOf(const Digest& d) { return d[0] | (d[1] << 8); }

// Polls `cond` every 20 ms until it holds or kEventually passed.
template <typename Cond>
bool Eventually(Cond cond) {
  const auto until = std::chrono::steady_clock::now() + kEventually;
  while (!cond()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

// The digests held by scan_keys of the database at `conninfo`, in their stored form (core/digest.h StoredDigest).
std::set<Digest> RowsOf(const std::string& conninfo) {
  pqxx::connection c(conninfo);
  pqxx::nontransaction tx(c);
  std::set<Digest> out;
  for (const auto& row : tx.exec("SELECT rpad(encode(uuid_send(digest), 'hex'), 64, '0') FROM scan_keys")) {
    const auto d = DigestFromHex(std::string_view(row[0].c_str(), row[0].size()));
    if (d) out.insert(*d);
  }
  return out;
}

// The stored forms of `ds`: what RowsOf finds of them.
std::set<Digest> StoredSet(const std::vector<Digest>& ds) {
  std::set<Digest> out;
  for (const auto& d : ds) out.insert(StoredDigest(d));
  return out;
}

// Fences a database the way an operator moving a partition does: no new connections, existing ones ended.
void Fence(const std::string& name, bool fenced) {
  AdminExec("ALTER DATABASE " + name + " ALLOW_CONNECTIONS " + (fenced ? "false" : "true"));
  if (fenced) {
    AdminExec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '" + name + "'");
  }
}

// A WriteBehindSink that keeps what it was told.
struct RecordingSink final : WriteBehindSink {
  std::mutex mu;
  std::vector<WriteBehindDone> done;
  void Done(std::span<const WriteBehindDone> rows) override {
    std::lock_guard lk(mu);
    done.insert(done.end(), rows.begin(), rows.end());
  }
  std::size_t size() {
    std::lock_guard lk(mu);
    return done.size();
  }
};

// The databases are made once per suite (CREATE DATABASE costs ~0.35 s each here) and reset before every
// test: scan_keys emptied, every partition open again, the proxy's cluster definition made afresh.
class PartitionedStoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (PgDir().empty()) return;
    for (std::size_t p = 0; p < kPartitions; ++p) {
      parts_.push_back(std::make_unique<ScratchDb>("sg_pt_p" + std::to_string(p)));
    }
    proxy_ = std::make_unique<ScratchDb>("sg_pt_proxy");
    proxy_->Exec("CREATE EXTENSION plproxy");
  }
  static void TearDownTestSuite() {
    parts_.clear();
    proxy_.reset();
  }

  void SetUp() override {
    ASSERT_FALSE(PgDir().empty()) << "SCANGATE_TEST_PG_DIR not set (run through ctest)";
    std::string options = "connection_lifetime '1800'";
    for (std::size_t p = 0; p < kPartitions; ++p) {
      Fence(parts_[p]->name, false);
      parts_[p]->Exec("DO $$ BEGIN IF to_regclass('scan_keys') IS NOT NULL THEN TRUNCATE scan_keys; END IF; END $$");
      options += ", p" + std::to_string(p) + " '" + parts_[p]->conninfo + "'";
    }
    proxy_->Exec("DROP SERVER IF EXISTS scangate CASCADE");
    proxy_->Exec("CREATE SERVER scangate FOREIGN DATA WRAPPER plproxy OPTIONS (" + options + ")");
  }

  PartitionedStoreOptions Options(std::size_t queue_limit = 4096) {
    PartitionedStoreOptions o;
    o.base.writers = 2;
    o.base.queue_limit = queue_limit;
    o.base.reconnect_backoff_max = 200ms;
    o.base.shutdown_retry = 1s;
    o.base.start_timeout = 10s;
    o.base.log = log_;
    o.proxy_url = proxy_->conninfo;
    o.map_poll = 100ms;
    return o;
  }

  // Submits and waits; nullopt when Submit refused.
  static std::optional<Result> SubmitAndWait(PartitionedStore& store, const Digest& d) {
    Answer<Result> answer;
    if (!store.Submit(RouteOf(d), d, "till", answer.Setter())) return std::nullopt;
    return answer.Get();
  }

  // `n` random digests of partition `p`.
  static std::vector<Digest> DigestsOf(unsigned p, std::size_t n) {
    std::vector<Digest> out;
    while (out.size() < n) {
      const Digest d = RandomDigest();
      if (PartitionOf(d, kPartitions) == p) out.push_back(d);
    }
    return out;
  }

  std::shared_ptr<EventLog> log_ = std::make_shared<EventLog>();
  static inline std::vector<std::unique_ptr<ScratchDb>> parts_;
  static inline std::unique_ptr<ScratchDb> proxy_;
};

// Every digest lands in exactly the partition database PartitionOf names; a second observation is a
// duplicate; the stats sum the partitions; the warm load reads all of them; the reader routes alike.
TEST_F(PartitionedStoreTest, EachRowInTheDatabaseItsHashNames) {
  PartitionedStore store(Options());
  store.Start();
  ASSERT_EQ(store.partitions(), kPartitions);
  EXPECT_TRUE(log_->Has("partition_map"));
  const std::vector<Digest> ds = RandomDigests(400);
  std::vector<Answer<Result>> answers(ds.size());
  for (std::size_t i = 0; i < ds.size(); ++i) {
    ASSERT_TRUE(store.Submit(RouteOf(ds[i]), ds[i], "till", answers[i].Setter()));
  }
  for (auto& a : answers) EXPECT_EQ(a.Get().outcome, Outcome::kInserted);
  std::vector<std::set<Digest>> expected(kPartitions);
  for (const auto& d : ds) expected[PartitionOf(d, kPartitions)].insert(StoredDigest(d));
  for (std::size_t p = 0; p < kPartitions; ++p) {
    EXPECT_FALSE(expected[p].empty());
    EXPECT_EQ(RowsOf(parts_[p]->conninfo), expected[p]) << "partition " << p;
  }
  for (std::size_t i = 0; i < ds.size(); i += 37) {
    const auto r = SubmitAndWait(store, ds[i]);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->outcome, Outcome::kDuplicate);
  }
  const StoreStats s = store.Stats();
  EXPECT_TRUE(s.up);
  EXPECT_EQ(s.inserted, ds.size());
  const auto states = store.Partitions();
  ASSERT_EQ(states.size(), kPartitions);
  for (std::size_t p = 0; p < kPartitions; ++p) {
    EXPECT_EQ(states[p].stats.inserted, expected[p].size());
    EXPECT_NE(states[p].where.find("dbname=" + parts_[p]->name), std::string::npos) << states[p].where;
    EXPECT_EQ(states[p].where.find("user="), std::string::npos);
  }
  std::mutex mu;
  std::set<Digest> warm;
  EXPECT_EQ(store.WarmLoad(3600s,
                           [&](std::span<const Digest> chunk) {
                             std::lock_guard lk(mu);
                             warm.insert(chunk.begin(), chunk.end());
                           }),
            ds.size());
  EXPECT_EQ(warm, StoredSet(ds));  // the warm load reads stored forms back

  std::vector<std::string> where;
  for (const auto& p : parts_) where.push_back(p->conninfo);
  PartitionedReader reader(LookupOptions{}, where);
  reader.Start();
  for (std::size_t i = 0; i < 40; ++i) {
    Answer<RecordLookup> found;
    ASSERT_TRUE(Eventually([&] { return reader.up(PartitionOf(ds[i], kPartitions)); }));
    ASSERT_TRUE(reader.Find(ds[i], found.Setter()));
    EXPECT_EQ(found.Get().status, RecordLookup::Status::kFound);
  }
  store.Shutdown();
}

// SubmitWriteBehindGroup keeps Store's contract over the partitions: the accepted rows are a prefix, ending
// before the first row of a partition whose queue is full; exactly they reach the sink and the database.
TEST_F(PartitionedStoreTest, GroupAcceptsAPrefixUpToAFullPartition) {
  constexpr std::size_t kLimit = 8;
  RecordingSink sink;  // outlives the store (its writers report to it until Shutdown)
  PartitionedStore store(Options(kLimit));
  store.Start();
  // Partition 2 cannot drain (fenced): 8 rows fill its queue bound.
  Fence(parts_[2]->name, true);
  ASSERT_TRUE(Eventually([&] { return !store.up(); }));
  const std::vector<Digest> blocked = DigestsOf(2, kLimit);
  std::vector<WriteBehindRow> fill;
  for (const auto& d : blocked) fill.push_back(WriteBehindRow{RouteOf(d), d, "fill", 0, 1, false, std::nullopt});
  ASSERT_EQ(store.SubmitWriteBehindGroup(fill, sink), kLimit);
  EXPECT_TRUE(store.full());
  EXPECT_TRUE(store.serving());

  // A group: rows of partitions 0, 1, 3, then one of partition 2, then more of the others.
  std::vector<Digest> group;
  for (const unsigned p : {0u, 1u, 3u}) {
    for (const auto& d : DigestsOf(p, 2)) group.push_back(d);
  }
  const std::size_t cut = group.size();
  group.push_back(DigestsOf(2, 1).front());
  for (const unsigned p : {0u, 3u}) group.push_back(DigestsOf(p, 1).front());
  std::vector<WriteBehindRow> rows;
  for (std::size_t i = 0; i < group.size(); ++i) {
    rows.push_back(WriteBehindRow{RouteOf(group[i]), group[i], "group", 0, 100 + i, false, std::nullopt});
  }
  EXPECT_EQ(store.SubmitWriteBehindGroup(rows, sink), cut);
  ASSERT_TRUE(Eventually([&] { return sink.size() == cut; }));
  std::this_thread::sleep_for(200ms);  // nothing beyond the prefix arrives late
  {
    std::lock_guard lk(sink.mu);
    ASSERT_EQ(sink.done.size(), cut);
    std::set<std::uint64_t> tags;
    for (const auto& d : sink.done) {
      EXPECT_EQ(d.outcome, Outcome::kInserted);
      tags.insert(d.tag);
    }
    for (std::size_t i = 0; i < cut; ++i) EXPECT_TRUE(tags.count(100 + i)) << i;
  }
  auto check_rows = [&](bool with_p2) {
    for (std::size_t i = 0; i < group.size(); ++i) {
      const unsigned p = PartitionOf(group[i], kPartitions);
      if (p == 2 && !with_p2) continue;  // fenced: nothing can be read there
      EXPECT_EQ(RowsOf(parts_[p]->conninfo).count(StoredDigest(group[i])), i < cut ? 1u : 0u) << i;
    }
  };
  check_rows(false);
  // The fenced partition heals: its queued rows are written, and the whole group is accepted again.
  Fence(parts_[2]->name, false);
  ASSERT_TRUE(Eventually([&] { return sink.size() == cut + kLimit; }));
  EXPECT_EQ(RowsOf(parts_[2]->conninfo), StoredSet(blocked));
  check_rows(true);
  std::vector<WriteBehindRow> rest(rows.begin() + static_cast<std::ptrdiff_t>(cut), rows.end());
  EXPECT_EQ(store.SubmitWriteBehindGroup(rest, sink), rest.size());
  ASSERT_TRUE(Eventually([&] { return sink.size() == cut + kLimit + rest.size(); }));
  store.Shutdown();
}

// One partition unreachable: its keys are refused (or answered kUnavailable), the others still inserted;
// up() false, serving() true, the outage logged with its partition; it heals by itself.
TEST_F(PartitionedStoreTest, OnePartitionDownOthersServed) {
  PartitionedStore store(Options());
  store.Start();
  Fence(parts_[1]->name, true);
  ASSERT_TRUE(Eventually([&] { return !store.up(); }));
  EXPECT_TRUE(store.serving());
  for (const auto& d : DigestsOf(1, 5)) {
    const auto r = SubmitAndWait(store, d);
    if (r.has_value()) {
      EXPECT_EQ(r->outcome, Outcome::kUnavailable);
    }
  }
  for (const unsigned p : {0u, 2u, 3u}) {
    for (const auto& d : DigestsOf(p, 5)) {
      const auto r = SubmitAndWait(store, d);
      ASSERT_TRUE(r.has_value()) << "partition " << p << " refused while only p1 is down";
      EXPECT_EQ(r->outcome, Outcome::kInserted);
    }
  }
  {
    std::lock_guard lk(log_->mu);
    bool named = false;
    for (const auto& [event, fields] : log_->events) {
      if (event == "pg_state" && fields.contains("partition") && fields.at("partition").as_string() == "p1" &&
          fields.at("state").as_string() == "down") {
        named = true;
      }
    }
    EXPECT_TRUE(named) << "no pg_state down line naming p1";
  }
  EXPECT_FALSE(store.Partitions()[1].stats.up);
  EXPECT_TRUE(store.Partitions()[0].stats.up);
  Fence(parts_[1]->name, false);
  ASSERT_TRUE(Eventually([&] { return store.up(); }));
  const Digest d = DigestsOf(1, 1).front();
  const auto r = SubmitAndWait(store, d);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->outcome, Outcome::kInserted);
  EXPECT_EQ(RowsOf(parts_[1]->conninfo).count(StoredDigest(d)), 1u);
  store.Shutdown();
}

// A partition moved (same count): after a poll its writes land in the new database, the listener is told,
// the old database gets nothing more. A map with another count is refused and the old map kept.
TEST_F(PartitionedStoreTest, MapChangeRetargetsAndCountChangeIsRefused) {
  ScratchDb moved("sg_pt_moved");
  {
    pqxx::connection c(moved.conninfo);
    ApplyMigrations(c);  // a moved partition is a copy of its database: the schema is there
  }
  std::vector<std::string> where;
  for (const auto& p : parts_) where.push_back(p->conninfo);
  PartitionedReader reader(LookupOptions{}, where);  // follows the store's map as the server wires it
  reader.Start();
  PartitionedStore store(Options());
  std::mutex mu;
  std::vector<std::pair<unsigned, std::string>> told;
  store.OnRetarget([&](unsigned p, const std::string& c) {
    reader.Retarget(p, c);
    std::lock_guard lk(mu);
    told.emplace_back(p, c);
  });
  store.Start();
  const Digest before = DigestsOf(1, 1).front();
  ASSERT_EQ(SubmitAndWait(store, before)->outcome, Outcome::kInserted);

  proxy_->Exec("ALTER SERVER scangate OPTIONS (SET p1 '" + moved.conninfo + "')");
  ASSERT_TRUE(Eventually([&] { return log_->Has("partition_map_changed"); }));
  EXPECT_EQ(store.conninfo(1), moved.conninfo);
  {
    std::lock_guard lk(mu);
    ASSERT_EQ(told.size(), 1u);
    EXPECT_EQ(told[0].first, 1u);
    EXPECT_EQ(told[0].second, moved.conninfo);
  }
  const std::vector<Digest> after = DigestsOf(1, 20);
  for (const auto& d : after) {
    const auto r = SubmitAndWait(store, d);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->outcome, Outcome::kInserted);
  }
  EXPECT_EQ(RowsOf(moved.conninfo), StoredSet(after));
  EXPECT_EQ(RowsOf(parts_[1]->conninfo), std::set<Digest>{StoredDigest(before)});
  // The reader reads p1 from the new database now: the rows written there are found, the old one's is not.
  auto find = [&](const Digest& d) {
    Answer<RecordLookup> found;
    if (!reader.Find(d, found.Setter())) return RecordLookup::Status::kUnavailable;
    return found.Get().status;
  };
  ASSERT_TRUE(Eventually([&] { return find(after[0]) == RecordLookup::Status::kFound; }));
  EXPECT_EQ(find(after[1]), RecordLookup::Status::kFound);
  EXPECT_EQ(find(before), RecordLookup::Status::kNotFound);

  // 8 partitions: refused, logged once, the 4-partition map stays in force.
  proxy_->Exec("ALTER SERVER scangate OPTIONS (ADD p4 'host=a', ADD p5 'host=b', ADD p6 'host=c', ADD p7 'host=d')");
  ASSERT_TRUE(Eventually([&] { return log_->Has("partition_map_refused"); }));
  std::this_thread::sleep_for(300ms);  // a few more polls
  {
    std::lock_guard lk(log_->mu);
    EXPECT_EQ(std::count_if(log_->events.begin(), log_->events.end(),
                            [](const auto& e) { return e.first == "partition_map_refused"; }),
              1);
  }
  EXPECT_EQ(store.partitions(), kPartitions);
  EXPECT_EQ(store.conninfo(1), moved.conninfo);
  const Digest d3 = DigestsOf(3, 1).front();
  EXPECT_EQ(SubmitAndWait(store, d3)->outcome, Outcome::kInserted);
  EXPECT_EQ(RowsOf(parts_[3]->conninfo).count(StoredDigest(d3)), 1u);
  store.Shutdown();
}

// Partitions move to the 16-byte layout one at a time (issue 45, sql/013): a partitioned store over two databases in
// today's layout keeps every verdict while p0 is moved online and p1 is not yet, and after p1 follows; the routed
// reader finds every key throughout, and the PL/Proxy functions (sql/proxy/) answer across both layouts with full
// digests in and out.
TEST(PartitionedLayout, PartitionsMoveOneAtATime) {
  ASSERT_FALSE(PgDir().empty()) << "SCANGATE_TEST_PG_DIR not set (run through ctest)";
  constexpr std::size_t kTwo = 2;
  ScratchDb p0("sg_pl_p0"), p1("sg_pl_p1"), proxy("sg_pl_proxy");
  for (const ScratchDb* db : {&p0, &p1}) {
    pqxx::connection c(db->conninfo);
    ApplyMigrations(c, 10);  // as scangate before sql/013 left it, with a row
    pqxx::nontransaction(c).exec("INSERT INTO scan_keys (digest, source) VALUES (sha256('seed'::bytea), 'seed')");
  }
  proxy.Exec("CREATE EXTENSION plproxy");
  proxy.Exec("CREATE SERVER scangate FOREIGN DATA WRAPPER plproxy OPTIONS (connection_lifetime '1800', p0 '" +
             p0.conninfo + "', p1 '" + p1.conninfo + "')");
  proxy.Exec("CREATE USER MAPPING FOR PUBLIC SERVER scangate");
  {
    const char* src = std::getenv("SCANGATE_SOURCE_DIR");
    ASSERT_NE(src, nullptr);
    std::ifstream in(std::string(src) + "/sql/proxy/001_scangate_proxy.sql");
    const std::string sql((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_FALSE(sql.empty());
    proxy.Exec(sql);
  }
  auto layout = [](const ScratchDb& db) {
    pqxx::connection c(db.conninfo);
    return pqxx::nontransaction(c).exec1("SELECT scangate_layout()")[0].as<int>();
  };
  PartitionedStoreOptions o;
  o.base.writers = 2;
  o.base.reconnect_backoff_max = 200ms;
  o.base.start_timeout = 10s;
  o.base.retention = 1h;
  o.proxy_url = proxy.conninfo;
  o.map_poll = 100ms;
  PartitionedStore store(o);
  store.Start();  // sql/013 on both: they hold rows, so both keep today's layout
  ASSERT_EQ(store.partitions(), kTwo);
  EXPECT_EQ(layout(p0), 1);
  EXPECT_EQ(layout(p1), 1);
  PartitionedReader reader(LookupOptions{}, {p0.conninfo, p1.conninfo});
  reader.Start();

  std::vector<Digest> recorded;
  auto write_new = [&](std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      const Digest d = RandomDigest();
      Answer<Result> a;
      ASSERT_TRUE(store.Submit(RouteOf(d), d, "till", a.Setter(), nullptr, i % 2 ? Expect::kNew : Expect::kUnknown));
      ASSERT_EQ(a.Get().outcome, Outcome::kInserted);
      recorded.push_back(d);
    }
  };
  auto check_all = [&](const char* when) {
    SCOPED_TRACE(when);
    for (const Digest& d : recorded) {
      Answer<Result> a;
      ASSERT_TRUE(store.Submit(RouteOf(d), d, "till", a.Setter()));
      ASSERT_EQ(a.Get().outcome, Outcome::kDuplicate);
      Answer<RecordLookup> found;
      ASSERT_TRUE(reader.Find(d, found.Setter()));
      ASSERT_EQ(found.Get().status, RecordLookup::Status::kFound);
    }
  };
  write_new(200);
  check_all("both in today's layout");

  // p0 moves while the store writes to both partitions.
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    while (!stop.load()) write_new(10);
  });
  {
    pqxx::connection c(p0.conninfo);
    pqxx::nontransaction(c).exec("CALL scangate_layout_migrate(slice_blocks => 1)");
  }
  stop.store(true);
  writer.join();
  EXPECT_EQ(layout(p0), 2);
  EXPECT_EQ(layout(p1), 1);
  write_new(100);
  check_all("p0 moved, p1 not");

  // The proxy's functions across the two layouts: a full digest in, the same digest out.
  auto hexes = [](const std::vector<Digest>& ds) {
    std::string a = "ARRAY[";
    for (std::size_t i = 0; i < ds.size(); ++i) a += (i ? ",'\\x" : "'\\x") + ToHex(ds[i]) + "'::bytea";
    return a + "]";
  };
  std::vector<Digest> some(recorded.begin(), recorded.begin() + 20);
  std::vector<Digest> fresh = RandomDigests(20);
  {
    pqxx::connection c(proxy.conninfo);
    pqxx::nontransaction tx(c);
    const std::string n = std::to_string(some.size());
    const auto old_keys = tx.exec1("SELECT count(*) FILTER (WHERE inserted), count(*) FROM scangate_observe(" +
                                   hexes(some) + ", array_fill('px'::text, ARRAY[" + n + "]), array_fill(0::int8, ARRAY[" +
                                   n + "]), 3600000000)");
    EXPECT_EQ(old_keys[0].as<int>(), 0);
    EXPECT_EQ(old_keys[1].as<std::size_t>(), some.size());
    const auto new_keys = tx.exec1("SELECT count(*) FILTER (WHERE inserted), count(*) FROM scangate_observe(" +
                                   hexes(fresh) + ", array_fill('px'::text, ARRAY[" + n + "]), array_fill(0::int8, ARRAY[" +
                                   n + "]), 3600000000)");
    EXPECT_EQ(new_keys[0].as<std::size_t>(), fresh.size());
    for (const Digest& d : {some.front(), some.back(), fresh.front()}) {
      EXPECT_EQ(tx.exec1("SELECT count(*) FROM scangate_lookup('\\x" + ToHex(d) + "'::bytea) WHERE digest = '\\x" +
                         ToHex(d) + "'::bytea")[0].as<int>(), 1) << ToHex(d);
    }
    std::set<unsigned> where;
    for (const Digest& d : some) where.insert(PartitionOf(d, kTwo));
    EXPECT_EQ(where.size(), kTwo) << "the proxy's calls did not reach both layouts";
  }
  recorded.insert(recorded.end(), fresh.begin(), fresh.end());

  {
    pqxx::connection c(p1.conninfo);
    pqxx::nontransaction(c).exec("CALL scangate_layout_migrate()");
  }
  EXPECT_EQ(layout(p1), 2);
  write_new(100);
  check_all("both moved");
  reader.Shutdown();
  store.Shutdown();
}

}  // namespace
}  // namespace scangate::storage
