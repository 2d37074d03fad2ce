// Tests sql/013's online move of scan_keys to the 16-byte layout (storage/pg/table_layout.h) on a database written in
// today's layout (sql/001..010 applied, rows written as scangate before sql/013 wrote them), while a Store keeps
// writing to it — new keys by ON CONFLICT and by COPY, repeats, take-overs of expired rows, packs with their lot,
// expiry and idempotency record, write-behind rows — and a Lookup, a poll follower and a logical follower keep
// reading. The move is interrupted once (its backend cancelled mid-backfill) and resumed. Checked: every verdict
// during the move is exact (each new key kInserted once and kDuplicate after; every present key kDuplicate; no
// kUnavailable, no kUnknown), every lookup of a present key finds it, every row and its first_seen, lot, expiry,
// keep_until and record survive, both followers see the keys committed before and after the swap, and afterwards
// the warm load, the partition functions (sql/007) and the expiry work on the new table.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <pqxx/pqxx>

#include "core/digest.h"
#include "storage/follow/follower.h"
#include "storage/horizon/expiry.h"
#include "storage/read/lookup.h"
#include "storage/start/migrations.h"
#include "storage/store.h"
#include "tests/answer_within.h"
#include "tests/storage/pg_test_db.h"
#include "tests/storage/scratch_db.h"

namespace scangate::storage {
namespace {

using namespace std::chrono_literals;

constexpr int kLiveRows = 20'000;                     // old raw rows within the horizon: n = 1 .. kLiveRows
constexpr int kExpiredFrom = 100'001, kExpiredRows = 2'000;  // old rows past it: taken over during the move
constexpr int kPackFrom = 200'001, kPackRows = 300;   // old pack rows (lot, expiry, keep_until, record)
constexpr auto kRetention = 1h;

std::uint32_t RouteOf(const Digest& d) { return d[0] | (d[1] << 8); }

// sha256(int8send(n)) as the seeding SQL computes it: the digest of old row n.
Digest OldDigest(std::int64_t n) {
  std::string be(8, '\0');
  for (int i = 0; i < 8; ++i) be[i] = static_cast<char>(static_cast<std::uint64_t>(n) >> (56 - 8 * i));
  return Digester::Sha256()(be);
}

// What the Store answered for one Submit, or a failure text.
std::optional<Result> SubmitAndWait(Store& store, const Digest& d, const std::string& source, Expect expect,
                                    const PackAttrs& attrs = {}) {
  Answer<Result> answer;
  if (!store.Submit(RouteOf(d), d, source, answer.Setter(), nullptr, expect, attrs)) return std::nullopt;
  return answer.Within();
}

// first_seen in µs of the rows of `ns` (old row numbers), by their stored digest: works in either layout.
std::map<std::int64_t, std::int64_t> FirstSeenOf(const std::string& conninfo, const std::vector<std::int64_t>& ns,
                                                 bool v2) {
  pqxx::connection c(conninfo);
  pqxx::nontransaction tx(c);
  std::map<std::int64_t, std::int64_t> out;
  for (const auto n : ns) {
    const std::string where = v2 ? "digest = scangate_stored_digest(sha256(int8send($1::int8)))"
                                 : "digest = sha256(int8send($1::int8))";
    const auto r = tx.exec_params("SELECT (extract(epoch FROM first_seen) * 1000000)::int8 FROM scan_keys WHERE " + where, n);
    if (r.size() == 1) out[n] = r[0][0].as<std::int64_t>();
  }
  return out;
}

// A pack row's lot, expiry, keep_until and record as hex / text, the digests cut to their stored 16 bytes.
std::string PackOf(pqxx::transaction_base& tx, std::int64_t n, bool v2) {
  const std::string sql =
      v2 ? "SELECT encode(uuid_send(lot), 'hex') || ' ' || expiry || ' ' || keep_until || ' ' || "
           "encode(uuid_send(request), 'hex') FROM scan_keys WHERE digest = scangate_stored_digest(sha256(int8send($1::int8)))"
         : "SELECT encode(substring(lot FROM 1 FOR 16), 'hex') || ' ' || expiry || ' ' || keep_until || ' ' || "
           "encode(request, 'hex') FROM scan_keys WHERE digest = sha256(int8send($1::int8))";
  const auto r = tx.exec_params(sql, n);
  return r.size() == 1 ? r[0][0].as<std::string>() : "absent";
}

int Layout(const std::string& conninfo) {
  pqxx::connection c(conninfo);
  return pqxx::nontransaction(c).exec1("SELECT scangate_layout()")[0].as<int>();
}

// Digests a follower applied, as stored forms.
struct Seen {
  std::mutex mu;
  std::set<Digest> digests;
  void Add(std::span<const Digest> ds) {
    std::lock_guard lk(mu);
    for (const auto& d : ds) digests.insert(StoredDigest(d));
  }
  bool Has(const Digest& d) {
    std::lock_guard lk(mu);
    return digests.count(StoredDigest(d)) != 0;
  }
};

TEST(LayoutMigration, OnlineMoveKeepsEveryVerdictAndEveryReader) {
  ASSERT_FALSE(PgDir().empty()) << "SCANGATE_TEST_PG_DIR not set (run through ctest)";
  ScratchDb db("sg_layout");
  {
    pqxx::connection c(db.conninfo);
    ApplyMigrations(c, 10);  // the schema scangate had before sql/013
    pqxx::nontransaction tx(c);
    ASSERT_EQ(tx.exec1("SELECT format_type(atttypid, NULL) FROM pg_attribute WHERE attrelid = 'scan_keys'::regclass "
                       "AND attname = 'digest'")[0].as<std::string>(), "bytea");
    // Rows as scangate wrote them before sql/013 (its batch INSERT's columns; commit_xid by its default).
    tx.exec("INSERT INTO scan_keys (digest, source, first_seen) SELECT sha256(int8send(g::int8)), 'old', "
            "now() - (g % 50) * interval '1 minute' FROM generate_series(1, " + std::to_string(kLiveRows) + ") g");
    tx.exec("INSERT INTO scan_keys (digest, source, first_seen) SELECT sha256(int8send(g::int8)), 'expired', "
            "now() - interval '3 hours' FROM generate_series(" + std::to_string(kExpiredFrom) + ", " +
            std::to_string(kExpiredFrom + kExpiredRows - 1) + ") g");
    tx.exec("INSERT INTO scan_keys (digest, source, lot, expiry, keep_until, request) SELECT sha256(int8send(g::int8)), "
            "'pack', sha256(int8send(g + 1000000000)), date '2027-06-30', now() + interval '400 days', "
            "substring(sha256(int8send(g + 2000000000)) FROM 1 FOR 16) FROM generate_series(" +
            std::to_string(kPackFrom) + ", " + std::to_string(kPackFrom + kPackRows - 1) + ") g");
  }
  std::vector<std::int64_t> sample;
  for (std::int64_t n = 1; n <= kLiveRows; n += 997) sample.push_back(n);
  const auto first_seen_before = FirstSeenOf(db.conninfo, sample, false);
  ASSERT_EQ(first_seen_before.size(), sample.size());
  std::vector<std::string> packs_before;
  {
    pqxx::connection c(db.conninfo);
    pqxx::nontransaction tx(c);
    for (std::int64_t n = kPackFrom; n < kPackFrom + kPackRows; n += 37) packs_before.push_back(PackOf(tx, n, false));
  }

  StoreOptions so;
  so.url = db.conninfo;
  so.writers = 2;
  so.retention = kRetention;
  so.reconnect_backoff_max = 500ms;
  Store store(so);
  store.Start();  // applies sql/013: the table holds rows, so it keeps today's layout
  ASSERT_EQ(Layout(db.conninfo), 1);

  Seen polled, decoded;
  auto reload = [&](const Follower::Apply& apply) { return store.WarmLoad(kRetention, apply); };
  FollowerOptions poll_options;
  poll_options.method = FollowMethod::kPoll;
  poll_options.conninfo = db.conninfo;
  Follower poll(poll_options, [&](std::span<const Digest> ds) { polled.Add(ds); }, reload);
  FollowerOptions logical_options = poll_options;
  logical_options.method = FollowMethod::kLogical;
  Follower logical(logical_options, [&](std::span<const Digest> ds) { decoded.Add(ds); }, reload);
  ASSERT_TRUE(poll.Start());
  ASSERT_TRUE(logical.Start());
  LookupOptions lo;
  lo.url = db.conninfo;
  lo.retention = kRetention;
  Lookup lookup(lo);
  lookup.Start();

  // In today's layout first: an old row is a duplicate with its own first_seen; an expired one is taken over.
  {
    const auto dup = SubmitAndWait(store, OldDigest(sample[1]), "a", Expect::kUnknown);
    ASSERT_TRUE(dup.has_value());
    EXPECT_EQ(dup->outcome, Outcome::kDuplicate);
    EXPECT_EQ(dup->first_seen_us, first_seen_before.at(sample[1]));
    const auto taken = SubmitAndWait(store, OldDigest(kExpiredFrom), "a", Expect::kUnknown);
    ASSERT_TRUE(taken.has_value());
    EXPECT_EQ(taken->outcome, Outcome::kInserted);
  }

  // The load during the move. Each writer thread, round after round: a new key (twice: kInserted, then kDuplicate;
  // every other one hinted new, so it goes by COPY), an old key (kDuplicate), an expired old key (kInserted: taken
  // over), a pack (kInserted; again with another lot: kDuplicate reporting the first lot), a write-behind row.
  std::atomic<bool> stop{false}, swapped{false};
  std::atomic<int> next_expired{kExpiredFrom + 1};
  std::mutex mu;
  std::vector<std::string> failures;
  std::vector<Digest> present;                    // keys the load was told were recorded (the lookups read them)
  std::vector<Digest> behind;                     // write-behind rows the load queued (written by Shutdown at last)
  std::vector<Digest> after_swap, during_move;    // keys the load recorded after / before the swap committed
  std::atomic<std::uint64_t> rounds{0};
  auto fail = [&](const std::string& what) {
    std::lock_guard lk(mu);
    if (failures.size() < 20) failures.push_back(what);
  };
  auto expect = [&](const std::optional<Result>& r, Outcome want, const std::string& what) {
    if (!r) return fail(what + ": no answer (refused or none within the bound)");
    if (r->outcome != want) {
      fail(what + ": outcome " + std::to_string(static_cast<int>(r->outcome)) + ", want " +
           std::to_string(static_cast<int>(want)));
    }
  };
  auto load = [&](int thread) {
    for (std::uint64_t i = 0; !stop.load(); ++i) {
      const bool swapped_before = swapped.load();
      const Digest fresh = RandomDigest();
      expect(SubmitAndWait(store, fresh, "new", i % 2 == 0 ? Expect::kNew : Expect::kUnknown), Outcome::kInserted, "new key");
      expect(SubmitAndWait(store, fresh, "new", Expect::kUnknown), Outcome::kDuplicate, "new key again");
      const Digest old = OldDigest(1 + static_cast<std::int64_t>((i * 7919 + thread) % kLiveRows));
      expect(SubmitAndWait(store, old, "old again", Expect::kUnknown), Outcome::kDuplicate, "old key");
      const int e = next_expired.fetch_add(1);
      if (e < kExpiredFrom + kExpiredRows) {
        expect(SubmitAndWait(store, OldDigest(e), "taken", Expect::kNew), Outcome::kInserted, "expired key");
      }
      PackAttrs first;
      first.lot = RandomDigest();
      first.expiry = 21'000;
      first.keep_until_us = 4'102'444'800'000'000;  // 2100-01-01
      const Digest pack = RandomDigest();
      expect(SubmitAndWait(store, pack, "pack", Expect::kUnknown, first), Outcome::kInserted, "pack");
      PackAttrs other = first;
      other.lot = RandomDigest();
      const auto again = SubmitAndWait(store, pack, "pack", Expect::kUnknown, other);
      expect(again, Outcome::kDuplicate, "pack again");
      if (again && (!again->recorded.lot || StoredDigest(*again->recorded.lot) != StoredDigest(*first.lot))) {
        fail("pack again: the recorded lot is not the first one");
      }
      const Digest queued = RandomDigest();
      if (!store.SubmitWriteBehind(RouteOf(queued), queued, "behind")) fail("write-behind refused");
      std::lock_guard lk(mu);
      behind.push_back(queued);
      for (const Digest& d : {fresh, pack}) {
        present.push_back(d);
        (swapped_before ? after_swap : during_move).push_back(d);
      }
      rounds.fetch_add(1);
    }
  };
  // Lookups of present keys throughout: every one is found.
  std::atomic<std::uint64_t> lookups{0};
  auto look = [&] {
    for (std::uint64_t i = 0; !stop.load(); ++i) {
      Digest d = OldDigest(1 + static_cast<std::int64_t>((i * 104729) % kLiveRows));
      if (i % 2 == 1) {
        std::lock_guard lk(mu);
        if (!present.empty()) d = present[i % present.size()];
      }
      Answer<RecordLookup> found;
      if (!lookup.Find(d, found.Setter())) {
        fail("lookup refused");
        std::this_thread::sleep_for(10ms);
        continue;
      }
      const auto r = found.Within();
      if (!r || r->status != RecordLookup::Status::kFound) {
        fail("lookup of a present key: " + std::string(!r ? "no answer" : r->status == RecordLookup::Status::kNotFound
                                                                               ? "not found" : "unavailable"));
      }
      lookups.fetch_add(1);
    }
  };
  std::vector<std::thread> threads;
  threads.emplace_back(load, 0);
  threads.emplace_back(load, 1);
  threads.emplace_back(look);
  while (rounds.load() < 20) std::this_thread::sleep_for(10ms);

  // The move, interrupted: its backend is cancelled once the backfill is under way, then CALLed again.
  {
    pqxx::connection mc(db.conninfo);
    const int pid = mc.backendpid();
    std::atomic<bool> interrupted{false};
    std::thread call([&] {
      try {
        pqxx::nontransaction(mc).exec("CALL scangate_layout_migrate(slice_blocks => 2, pause_ms => 20)");
      } catch (const pqxx::sql_error&) {
        interrupted.store(true);
      }
    });
    pqxx::connection watch(db.conninfo);
    auto progress = [&] {
      const auto r = pqxx::nontransaction(watch).exec(
          "SELECT next_block, end_block, state FROM scangate_layout_migration");
      return r.empty() ? std::make_tuple(std::int64_t{-1}, std::int64_t{-1}, std::string("none"))
                       : std::make_tuple(r[0][0].as<std::int64_t>(), r[0][1].as<std::int64_t>(), r[0][2].as<std::string>());
    };
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (std::get<0>(progress()) < 20 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
    pqxx::nontransaction(watch).exec_params("SELECT pg_cancel_backend($1)", pid);
    call.join();
    EXPECT_TRUE(interrupted.load()) << "the move ended before it was cancelled";
    const auto [next, end, state] = progress();
    EXPECT_EQ(state, "mirroring");
    EXPECT_GT(next, 0);
    EXPECT_LT(next, end) << "cancelled too late to test a resume";
    EXPECT_EQ(Layout(db.conninfo), 1);
    std::this_thread::sleep_for(200ms);  // writes with the mirror in place and half a backfill
    pqxx::connection again(db.conninfo);
    pqxx::nontransaction(again).exec("CALL scangate_layout_migrate(slice_blocks => 16)");
    swapped.store(true);
    EXPECT_EQ(Layout(db.conninfo), 2);
    const auto [next2, end2, state2] = progress();
    EXPECT_EQ(state2, "swapped");
    EXPECT_EQ(next2, end2);
  }
  const std::uint64_t rounds_at_swap = rounds.load();
  while (rounds.load() < rounds_at_swap + 20) std::this_thread::sleep_for(10ms);  // the new layout, under load
  stop.store(true);
  for (auto& t : threads) t.join();
  {
    std::lock_guard lk(mu);
    EXPECT_TRUE(failures.empty()) << failures.size() << " failures, the first: " << failures.front();
    EXPECT_FALSE(during_move.empty());
    EXPECT_FALSE(after_swap.empty());
  }
  EXPECT_GT(lookups.load(), 0u);
  {
    std::lock_guard lk(mu);
    std::printf("layout_migration: %llu load rounds (%zu keys recorded before the swap, %zu after), %llu lookups, "
                "%zu write-behind rows; the store's writers: %llu batches, %llu by COPY\n",
                static_cast<unsigned long long>(rounds.load()), during_move.size(), after_swap.size(),
                static_cast<unsigned long long>(lookups.load()), behind.size(),
                static_cast<unsigned long long>(store.Stats().batches),
                static_cast<unsigned long long>(store.Stats().copy_batches));
  }
  // The take-overs before the swap moved with it: each of those keys is a duplicate now (its row renewed), as is a
  // pack scanned again.
  for (int e = kExpiredFrom; e < std::min(next_expired.load(), kExpiredFrom + kExpiredRows); ++e) {
    const auto r = SubmitAndWait(store, OldDigest(e), "again", Expect::kUnknown);
    ASSERT_TRUE(r.has_value());
    ASSERT_EQ(r->outcome, Outcome::kDuplicate) << "a row taken over before the swap is expired after it: " << e;
  }
  store.Shutdown();  // the write-behind rows are written

  {
    pqxx::connection c(db.conninfo);
    EXPECT_TRUE(pqxx::nontransaction(c).exec1("SELECT to_regclass('scan_keys_v1') IS NULL")[0].as<bool>())
        << "the old table was kept";
    // Every key recorded before, during and after the move, in the new table.
    EXPECT_EQ(CountRows(c, present), static_cast<std::int64_t>(present.size()));
    EXPECT_EQ(CountRows(c, behind), static_cast<std::int64_t>(behind.size()));
    std::vector<Digest> old_live;
    for (std::int64_t n = 1; n <= kLiveRows; n += 13) old_live.push_back(OldDigest(n));
    EXPECT_EQ(CountRows(c, old_live), static_cast<std::int64_t>(old_live.size()));
    EXPECT_EQ(pqxx::nontransaction(c).exec1("SELECT count(*) FROM scan_keys WHERE seen_by = 'old'")[0].as<int>(),
              kLiveRows);
  }
  EXPECT_EQ(FirstSeenOf(db.conninfo, sample, true), first_seen_before) << "an old row's first_seen changed";
  {
    pqxx::connection c(db.conninfo);
    pqxx::nontransaction tx(c);
    std::vector<std::string> packs_after;
    for (std::int64_t n = kPackFrom; n < kPackFrom + kPackRows; n += 37) packs_after.push_back(PackOf(tx, n, true));
    EXPECT_EQ(packs_after, packs_before) << "a pack row's lot, expiry, keep_until or record changed";
  }

  // Both followers saw keys committed during the move and after the swap.
  std::vector<Digest> must_see;
  {
    std::lock_guard lk(mu);
    must_see = {during_move.front(), during_move.back(), after_swap.front(), after_swap.back()};
  }
  const auto seen_all = [&](Seen& s) {
    for (const auto& d : must_see) {
      if (!s.Has(d)) return false;
    }
    return true;
  };
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while ((!seen_all(polled) || !seen_all(decoded)) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(seen_all(polled)) << "the poll follower missed a key";
  EXPECT_TRUE(seen_all(decoded)) << "the logical follower missed a key";
  poll.Stop();
  logical.Stop();
  lookup.Shutdown();

  // The warm load reads the new table: exactly the rows within the window, as stored forms.
  {
    Store reader(so);
    reader.Start();
    std::mutex wm;
    std::set<Digest> warm;
    reader.WarmLoad(kRetention, [&](std::span<const Digest> chunk) {
      std::lock_guard lk(wm);
      warm.insert(chunk.begin(), chunk.end());
    });
    pqxx::connection c(db.conninfo);
    const auto expected =
        pqxx::nontransaction(c).exec1("SELECT count(*) FROM scan_keys WHERE first_seen > now() - interval '1 hour'")[0]
            .as<std::size_t>();
    EXPECT_GE(warm.size(), expected);  // a row may age out between the two reads, never the other way
    EXPECT_LE(warm.size(), expected + 50);
    EXPECT_TRUE(warm.count(StoredDigest(OldDigest(7))));
    EXPECT_TRUE(warm.count(StoredDigest(must_see.back())));
    reader.Shutdown();
  }
  // The partition functions (sql/007) over the new table: a full digest in, the same digest out.
  {
    pqxx::connection c(db.conninfo);
    pqxx::nontransaction tx(c);
    EXPECT_EQ(tx.exec1("SELECT count(*) FROM scangate_lookup(sha256(int8send(7::int8))) WHERE digest = "
                       "sha256(int8send(7::int8)) AND source = 'old'")[0].as<int>(), 1);
    const auto first = tx.exec1(
        "SELECT bool_and(inserted), count(*) FROM scangate_observe(ARRAY[sha256('fn-1'::bytea), sha256('fn-1'::bytea), "
        "sha256(int8send(8::int8))], ARRAY['fn', 'fn', 'fn'], ARRAY[0, 0, 0]::int8[], 3600000000) "
        "WHERE digest <> sha256(int8send(8::int8))");
    EXPECT_TRUE(first[0].as<bool>());
    EXPECT_EQ(first[1].as<int>(), 1);
    EXPECT_EQ(tx.exec1("SELECT count(*) FILTER (WHERE inserted) FROM scangate_observe(ARRAY[sha256('fn-1'::bytea), "
                       "sha256(int8send(8::int8))], ARRAY['fn', 'fn'], ARRAY[0, 0]::int8[], 3600000000)")[0].as<int>(),
              0);
  }
  // The expiry deletes what is past the horizon in the new table (the expired old rows not taken over, and more).
  {
    pqxx::connection c(db.conninfo);
    pqxx::nontransaction(c).exec("INSERT INTO scan_keys (digest, seen_by, first_seen) SELECT gen_random_uuid(), "
                                 "'late', now() - interval '2 hours' FROM generate_series(1, 10)");
    ExpiryOptions eo;
    eo.conninfo = db.conninfo;
    eo.retention = kRetention;
    Expiry expiry(eo);
    EXPECT_GE(expiry.RunOnce(), 10u);
    EXPECT_EQ(pqxx::nontransaction(c)
                  .exec1("SELECT count(*) FROM scan_keys WHERE keep_until IS NULL AND first_seen < now() - "
                         "interval '1 hour 1 second'")[0]
                  .as<int>(),
              0);
  }
}

}  // namespace
}  // namespace scangate::storage
