// Tests sql/019, the epochs' switch (issue 54), in the fixture's PostgreSQL: scangate_epoch_prepare() makes the next
// epoch in scan_keys' exact shape (columns and defaults, constraints, storage parameters, every index, every trigger,
// the follow publication, grants) and is idempotent; scangate_epoch_switch() refuses without one, closes the open
// epoch under its relation name with its indexes renamed along, opens the prepared one under the canonical names,
// records the switch's xid, moves the catalog's generation (an old writer is refused); it waits for a reader of
// scan_keys and gives up at its lock_timeout with nothing changed; and scangate_follow_switched returns exactly the
// closed epoch's rows a snapshot before the switch did not see; the partition function scangate_lookup reads every
// epoch; a scangate writer older than the epochs is refused by sql/019's guard; sql/020's close rewrites an epoch
// compact with its summary, drops closed epochs wholly past the horizon, and merges two into one of their live rows.
#include <gtest/gtest.h>

#include <pqxx/pqxx>
#include <set>
#include <string>
#include <vector>

#include "storage/epochs/catalog.h"
#include "tests/storage/epochs/one_open_epoch.h"
#include "tests/storage/pg_test_db.h"

namespace scangate::storage {
namespace {

class EpochSwitchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(PgTestUrl().empty()) << "SCANGATE_TEST_PG_DIR not set (run through ctest)";
    MigrateOnce();
  }
  // Leaves one open epoch, as the cases start: every other epoch and the upcoming table dropped.
  void TearDown() override { LeaveOneOpenEpoch(PgTestUrl()); }
};

std::set<std::string> Rows(pqxx::connection& c, const std::string& sql) {
  pqxx::nontransaction tx(c);
  std::set<std::string> out;
  for (const auto& row : tx.exec(sql)) {
    std::string line;
    for (const auto& f : row) line += (f.is_null() ? std::string("NULL") : f.as<std::string>()) + "|";
    out.insert(line);
  }
  return out;
}

// A table's shape with its own name written as T: columns (type, NOT NULL, default, storage, compression), CHECK
// constraints, storage parameters, indexes (definition and name), triggers, publications, grants.
std::set<std::string> Shape(pqxx::connection& c, const std::string& table) {
  const std::string rel = "'" + table + "'::regclass";
  std::set<std::string> shape;
  auto add = [&](const std::string& what, const std::string& sql) {
    for (const auto& line : Rows(c, sql)) shape.insert(what + ": " + line);
  };
  add("column", "SELECT a.attnum, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, a.attstorage, "
                "a.attcompression, pg_get_expr(d.adbin, d.adrelid) FROM pg_attribute a LEFT JOIN pg_attrdef d "
                "ON d.adrelid = a.attrelid AND d.adnum = a.attnum WHERE a.attrelid = " + rel +
                    " AND a.attnum > 0 AND NOT a.attisdropped");
  add("constraint", "SELECT contype, replace(conname, '" + table + "', 'T'), pg_get_constraintdef(oid) "
                    "FROM pg_constraint WHERE conrelid = " + rel);
  add("options", "SELECT reloptions, relpersistence, relkind FROM pg_class WHERE oid = " + rel);
  add("index", "SELECT replace(ic.relname, '" + table + "', 'T'), regexp_replace(pg_get_indexdef(i.indexrelid), "
               "'^CREATE (UNIQUE )?INDEX \\S+ ON \\S+ ', 'CREATE \\1INDEX ON T ') FROM pg_index i "
               "JOIN pg_class ic ON ic.oid = i.indexrelid WHERE i.indrelid = " + rel);
  add("trigger", "SELECT regexp_replace(pg_get_triggerdef(oid), ' ON \\S+ ', ' ON T ') FROM pg_trigger "
                 "WHERE tgrelid = " + rel + " AND NOT tgisinternal");
  add("publication", "SELECT pubname, attnames, rowfilter FROM pg_publication_tables WHERE tablename = '" + table +
                         "'");
  add("grant", "SELECT a.grantee::regrole, a.privilege_type, a.is_grantable FROM pg_class c, aclexplode(c.relacl) a "
               "WHERE c.oid = " + rel + " AND a.grantee <> c.relowner");
  return shape;
}

std::string One(pqxx::connection& c, const std::string& sql) {
  pqxx::nontransaction tx(c);
  const auto r = tx.exec1(sql);
  return r[0].is_null() ? "NULL" : r[0].as<std::string>();
}

void InsertInOrder(pqxx::connection& c, const Digest& d) {
  pqxx::work tx(c);
  tx.exec("SELECT scangate_write_order(NULL)");
  tx.exec_params("INSERT INTO scan_keys (digest) VALUES (scangate_stored_digest($1::bytea))", HexBytea(d));
  tx.commit();
}

// Switches with `lock_timeout`; returns the closed epoch's id.
std::int64_t Switch(pqxx::connection& c, const std::string& lock_timeout = "5s") {
  pqxx::work tx(c);
  tx.exec("SET LOCAL lock_timeout = " + tx.quote(lock_timeout));
  const auto id = tx.exec1("SELECT scangate_epoch_switch()")[0].as<std::int64_t>();
  tx.commit();
  return id;
}

// A closed epoch (switched, compacted, closed without a summary) of the rows `rows_sql` inserts into an emptied open
// epoch ("": none); returns its id.
std::string ClosedEpochOf(pqxx::connection& c, const std::string& rows_sql) {
  {
    pqxx::work tx(c);
    tx.exec("SELECT scangate_write_order(NULL)");
    tx.exec("DELETE FROM scan_keys");
    if (!rows_sql.empty()) tx.exec(rows_sql);
    tx.commit();
  }
  One(c, "SELECT scangate_epoch_prepare()");
  const std::string id = std::to_string(Switch(c));
  One(c, "SELECT scangate_epoch_compact(" + id + ")");
  pqxx::work tx(c);
  tx.exec("SELECT scangate_epoch_close(" + id + ", NULL)");
  tx.commit();
  return id;
}

TEST_F(EpochSwitchTest, PrepareMakesTheNextEpochInTheOpenOnesShape) {
  pqxx::connection c(PgTestUrl());
  {  // a grant an operator gave (a read-only role) goes along too
    pqxx::work tx(c);
    tx.exec("DO $$ BEGIN CREATE ROLE scangate_switch_reader; EXCEPTION WHEN duplicate_object THEN NULL; END $$");
    tx.exec("GRANT SELECT ON scan_keys TO scangate_switch_reader");
    tx.commit();
  }
  EXPECT_EQ(One(c, "SELECT scangate_epoch_prepare()"), "t");
  EXPECT_EQ(One(c, "SELECT scangate_epoch_prepare()"), "f") << "prepared twice";
  const auto open = Shape(c, "scan_keys"), upcoming = Shape(c, "scan_keys_upcoming");
  EXPECT_EQ(open, upcoming);
  EXPECT_GE(open.size(), 15u) << "the shape read too little to compare";
  EXPECT_EQ(One(c, "SELECT count(*) FROM scan_keys_upcoming"), "0");
  {
    pqxx::work tx(c);
    tx.exec("REVOKE ALL ON scan_keys FROM scangate_switch_reader");
    tx.exec("REVOKE ALL ON scan_keys_upcoming FROM scangate_switch_reader");
    tx.commit();
  }
}

TEST_F(EpochSwitchTest, SwitchClosesTheOpenEpochAndOpensThePreparedOne) {
  pqxx::connection c(PgTestUrl());
  const Digest before = RandomDigest();
  InsertInOrder(c, before);
  const EpochCatalog old = ReadEpochCatalog(c);
  const auto shape = Shape(c, "scan_keys");
  const auto oid = One(c, "SELECT 'scan_keys'::regclass::oid");
  try {
    Switch(c);
    ADD_FAILURE() << "switched with no upcoming epoch";
  } catch (const pqxx::sql_error& e) {
    EXPECT_EQ(e.sqlstate(), "SGE02") << e.what();
  }
  EXPECT_EQ(ReadEpochCatalog(c).generation, old.generation) << "a refused switch changed the catalog";

  ASSERT_EQ(One(c, "SELECT scangate_epoch_prepare()"), "t");
  const std::int64_t closed_id = Switch(c);
  EXPECT_EQ(closed_id, old.open_id);
  const EpochCatalog now = ReadEpochCatalog(c);
  EXPECT_NE(now.generation, old.generation);
  EXPECT_NE(now.open_id, old.open_id);
  ASSERT_EQ(now.relations.size(), 1u);
  const std::string closed = now.relations[0];
  EXPECT_EQ(closed, One(c, "SELECT scangate_epoch_relation(" + std::to_string(closed_id) + ")"));
  EXPECT_EQ(One(c, "SELECT state || ' ' || (switched_xid IS NOT NULL) || ' ' || (closed_at IS NOT NULL) "
                   "FROM scangate_epochs WHERE id = " + std::to_string(closed_id)),
            "closing true true");
  EXPECT_EQ(One(c, "SELECT '" + closed + "'::regclass::oid"), oid) << "the closed epoch is not the table that was open";
  EXPECT_EQ(One(c, "SELECT count(*) FROM " + closed + " WHERE digest = scangate_stored_digest('" + HexBytea(before) +
                       "'::bytea)"),
            "1");
  EXPECT_EQ(One(c, "SELECT count(*) FROM scan_keys"), "0");
  EXPECT_EQ(One(c, "SELECT to_regclass('scan_keys_upcoming') IS NULL"), "t");
  EXPECT_EQ(Shape(c, "scan_keys"), shape) << "the new open epoch's shape or its index names differ";
  EXPECT_EQ(Shape(c, closed), shape) << "the closed epoch's indexes were not renamed along";
  // A writer of the old catalog is refused; the new catalog writes into the new table.
  {
    pqxx::work tx(c);
    try {
      tx.exec("SELECT scangate_write_order(" + std::to_string(old.generation) + ")");
      ADD_FAILURE() << "a writer of the catalog before the switch was let through";
    } catch (const pqxx::sql_error& e) {
      EXPECT_TRUE(IsEpochCatalogChange(e)) << e.what();
    }
  }
  InsertInOrder(c, RandomDigest());
  EXPECT_EQ(One(c, "SELECT count(*) FROM scan_keys"), "1");
  // The next switch closes that one too: two closing epochs, oldest first.
  ASSERT_EQ(One(c, "SELECT scangate_epoch_prepare()"), "t");
  Switch(c);
  const EpochCatalog third = ReadEpochCatalog(c);
  ASSERT_EQ(third.relations.size(), 2u);
  EXPECT_EQ(third.relations[0], closed);
}

TEST_F(EpochSwitchTest, ASwitchWaitsForAReaderAndGivesUpAtItsLockTimeout) {
  pqxx::connection c(PgTestUrl()), reader(PgTestUrl());
  ASSERT_EQ(One(c, "SELECT scangate_epoch_prepare()"), "t");
  const auto generation = ReadEpochCatalog(c).generation;
  pqxx::work holding(reader);
  holding.exec("SELECT count(*) FROM scan_keys");  // AccessShareLock until its transaction ends
  try {
    Switch(c, "200ms");
    ADD_FAILURE() << "switched under a reader's lock";
  } catch (const pqxx::sql_error& e) {
    EXPECT_EQ(e.sqlstate(), "55P03") << e.what();
  }
  EXPECT_EQ(ReadEpochCatalog(c).generation, generation) << "a switch that gave up changed the catalog";
  EXPECT_EQ(One(c, "SELECT to_regclass('scan_keys_upcoming') IS NOT NULL"), "t");
  holding.commit();
  Switch(c, "200ms");
  EXPECT_NE(ReadEpochCatalog(c).generation, generation);
}

// The poll follower's read of a switched epoch: with a snapshot taken before some of its rows were written, exactly
// those rows (the raw key's first_seen when asked, none for a pack's); with a snapshot that saw the switch, nothing.
TEST_F(EpochSwitchTest, FollowSwitchedReturnsTheRowsASnapshotBeforeTheSwitchMissed) {
  pqxx::connection c(PgTestUrl());
  InsertInOrder(c, RandomDigest());
  const std::string before = One(c, "SELECT pg_current_snapshot()");
  const Digest a = RandomDigest(), b = RandomDigest();
  InsertInOrder(c, a);
  {
    pqxx::work tx(c);
    tx.exec("SELECT scangate_write_order(NULL)");
    tx.exec_params("INSERT INTO scan_keys (digest, lot, expiry) VALUES (scangate_stored_digest($1::bytea), "
                   "scangate_stored_digest($1::bytea), date '2030-01-01')",
                   HexBytea(b));
    tx.commit();
  }
  ASSERT_EQ(One(c, "SELECT scangate_epoch_prepare()"), "t");
  Switch(c);
  InsertInOrder(c, RandomDigest());  // in the new open epoch: not the function's
  const std::string after = One(c, "SELECT pg_current_snapshot()");
  const std::string call = "SELECT " + std::string(kStoredHexByteaSql) +
                           ", first_seen IS NOT NULL FROM scangate_follow_switched($1::pg_snapshot, true, "
                           "(SELECT digest FROM scan_keys LIMIT 0))";
  pqxx::nontransaction tx(c);
  std::set<std::string> got;
  for (const auto& row : tx.exec_params(call, before)) got.insert(row[0].as<std::string>() + row[1].as<std::string>());
  EXPECT_EQ(got, (std::set<std::string>{StoredHexBytea(a) + "t", StoredHexBytea(b) + "f"}));
  EXPECT_EQ(tx.exec_params(call, after).size(), 0u) << "a snapshot that saw the switch read the closed epoch again";
}

// The partition function scangate_lookup (the PL/Proxy partitions' /lookup) reads every epoch: a key in a closed one
// is found there with its own row; recorded again since in the open one, the newer row answers; in none, no row.
TEST_F(EpochSwitchTest, ThePartitionLookupReadsEveryEpoch) {
  pqxx::connection c(PgTestUrl());
  const Digest d = RandomDigest();
  {
    pqxx::work tx(c);
    tx.exec("SELECT scangate_write_order(NULL)");
    tx.exec_params("INSERT INTO scan_keys (digest, seen_by, first_seen) VALUES (scangate_stored_digest($1::bytea), "
                   "'closed', now() - interval '2 hours')",
                   HexBytea(d));
    tx.commit();
  }
  ASSERT_EQ(One(c, "SELECT scangate_epoch_prepare()"), "t");
  Switch(c);
  const std::string lookup = "SELECT source FROM scangate_lookup('" + HexBytea(d) + "'::bytea)";
  EXPECT_EQ(One(c, lookup), "closed");
  {
    pqxx::work tx(c);
    tx.exec("SELECT scangate_write_order(NULL)");
    tx.exec_params("INSERT INTO scan_keys (digest, seen_by) VALUES (scangate_stored_digest($1::bytea), 'open')",
                   HexBytea(d));
    tx.commit();
  }
  EXPECT_EQ(One(c, lookup), "open");
  pqxx::nontransaction tx(c);
  EXPECT_EQ(tx.exec("SELECT * FROM scangate_lookup('" + HexBytea(RandomDigest()) + "'::bytea)").size(), 0u);
}

// sql/020, the close: the compact table holds exactly the closing epoch's rows in the columns closed epochs are read
// by (not commit_xid), its primary key alone, sorted by digest; the swap names it in the catalog with the summary
// and the epoch's bounds, and drops the closing table; run again, compact refuses an epoch that is not closing and
// close does nothing.
TEST_F(EpochSwitchTest, TheCloseRewritesTheEpochCompactWithItsSummary) {
  pqxx::connection c(PgTestUrl());
  {
    pqxx::work tx(c);
    tx.exec("SELECT scangate_write_order(NULL)");
    tx.exec("INSERT INTO scan_keys (digest, seen_by, first_seen) SELECT gen_random_uuid(), 'till-' || g, "
            "now() - g * interval '1 second' FROM generate_series(1, 500) g");
    tx.exec("INSERT INTO scan_keys (digest, lot, expiry, keep_until, request, seen_by) VALUES (gen_random_uuid(), "
            "gen_random_uuid(), date '2031-01-31', timestamptz '2032-01-31', gen_random_uuid(), 'pack')");
    tx.commit();
  }
  ASSERT_EQ(One(c, "SELECT scangate_epoch_prepare()"), "t");
  const std::string id = std::to_string(Switch(c));
  const std::string closing = One(c, "SELECT scangate_epoch_relation(" + id + ")");
  const std::string cols = "first_seen, keep_until, digest, lot, request, expiry, seen_by";
  const std::string rows = One(c, "SELECT count(*) FROM " + closing);  // the earlier cases' rows of scan_keys too
  const std::string compact = One(c, "SELECT scangate_epoch_compact(" + id + ")");
  EXPECT_EQ(compact, One(c, "SELECT scangate_epoch_compact_relation(" + id + ")"));
  EXPECT_EQ(One(c, "SELECT scangate_epoch_compact(" + id + ")"), compact) << "not reused";
  EXPECT_EQ(One(c, "SELECT count(*) FROM ((SELECT " + cols + " FROM " + closing + " EXCEPT ALL SELECT " + cols +
                       " FROM " + compact + ") UNION ALL (SELECT " + cols + " FROM " + compact +
                       " EXCEPT ALL SELECT " + cols + " FROM " + closing + ")) AS d"),
            "0")
      << "the compact table's rows are not the closing epoch's";
  EXPECT_EQ(One(c, "SELECT count(*) FROM " + compact), rows);
  EXPECT_GE(std::stoi(rows), 501);
  EXPECT_EQ(Rows(c, "SELECT pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = '" + compact + "'::regclass"),
            (std::set<std::string>{"CREATE UNIQUE INDEX " + compact + "_pkey ON public." + compact +
                                   " USING btree (digest) WITH (fillfactor='100')|"}));
  EXPECT_EQ(One(c, "SELECT count(*) FROM pg_attribute WHERE attrelid = '" + compact + "'::regclass AND attname = "
                   "'commit_xid'"),
            "0");
  EXPECT_EQ(One(c, "SELECT bool_and(a.digest <= b.digest) FROM (SELECT digest, ctid FROM " + compact +
                       ") a JOIN (SELECT digest, ctid FROM " + compact + ") b ON a.ctid < b.ctid"),
            "t")
      << "not written in digest order";
  {
    pqxx::work tx(c);
    const auto closed =
        tx.exec_params1("SELECT scangate_epoch_close($1, $2)", std::stoll(id), pqxx::binarystring("summary", 7));
    EXPECT_EQ(closed[0].as<std::string>(), "t");
    tx.commit();
  }
  EXPECT_EQ(One(c, "SELECT relation || ' ' || state || ' ' || keys || ' ' || encode(summary, 'escape') || ' ' || "
                   "(max_keep_until = timestamptz '2032-01-31') FROM scangate_epochs WHERE id = " + id),
            compact + " closed " + rows + " summary true");
  EXPECT_EQ(One(c, "SELECT to_regclass('" + closing + "') IS NULL"), "t") << "the closing table was left behind";
  {
    pqxx::work tx(c);
    EXPECT_EQ(tx.exec_params1("SELECT scangate_epoch_close($1, NULL)", std::stoll(id))[0].as<std::string>(), "f");
  }
  try {
    One(c, "SELECT scangate_epoch_compact(" + id + ")");
    ADD_FAILURE() << "compacted an epoch that is not closing";
  } catch (const pqxx::sql_error& e) {
    EXPECT_EQ(e.sqlstate(), "SGE02") << e.what();
  }
}

// sql/020's expiry by dropping: a closed epoch whose every row is past the horizon is dropped (table and catalog row),
// one with a row inside it or pinned past it is kept, an empty one goes whatever the horizon; nothing is dropped
// while now() is past the caller's clock guard, nor with the horizon off but for empty epochs.
TEST_F(EpochSwitchTest, ClosedEpochsWhollyPastTheHorizonAreDropped) {
  pqxx::connection c(PgTestUrl());
  const std::string old = ClosedEpochOf(
      c, "INSERT INTO scan_keys (digest, first_seen) SELECT gen_random_uuid(), now() - interval '3 hours' - g * "
         "interval '1 second' FROM generate_series(1, 50) g");
  const std::string young = ClosedEpochOf(
      c, "INSERT INTO scan_keys (digest, first_seen) VALUES (gen_random_uuid(), now() - interval '3 hours'), "
         "(gen_random_uuid(), now() - interval '30 minutes')");
  const std::string pinned = ClosedEpochOf(
      c, "INSERT INTO scan_keys (digest, first_seen, keep_until) VALUES (gen_random_uuid(), now() - interval "
         "'3 hours', now() + interval '1 day')");
  const std::string empty = ClosedEpochOf(c, "");
  const std::string hour_us = "3600000000";
  auto drop = [&](const std::string& retention_us, const std::string& guard) {
    pqxx::work tx(c);
    std::set<std::string> ids;
    for (const auto& row : tx.exec("SELECT epoch, keys FROM scangate_epoch_drop_expired(" + retention_us + ", " +
                                   guard + ")")) {
      ids.insert(row[0].as<std::string>() + ":" + row[1].as<std::string>());
    }
    tx.commit();
    return ids;
  };
  // The guard passed (a forward step not recorded yet): nothing.
  EXPECT_TRUE(drop(hour_us, "(extract(epoch FROM now()) * 1000000)::int8 - 1000000").empty());
  // The horizon off: only the empty epoch.
  EXPECT_EQ(drop("0", "NULL"), (std::set<std::string>{empty + ":0"}));
  // A horizon of an hour: the old epoch; the young and the pinned ones stay.
  EXPECT_EQ(drop(hour_us, "NULL"), (std::set<std::string>{old + ":50"}));
  EXPECT_EQ(One(c, "SELECT string_agg(id::text, ' ' ORDER BY opened_at) FROM scangate_epochs WHERE state = 'closed'"),
            young + " " + pinned);
  EXPECT_EQ(One(c, "SELECT to_regclass(scangate_epoch_compact_relation(" + old + ")) IS NULL"), "t");
  // Nothing more: the young epoch's newest row is inside the horizon, the pinned one's keep_until a day ahead.
  EXPECT_TRUE(drop(hour_us, "NULL").empty());
}

// sql/020's merge: two closed epochs become one of their rows that may still be live — a row past its horizon for
// certain is left out, a pinned one and a young one kept, a digest held by both kept once (its newest row) — named in
// the catalog as one closed epoch opened when the older opened, the two dropped; a swap of epochs no longer closed
// does nothing; a merged table no swap named (an interrupted merge) is dropped by the next merge.
TEST_F(EpochSwitchTest, AMergeKeepsOnlyTheRowsThatMayBeLive) {
  pqxx::connection c(PgTestUrl());
  const std::string both = "'00000000-0000-0000-0000-0000000000b0'::uuid";
  const std::string older = ClosedEpochOf(
      c, "INSERT INTO scan_keys (digest, first_seen, keep_until, seen_by) VALUES "
         "('00000000-0000-0000-0000-0000000000a1', now() - interval '3 hours', NULL, 'expired'), "
         "('00000000-0000-0000-0000-0000000000a2', now() - interval '3 hours', now() + interval '400 days', 'pinned'), "
         "('00000000-0000-0000-0000-0000000000a3', now() - interval '10 minutes', NULL, 'young'), "
         "(" + both + ", now() - interval '2 hours', NULL, 'both-old')");
  const std::string newer = ClosedEpochOf(
      c, "INSERT INTO scan_keys (digest, first_seen, seen_by) VALUES ('00000000-0000-0000-0000-0000000000c1', now(), "
         "'newer'), (" + both + ", now() - interval '5 minutes', 'both-new')");
  const std::string opened = One(c, "SELECT opened_at FROM scangate_epochs WHERE id = " + older);
  const std::string ids = "'{" + older + "," + newer + "}'::int8[]";
  const std::string left = One(c, "SELECT scangate_epoch_merge_build(" + ids + ", 3600000000)");  // interrupted
  const std::string target = One(c, "SELECT scangate_epoch_merge_build(" + ids + ", 3600000000)");
  EXPECT_EQ(One(c, "SELECT to_regclass('" + left + "') IS NULL"), "t") << "an interrupted merge's table was left";
  EXPECT_EQ(Rows(c, "SELECT seen_by FROM " + target),
            (std::set<std::string>{"pinned|", "young|", "newer|", "both-new|"}));
  {
    pqxx::work tx(c);
    EXPECT_EQ(tx.exec1("SELECT scangate_epoch_merge_swap('" + target + "', " + ids + ", NULL)")[0].as<std::string>(),
              "t");
    tx.commit();
  }
  EXPECT_EQ(One(c, "SELECT count(*) || ' ' || min(keys) || ' ' || (min(opened_at) = '" + opened + "') || ' ' || "
                   "min(relation) FROM scangate_epochs WHERE state = 'closed'"),
            "1 4 true " + target);
  EXPECT_EQ(One(c, "SELECT count(*) FROM pg_class WHERE relname IN (scangate_epoch_compact_relation(" + older +
                       "), scangate_epoch_compact_relation(" + newer + "))"),
            "0")
      << "a merged epoch's table was left";
  {
    pqxx::work tx(c);
    EXPECT_EQ(tx.exec1("SELECT scangate_epoch_merge_swap('" + target + "', " + ids + ", NULL)")[0].as<std::string>(),
              "f");
  }
}

// sql/019's guard: a scangate writer (a session with sql/014's scangate.digest_scheme) that does not say it checks the
// closed epochs — a version older than them — is refused (55000, nothing inserted); one that says so (the writers'
// kEpochWriterOption), and a session that is no scangate writer (an operator's psql), insert.
TEST_F(EpochSwitchTest, AScangateWriterThatDoesNotCheckTheEpochsIsRefused) {
  pqxx::connection c(PgTestUrl());
  ASSERT_EQ(One(c, "SELECT count(*) FROM scangate_digest_scheme"), "0") << "sql/014's fence would refuse first";
  const Digest old_writer = RandomDigest(), writer = RandomDigest(), operator_psql = RandomDigest();
  auto insert = [&](const std::string& settings, const Digest& d) {
    pqxx::work tx(c);
    if (!settings.empty()) tx.exec(settings);
    tx.exec("SELECT scangate_write_order(NULL)");
    tx.exec_params("INSERT INTO scan_keys (digest) VALUES (scangate_stored_digest($1::bytea))", HexBytea(d));
    tx.commit();
  };
  try {
    insert("SET LOCAL scangate.digest_scheme = 'ab12'", old_writer);
    ADD_FAILURE() << "a writer that does not check the closed epochs inserted";
  } catch (const pqxx::sql_error& e) {
    EXPECT_EQ(e.sqlstate(), "55000") << e.what();
    EXPECT_NE(std::string(e.what()).find("upgrade"), std::string::npos) << e.what();
  }
  const std::string option = kEpochWriterOption;  // "-c scangate.epochs=checked"
  const std::string value = option.substr(option.find('=') + 1);
  insert("SET LOCAL scangate.digest_scheme = 'ab12'; SET LOCAL scangate.epochs = '" + value + "'", writer);
  insert("", operator_psql);
  auto stored = [](const Digest& d) { return "scangate_stored_digest('" + HexBytea(d) + "'::bytea)"; };
  EXPECT_EQ(One(c, "SELECT count(*) FROM scan_keys WHERE digest IN (" + stored(old_writer) + ", " + stored(writer) +
                       ", " + stored(operator_psql) + ")"),
            "2");
}

}  // namespace
}  // namespace scangate::storage
