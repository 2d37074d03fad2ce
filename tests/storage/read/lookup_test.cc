// Tests storage/read/lookup.h against the throwaway PostgreSQL of fixture "pg": found (first_seen and source
// as the writers recorded them), not found, a row past the horizon not found, a pack row's lot/expiry/keep_until
// and its own horizon, never a write, refusal while unreachable; the closed epochs (issue 54): a key's live row there
// is found, the newest of several, an expired one not, and an epoch closed after the look-up was prepared is read. Recovery after an outage is covered end to end by tests/server/service_lookup_test.cc.
#include "storage/read/lookup.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <utility>

#include <pqxx/pqxx>

#include "storage/store.h"
#include "tests/answer_within.h"
#include "tests/storage/epochs/hand_closed_epoch.h"
#include "tests/storage/pg_test_db.h"

namespace scangate::storage {
namespace {

std::string Url() { return PgTestUrl(); }

// Find and wait for its answer, at most kAnswerBound: a missing answer is a failure, not a hang.
RecordLookup FindSync(Lookup& l, const Digest& d) {
  Answer<RecordLookup> answer;
  if (!l.Find(d, answer.Setter())) {
    ADD_FAILURE() << "Find refused";
    return RecordLookup{};
  }
  return answer.Get();
}

std::int64_t Rows(pqxx::connection& c) {
  pqxx::work tx(c);
  return tx.exec1("SELECT count(*) FROM scan_keys")[0].as<std::int64_t>();
}

TEST(Lookup, FoundAndNotFoundNeverWrites) {
  StoreOptions so;
  so.url = Url();
  Store store(so);
  store.Start();  // applies migrations
  const Digest seen = RandomDigest();
  Answer<Result> inserted;
  ASSERT_TRUE(store.Submit(0, seen, "lane 5", inserted.Setter()));
  const auto ins = inserted.Within();
  ASSERT_TRUE(ins.has_value()) << "no answer to the Submit within " << kAnswerBound.count() << " s";
  ASSERT_EQ(ins->outcome, Outcome::kInserted);

  Lookup lookup(LookupOptions{Url()});
  lookup.Start();
  ASSERT_TRUE(lookup.up());
  pqxx::connection c(Url());
  const auto rows = Rows(c);

  RecordLookup r = FindSync(lookup, seen);
  EXPECT_EQ(r.status, RecordLookup::Status::kFound);
  EXPECT_EQ(r.first_seen, ins->first_seen);
  EXPECT_EQ(r.source, std::optional<std::string>("lane 5"));

  r = FindSync(lookup, RandomDigest());
  EXPECT_EQ(r.status, RecordLookup::Status::kNotFound);
  EXPECT_EQ(Rows(c), rows) << "a lookup wrote";
  lookup.Shutdown();
  EXPECT_FALSE(lookup.Find(seen, [](const RecordLookup&) { ADD_FAILURE() << "ran after Shutdown"; }));
}

// A row older than the horizon (LookupOptions::retention) has expired: kNotFound whether or not the expiry
// has deleted it yet; a row within it is kFound (first_seen and source as held). Without a horizon (0) every
// row is found however old. Ages by backdating (PostgreSQL's clock): no timing involved.
TEST(Lookup, ExpiredRowIsNotFound) {
  StoreOptions so;
  so.url = Url();
  Store store(so);
  store.Start();  // applies migrations
  const Digest fresh = RandomDigest(), within = RandomDigest(), expired = RandomDigest();
  {
    pqxx::connection c(Url());
    pqxx::work tx(c);
    const std::pair<const Digest*, const char*> rows[] = {
        {&fresh, "0 seconds"}, {&within, "59 minutes"}, {&expired, "61 minutes"}};
    for (const auto& [d, age] : rows) {
      tx.exec_params0("INSERT INTO scan_keys (digest, seen_by, first_seen) VALUES (scangate_stored_digest($1::bytea), 'lane 9', "
                      "now() - $2::interval)",
                      pqxx::binarystring(d->data(), d->size()), age);
    }
    tx.commit();
  }
  LookupOptions with_horizon;
  with_horizon.url = Url();
  with_horizon.retention = std::chrono::hours(1);
  Lookup lookup(with_horizon);
  lookup.Start();
  ASSERT_TRUE(lookup.up());
  for (const Digest* d : {&fresh, &within}) {
    const RecordLookup r = FindSync(lookup, *d);
    EXPECT_EQ(r.status, RecordLookup::Status::kFound);
    EXPECT_EQ(r.source, std::optional<std::string>("lane 9"));
    EXPECT_FALSE(r.first_seen.empty());
  }
  EXPECT_EQ(FindSync(lookup, expired).status, RecordLookup::Status::kNotFound);
  lookup.Shutdown();

  Lookup without(LookupOptions{Url()});  // retention 0: off
  without.Start();
  ASSERT_TRUE(without.up());
  const RecordLookup r = FindSync(without, expired);
  EXPECT_EQ(r.status, RecordLookup::Status::kFound);
  EXPECT_EQ(r.source, std::optional<std::string>("lane 9"));
  without.Shutdown();
}

// Pack rows (issue 24): lot, expiry and keep_until are reported as the store recorded them. A row expires by its
// keep_until when it has one — past it: kNotFound even with the retention off; within it: kFound even when older
// than the retention — and by the retention otherwise. A raw row reports no pack columns.
TEST(Lookup, PackRowsReportTheirAttrsAndExpireByKeepUntil) {
  StoreOptions so;
  so.url = Url();
  so.pack_horizons = true;
  Store store(so);
  store.Start();  // applies migrations
  const Digest pack = RandomDigest(), raw = RandomDigest(), past = RandomDigest(), pinned_old = RandomDigest();
  PackAttrs attrs;
  attrs.lot = RandomDigest();
  attrs.expiry = 20'818;
  attrs.keep_until_us = 4'102'444'800'000'000;  // 2100-01-01
  Answer<Result> inserted;
  ASSERT_TRUE(store.Submit(0, pack, "lane 3", inserted.Setter(), nullptr, Expect::kUnknown, attrs));
  const auto ins = inserted.Within();
  ASSERT_TRUE(ins.has_value());
  ASSERT_EQ(ins->outcome, Outcome::kInserted);
  {
    pqxx::connection c(Url());
    pqxx::work tx(c);
    tx.exec_params0("INSERT INTO scan_keys (digest, first_seen) VALUES (scangate_stored_digest($1::bytea), now())",
                    pqxx::binarystring(raw.data(), raw.size()));
    tx.exec_params0("INSERT INTO scan_keys (digest, first_seen, keep_until) VALUES (scangate_stored_digest($1::bytea), now(), "
                    "now() - interval '1 second')",
                    pqxx::binarystring(past.data(), past.size()));
    tx.exec_params0("INSERT INTO scan_keys (digest, first_seen, keep_until) VALUES (scangate_stored_digest($1::bytea), "
                    "now() - interval '2 hours', now() + interval '1 day')",
                    pqxx::binarystring(pinned_old.data(), pinned_old.size()));
    tx.commit();
  }
  for (const auto retention : {std::chrono::seconds(0), std::chrono::seconds(3600)}) {
    SCOPED_TRACE(retention.count());
    LookupOptions lo;
    lo.url = Url();
    lo.retention = retention;
    Lookup lookup(lo);
    lookup.Start();
    ASSERT_TRUE(lookup.up());
    RecordLookup r = FindSync(lookup, pack);
    EXPECT_EQ(r.status, RecordLookup::Status::kFound);
    EXPECT_EQ(r.first_seen, ins->first_seen);
    EXPECT_EQ(r.lot, std::optional<Digest>(StoredDigest(*attrs.lot)));  // as the table holds it (sql/013)
    EXPECT_EQ(r.expiry, attrs.expiry);
    EXPECT_EQ(r.keep_until_us, std::optional<std::int64_t>(attrs.keep_until_us));
    r = FindSync(lookup, raw);
    EXPECT_EQ(r.status, RecordLookup::Status::kFound);
    EXPECT_FALSE(r.lot || r.expiry || r.keep_until_us);
    EXPECT_EQ(FindSync(lookup, past).status, RecordLookup::Status::kNotFound);
    EXPECT_EQ(FindSync(lookup, pinned_old).status, RecordLookup::Status::kFound);
    lookup.Shutdown();
  }
}

TEST(Lookup, UnreachableRefuses) {
  Lookup lookup(LookupOptions{"postgresql://postgres@127.0.0.1:1/none?connect_timeout=1"});
  lookup.Start();
  EXPECT_FALSE(lookup.up());
  EXPECT_FALSE(lookup.Find(RandomDigest(), [](const RecordLookup&) { ADD_FAILURE() << "ran although refused"; }));
}

// The closed epochs are read too: a key live in one is found (the newest row of several), one expired there is not,
// and an epoch closed after the statement was prepared (a new catalog generation) is read at the next look-up.
TEST(Lookup, ReadsTheClosedEpochs) {
  MigrateOnce();
  using namespace std::chrono_literals;
  const auto retention = std::chrono::hours(1);
  HandClosedEpoch older(Unique("scan_keys_e_lookup_older")), newer(Unique("scan_keys_e_lookup_newer"));
  const Digest twice = RandomDigest(), expired = RandomDigest(), later = RandomDigest();
  older.Add(twice, 600s);
  newer.Add(twice, 30s);
  older.Add(expired, 7200s);
  older.Close(false);
  LookupOptions lo{Url()};
  lo.retention = retention;
  Lookup lookup(lo);
  lookup.Start();
  ASSERT_TRUE(lookup.up());
  EXPECT_EQ(FindSync(lookup, twice).status, RecordLookup::Status::kFound);  // in `older` only, for now
  newer.Add(later, 10s);
  newer.Close(true);  // closes after the statement was prepared
  const RecordLookup r = FindSync(lookup, twice);
  EXPECT_EQ(r.status, RecordLookup::Status::kFound);
  pqxx::connection c(Url());
  pqxx::work tx(c);
  const std::string newest = tx.exec_params1(
      "SELECT to_char(first_seen AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') FROM " + newer.name() +
          " WHERE digest = scangate_stored_digest($1::bytea)", HexBytea(twice))[0].as<std::string>();
  EXPECT_EQ(r.first_seen, newest) << "not the newest live row";
  EXPECT_EQ(FindSync(lookup, later).status, RecordLookup::Status::kFound);
  EXPECT_EQ(FindSync(lookup, expired).status, RecordLookup::Status::kNotFound);
}

}  // namespace
}  // namespace scangate::storage
