// Tests storage/epochs/catalog.h and sql/018 against the fixture's PostgreSQL (a database of this test's own): the
// catalog a migrated database holds; a change of the epochs is a new generation; every write path of the store (the
// batch INSERT, the binary COPY, the pack INSERT) takes the write order first — it waits while a change of the
// catalog holds the order's exclusive side, and when the change commits it writes under the new catalog or, when
// this version cannot write under that one (no open epoch), writes nothing (an outage, healed when the catalog is
// writable again); the partition function scangate_observe takes it too; a schema newer than this binary is refused;
// a scangate writer that does not say it checks the closed epochs (an older version) is refused by sql/019's guard.
#include "storage/epochs/catalog.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <thread>

#include "storage/start/migrations.h"
#include "storage/start/start_error.h"
#include "storage/store.h"
#include "tests/answer_within.h"
#include "tests/storage/event_log.h"
#include "tests/storage/epochs/write_paths.h"
#include "tests/storage/pg_test_db.h"

namespace scangate::storage {
namespace {

using namespace std::chrono_literals;

constexpr auto kEventually = 60s;  // liveness bound for what must happen by itself (not a performance bound)

class EpochCatalogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(PgTestUrl().empty()) << "SCANGATE_TEST_PG_DIR not set (run through ctest)";
    MigrateOnce();
  }
};

std::int64_t Generation(pqxx::connection& c) { return ReadEpochCatalog(c).generation; }

void Exec(pqxx::connection& c, const std::string& sql) {
  pqxx::work tx(c);
  tx.exec(sql);
  tx.commit();
}

// Waits until some session waits for the write order's shared side (a writer blocked behind a change). False when
// none did within kEventually.
bool WriterWaitsForTheOrder(pqxx::connection& c) {
  const auto until = std::chrono::steady_clock::now() + kEventually;
  while (std::chrono::steady_clock::now() < until) {
    pqxx::nontransaction tx(c);
    const auto n = tx.exec1(
                         "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND mode = 'ShareLock' AND NOT granted"
                         " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
                         " AND (classid::int8 << 32 | objid::int8) = scangate_epoch_lock_key()")[0]
                       .as<std::int64_t>();
    if (n > 0) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

StoreOptions Options(std::shared_ptr<EventLog> log) {
  StoreOptions o;
  o.url = PgTestUrl();
  o.writers = 1;
  o.reconnect_backoff_max = 200ms;
  o.log = std::move(log);
  return o;
}

// A Store on `path` whose writer is held behind a change of the catalog that `change_sql` makes, under the write
// order's exclusive side, while it writes a new key; the key's answer comes after the change commits.
struct HeldBehindAChange {
  std::shared_ptr<EventLog> log = std::make_shared<EventLog>();
  Store store{Options(log)};
  pqxx::connection watch{PgTestUrl()};
  Digest d = RandomDigest();
  Answer<Result> answer;

  void Run(const WritePath& path, const std::string& change_sql) {
    store.Start();
    ASSERT_TRUE(store.up());
    pqxx::connection change(PgTestUrl());
    pqxx::work tx(change);
    tx.exec("SELECT pg_advisory_xact_lock(scangate_epoch_lock_key())");
    ASSERT_TRUE(SubmitBy(store, d, path, answer));
    ASSERT_TRUE(WriterWaitsForTheOrder(watch)) << "the writer did not wait for the write order";
    EXPECT_EQ(CountRows(watch, {d}), 0);
    tx.exec(change_sql);
    tx.commit();
  }
};

// A migrated database holds one epoch, open, named scan_keys, and a generation; nothing refuses it.
TEST_F(EpochCatalogTest, AMigratedDatabaseHasOneOpenEpoch) {
  pqxx::connection c(PgTestUrl());
  const EpochCatalog cat = ReadEpochCatalog(c);
  EXPECT_NE(cat.generation, 0);
  EXPECT_GT(cat.open_id, 0);
  EXPECT_TRUE(cat.closed.empty());
  EXPECT_NO_THROW(RequireWritableByThisVersion(cat));
  pqxx::work tx(c);
  const auto r = tx.exec("SELECT id, relation, state FROM scangate_epochs");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0][0].as<std::int64_t>(), cat.open_id);
  EXPECT_EQ(r[0][1].as<std::string>(), "scan_keys");
  EXPECT_EQ(r[0][2].as<std::string>(), "open");
}

// A catalog with its open epoch is writable, with closed epochs or without; one without an open epoch is not.
TEST(EpochCatalogPure, ACatalogWithItsOpenEpochIsWritable) {
  EpochCatalog c{7, 3, {}, {}};
  EXPECT_NO_THROW(RequireWritableByThisVersion(c));
  c.closed.push_back(ClosedEpoch{11, nullptr});
  c.relations.push_back("scan_keys_e_11");
  EXPECT_NO_THROW(RequireWritableByThisVersion(c));
  // A relation goes into SQL text unquoted: the catalog's readers refuse one that is not a plain identifier.
  EXPECT_THROW(RequirePlainRelation("scan_keys; DROP TABLE scan_keys"), EpochsNotChecked);
  EXPECT_EQ(RequirePlainRelation("scan_keys_e_11"), "scan_keys_e_11");
  c.open_id = 0;
  c.closed.clear();
  c.relations.clear();
  EXPECT_THROW(RequireWritableByThisVersion(c), EpochsNotChecked);
}

// Every statement that changes scangate_epochs gives the catalog a new generation, in its transaction.
TEST_F(EpochCatalogTest, AChangeOfTheEpochsIsANewGeneration) {
  pqxx::connection c(PgTestUrl());
  const std::int64_t before = Generation(c);
  Exec(c, "UPDATE scangate_epochs SET opened_at = opened_at");
  const std::int64_t after = Generation(c);
  EXPECT_NE(after, before);
  {
    pqxx::work tx(c);
    tx.exec("INSERT INTO scangate_epochs (relation, state) VALUES ('scan_keys_e_rolled_back', 'closed')");
    tx.abort();  // a change rolled back leaves the generation as it was
  }
  EXPECT_EQ(Generation(c), after);
}

// scangate_write_order: the generation the writer read passes; another one fails with SGE01 (IsEpochCatalogChange);
// without one (NULL) it passes while every epoch is open.
TEST_F(EpochCatalogTest, TheWriteOrderChecksTheGeneration) {
  pqxx::connection c(PgTestUrl());
  const std::int64_t g = Generation(c);
  {
    pqxx::work tx(c);
    EXPECT_NO_THROW(tx.exec_params(kWriteOrderSql, g));
    EXPECT_NO_THROW(tx.exec("SELECT scangate_write_order(NULL)"));
  }
  pqxx::work tx(c);
  try {
    tx.exec_params(kWriteOrderSql, g ^ 1);
    ADD_FAILURE() << "scangate_write_order accepted a generation that is not the catalog's";
  } catch (const pqxx::sql_error& e) {
    EXPECT_TRUE(IsEpochCatalogChange(e)) << e.what() << " " << e.sqlstate();
  }
}

// Each write path waits while a change of the catalog holds the order, and then writes under the new catalog: the
// key is inserted once, after the change (the writer read the catalog again: epoch_catalog_changed).
TEST_F(EpochCatalogTest, EveryWritePathWaitsForAChangeAndFollowsIt) {
  for (const WritePath& path : kWritePaths) {
    SCOPED_TRACE(path.name);
    HeldBehindAChange h;
    ASSERT_NO_FATAL_FAILURE(h.Run(path, "UPDATE scangate_epochs SET opened_at = opened_at"));  // a change
    auto& [log, store, watch, d, answer] = h;
    const auto r = answer.Within();
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->outcome, Outcome::kInserted);
    EXPECT_EQ(CountRows(watch, {d}), 1);
    EXPECT_TRUE(log->Has("epoch_catalog_changed"));
    // Unchanged catalog: the next key is written without reading it again.
    const auto before = log->Count("epoch_catalog_changed");
    Answer<Result> next;
    const Digest e = RandomDigest();
    ASSERT_TRUE(SubmitBy(store, e, path, next));
    ASSERT_TRUE(next.Within().has_value());
    EXPECT_EQ(log->Count("epoch_catalog_changed"), before);
    store.Shutdown();
  }
}

// A change committed while a writer waits that leaves a catalog this version cannot write under (here: no open epoch,
// as no switch leaves it, but a hand might): the writer writes nothing — the key is answered unavailable, no row — and
// the store stays down while the catalog is so; a new Store refuses to start (permanent StartError). Once the catalog
// is writable again the store heals by itself.
TEST_F(EpochCatalogTest, ACatalogThisVersionCannotWriteUnderStopsEveryWrite) {
  for (const WritePath& path : kWritePaths) {
    SCOPED_TRACE(path.name);
    HeldBehindAChange h;
    ASSERT_NO_FATAL_FAILURE(h.Run(path, "UPDATE scangate_epochs SET state = 'closing' WHERE state = 'open'"));
    auto& [log, store, watch, d, answer] = h;
    const auto r = answer.Within();
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->outcome, Outcome::kUnavailable);
    EXPECT_EQ(CountRows(watch, {d}), 0);
    EXPECT_FALSE(store.up());
    {
      auto o = Options(std::make_shared<EventLog>());
      o.start_timeout = 0ms;
      Store other(o);
      try {
        other.Start();
        ADD_FAILURE() << "a Store started on a database without an open epoch";
      } catch (const StartError& e) {
        EXPECT_TRUE(e.permanent()) << e.what();
        EXPECT_NE(std::string(e.what()).find("no open epoch"), std::string::npos) << e.what();
      }
    }
    Exec(watch, "UPDATE scangate_epochs SET state = 'open' WHERE relation = 'scan_keys'");
    const auto until = std::chrono::steady_clock::now() + kEventually;
    while (!store.up() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(20ms);
    ASSERT_TRUE(store.up()) << "the store did not heal once the catalog was writable again";
    Answer<Result> again;
    ASSERT_TRUE(SubmitBy(store, d, path, again));
    const auto a = again.Within();
    ASSERT_TRUE(a.has_value());
    EXPECT_EQ(a->outcome, Outcome::kInserted);
    EXPECT_EQ(CountRows(watch, {d}), 1);
    store.Shutdown();
  }
}

// The partition function (the operators' path) takes the order too: it waits while a change of the catalog holds it.
TEST_F(EpochCatalogTest, ScangateObserveTakesTheOrder) {
  pqxx::connection change(PgTestUrl()), watch(PgTestUrl());
  const Digest d = RandomDigest();
  std::optional<bool> inserted;
  std::thread caller;
  {
    pqxx::work tx(change);
    tx.exec("SELECT pg_advisory_xact_lock(scangate_epoch_lock_key())");
    caller = std::thread([&] {
      pqxx::connection c(PgTestUrl());
      pqxx::work call(c);
      inserted = call.exec_params1("SELECT inserted FROM scangate_observe(ARRAY[$1::bytea], ARRAY['op'], ARRAY[0::int8], 0)",
                                   HexBytea(d))[0]
                     .as<bool>();
      call.commit();
    });
    EXPECT_TRUE(WriterWaitsForTheOrder(watch)) << "scangate_observe did not wait for the write order";
    EXPECT_EQ(CountRows(watch, {d}), 0);
    tx.commit();
  }
  caller.join();
  EXPECT_EQ(inserted, std::optional<bool>(true));
  EXPECT_EQ(CountRows(watch, {d}), 1);
}

// A database whose schema holds a migration this binary does not embed (a newer scangate's) is refused: by
// ApplyMigrations (nothing applied) and by Store::Start (permanent).
TEST_F(EpochCatalogTest, ASchemaNewerThanThisBinaryIsRefused) {
  pqxx::connection c(PgTestUrl());
  const int future = EmbeddedMigrations().back().version + 1000;
  Exec(c, "INSERT INTO schema_migrations (version, name) VALUES (" + std::to_string(future) + ", 'from_the_future')");
  EXPECT_THROW(ApplyMigrations(c), SchemaTooNew);
  auto o = Options(std::make_shared<EventLog>());
  o.start_timeout = 0ms;
  Store store(o);
  try {
    store.Start();
    ADD_FAILURE() << "a Store started on a schema newer than its binary";
  } catch (const StartError& e) {
    EXPECT_TRUE(e.permanent()) << e.what();
    EXPECT_NE(std::string(e.what()).find(std::to_string(future)), std::string::npos) << e.what();
  }
  Exec(c, "DELETE FROM schema_migrations WHERE version = " + std::to_string(future));
  EXPECT_EQ(ApplyMigrations(c), 0);
}

}  // namespace
}  // namespace scangate::storage
