// Tests sql/014's fence with storage/scheme/scheme_record.h against the fixture's PostgreSQL (issue 55): a writer
// connection carrying the database's scheme inserts; a rotation waits for a writing transaction that passed the
// guard until it commits (so the row it wrote is visible to every read after the rotation); after the rotation the
// old scheme's writer is refused with 55000 before any row, the new one inserts; a session without the setting is
// not checked. And the start check applied to the database: record, refuse, rotate, end.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include <pqxx/pqxx>

#include "storage/scheme/scheme_record.h"
#include "tests/storage/pg_test_db.h"

namespace scangate::storage {
namespace {

std::string WriterUrl(const DigestScheme& s) {
  return PgTestUrl() + (PgTestUrl().find('?') == std::string::npos ? "?" : "&") + "options=" +
         [&] {  // URL-encoded "-c scangate.digest_scheme=<hex>"
           std::string o = SchemeOption(s);
           std::string out;
           for (char c : o) out += c == ' ' ? std::string("%20") : c == '=' ? std::string("%3D") : std::string(1, c);
           return out;
         }();
}

void Insert(pqxx::connection& c, const Digest& d) {
  pqxx::work tx(c);
  tx.exec_params("INSERT INTO scan_keys (digest) VALUES (scangate_stored_digest($1))",
                 pqxx::binarystring(d.data(), d.size()));
  tx.commit();
}

void Forget() {
  pqxx::connection c(PgTestUrl());
  pqxx::work tx(c);
  tx.exec("DELETE FROM scangate_digest_scheme");
  tx.commit();
}

TEST(SchemeFence, StartCheckRecordsRefusesRotatesAndEnds) {
  MigrateOnce();
  Forget();
  const DigestScheme s1 = SchemeOf(Digester::HmacSha256("fence-s1"), "raw");
  const DigestScheme s2 = SchemeOf(Digester::HmacSha256("fence-s2"), "raw");
  pqxx::connection c(PgTestUrl());
  EXPECT_EQ(CheckDigestScheme(c, LocalScheme{s1, std::nullopt}, std::chrono::seconds(3600)).decision.action,
            SchemeAction::kRecord);
  EXPECT_EQ(CheckDigestScheme(c, LocalScheme{s1, std::nullopt}, std::chrono::seconds(3600)).decision.action,
            SchemeAction::kMatch);
  const SchemeCheck refused = CheckDigestScheme(c, LocalScheme{s2, std::nullopt}, std::chrono::seconds(3600));
  EXPECT_EQ(refused.decision.action, SchemeAction::kRefuse);
  EXPECT_EQ(refused.decision.component, "secret");
  // A rotation with a horizon of one second: the previous secret is needed for it (no pinned row here).
  const SchemeCheck rotated = CheckDigestScheme(c, LocalScheme{s2, s1}, std::chrono::seconds(1));
  EXPECT_EQ(rotated.decision.action, SchemeAction::kStartRotation);
  ASSERT_TRUE(rotated.recorded && rotated.recorded->previous);
  EXPECT_EQ(rotated.recorded->current.fingerprint, s2.fingerprint);
  EXPECT_EQ(rotated.recorded->previous->fingerprint, s1.fingerprint);
  EXPECT_GT(rotated.recorded->previous_needed_until_us, rotated.recorded->rotation_started_us);
  EXPECT_EQ(CheckDigestScheme(c, LocalScheme{s2, std::nullopt}, std::chrono::seconds(1)).decision.component,
            "previous_secret_missing");
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(CheckDigestScheme(c, LocalScheme{s2, std::nullopt}, std::chrono::seconds(1)).decision.action,
            SchemeAction::kEndRotation);
  pqxx::work tx(c);
  const auto row = ReadDigestScheme(tx);
  ASSERT_TRUE(row);
  EXPECT_FALSE(row->previous);
}

TEST(SchemeFence, RotationWaitsForAWriterThenRefusesTheOldScheme) {
  MigrateOnce();
  Forget();
  const DigestScheme s1 = SchemeOf(Digester::HmacSha256("fence-w1"), "raw");
  const DigestScheme s2 = SchemeOf(Digester::HmacSha256("fence-w2"), "raw");
  pqxx::connection checker(PgTestUrl());
  ASSERT_EQ(CheckDigestScheme(checker, LocalScheme{s1, std::nullopt}, std::chrono::seconds(3600)).decision.action,
            SchemeAction::kRecord);
  pqxx::connection old_writer(WriterUrl(s1));
  pqxx::connection new_writer(WriterUrl(s2));
  pqxx::connection unchecked(PgTestUrl());
  Insert(old_writer, RandomDigest());  // its scheme is the database's

  // A writing transaction of the old scheme that passed the guard, not committed yet.
  const Digest in_flight = RandomDigest();
  pqxx::work open_tx(old_writer);
  open_tx.exec_params("INSERT INTO scan_keys (digest) VALUES (scangate_stored_digest($1))",
                      pqxx::binarystring(in_flight.data(), in_flight.size()));
  auto rotation = std::async(std::launch::async, [&] {
    pqxx::connection c(PgTestUrl());
    return CheckDigestScheme(c, LocalScheme{s2, s1}, std::chrono::seconds(3600));
  });
  EXPECT_EQ(rotation.wait_for(std::chrono::milliseconds(1500)), std::future_status::timeout)
      << "the rotation did not wait for the old scheme's writing transaction";
  open_tx.commit();
  ASSERT_EQ(rotation.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  EXPECT_EQ(rotation.get().decision.action, SchemeAction::kStartRotation);
  {  // the row the old writer committed before the rotation is visible to every read after it
    pqxx::work tx(checker);
    EXPECT_EQ(tx.exec_params("SELECT count(*) FROM scan_keys WHERE digest = scangate_stored_digest($1)",
                             pqxx::binarystring(in_flight.data(), in_flight.size()))[0][0]
                  .as<int>(),
              1);
  }
  // The old scheme is refused before any row; the new one and an unchecked session insert.
  try {
    Insert(old_writer, RandomDigest());
    ADD_FAILURE() << "the old scheme's writer inserted after the rotation";
  } catch (const pqxx::sql_error& e) {
    EXPECT_EQ(e.sqlstate(), "55000") << e.what();
    EXPECT_NE(std::string(e.what()).find("digest scheme fence"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(Insert(new_writer, RandomDigest()));
  EXPECT_NO_THROW(Insert(unchecked, RandomDigest()));
  Forget();
}

}  // namespace
}  // namespace scangate::storage
