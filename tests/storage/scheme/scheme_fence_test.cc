// Tests sql/014's fence with storage/scheme/scheme_record.h against the fixture's PostgreSQL (issue 55): a writer
// connection carrying the database's scheme inserts; a rotation waits for a writing transaction that passed the
// guard until it commits (so the row it wrote is visible to every read after the rotation); after the rotation the
// old scheme's writer is refused with 55000 before any row, the new one inserts; a session without the setting is
// not checked. And the start check applied to the database: record, refuse, rotate, end; the end of a rotation by
// PostgreSQL's clock less the steps recorded after its start (sql/017), as every row's horizon.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <future>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include <pqxx/pqxx>

#include "storage/epochs/catalog.h"
#include "storage/scheme/scheme_record.h"
#include "tests/storage/epochs/hand_closed_epoch.h"
#include "tests/storage/pg_test_db.h"

namespace scangate::storage {
namespace {

std::string WriterUrl(const DigestScheme& s) {
  return PgTestUrl() + (PgTestUrl().find('?') == std::string::npos ? "?" : "&") + "options=" +
         [&] {  // URL-encoded "-c scangate.digest_scheme=<hex> -c scangate.epochs=checked", as the Store's writers
           std::string o = SchemeOption(s) + " " + kEpochWriterOption;
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
  // The transaction writes on while the rotation waits (it holds the shared lock): a key first seen now, after the
  // rotation's transaction began, is one the previous secret must keep found for a whole horizon.
  const Digest late = RandomDigest();
  open_tx.exec_params(
      "INSERT INTO scan_keys (digest, first_seen) VALUES (scangate_stored_digest($1), clock_timestamp())",
      pqxx::binarystring(late.data(), late.size()));
  open_tx.commit();
  ASSERT_EQ(rotation.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  const SchemeCheck rotated = rotation.get();
  EXPECT_EQ(rotated.decision.action, SchemeAction::kStartRotation);
  ASSERT_TRUE(rotated.recorded && rotated.recorded->previous);
  {  // the rotation starts after every writing transaction of the previous secret ended, so after its rows' first_seen
    pqxx::work tx(checker);
    const auto late_us = tx.exec_params("SELECT (extract(epoch FROM first_seen) * 1000000)::int8 FROM scan_keys"
                                        " WHERE digest = scangate_stored_digest($1)",
                                        pqxx::binarystring(late.data(), late.size()))[0][0]
                             .as<std::int64_t>();
    EXPECT_GE(rotated.recorded->rotation_started_us, late_us);
    EXPECT_GE(rotated.recorded->previous_needed_until_us, late_us + std::int64_t{3600} * 1'000'000);
  }
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

void ExecSql(const std::string& sql) {
  pqxx::connection c(PgTestUrl());
  pqxx::nontransaction(c).exec0(sql);
}

RecordedScheme ReadRecorded() {
  pqxx::connection c(PgTestUrl());
  pqxx::work tx(c);
  const std::optional<RecordedScheme> r = ReadDigestScheme(tx);
  if (!r) throw std::runtime_error("no scheme recorded");
  return *r;
}

// A step of PostgreSQL's clock of `step_us` (negative: back) for clock epoch `epoch`, dividing the rows at
// `before_us`, recorded as an instance's clock reader records it (sql/017).
void RecordStep(std::int64_t epoch, std::int64_t step_us, std::int64_t before_us) {
  pqxx::connection c(PgTestUrl());
  pqxx::nontransaction(c).exec_params("SELECT scangate_clock_record_step($1::int8, $2::int8, $3::int8, $4::int8)",
                                      epoch - 1, epoch, step_us, before_us);
}

constexpr std::int64_t kMinuteUs = 60'000'000;

// A pinned row in a closed epoch (sql/018) keeps the previous secret as one in the open epoch does: the rotation's
// bound is the latest keep_until of every epoch.
TEST(SchemeFence, APinnedRowOfAClosedEpochKeepsThePreviousSecret) {
  MigrateOnce();
  Forget();
  ExecSql("DELETE FROM scangate_clock_steps");
  const DigestScheme s1 = SchemeOf(Digester::HmacSha256("closed-pins-s1"), "raw");
  const DigestScheme s2 = SchemeOf(Digester::HmacSha256("closed-pins-s2"), "raw");
  pqxx::connection c(PgTestUrl());
  ASSERT_EQ(CheckDigestScheme(c, LocalScheme{s1, std::nullopt}, std::chrono::hours(1)).decision.action,
            SchemeAction::kRecord);
  HandClosedEpoch closed(Unique("scan_keys_e_pins"));
  closed.Add(RandomDigest(), std::chrono::hours(2), std::chrono::hours(30));
  closed.Close(false);
  std::int64_t keep_until_us = 0;
  {
    pqxx::work tx(c);
    keep_until_us = tx.exec1("SELECT (extract(epoch FROM max(keep_until)) * 1000000)::int8 FROM " + closed.name())[0]
                        .as<std::int64_t>();
  }
  const SchemeCheck rotated = CheckDigestScheme(c, LocalScheme{s2, s1}, std::chrono::hours(1));
  ASSERT_EQ(rotated.decision.action, SchemeAction::kStartRotation);
  ASSERT_TRUE(rotated.recorded && rotated.recorded->previous);
  EXPECT_EQ(rotated.recorded->previous_needed_until_us, keep_until_us) << "the closed epoch's pin was not counted";
  Forget();
}

// A pinned row (a GS1 pack's keep_until) first seen before a forward step that came before the rotation is expired
// only when keep_until < now() - scangate_clock_ahead(first_seen) (sql/017): the previous secret is needed until
// its keep_until plus that step, and every step recorded after the rotation's start moves that as well.
TEST(SchemeFence, APinnedRowKeepsThePreviousSecretByTheStepsAfterIt) {
  MigrateOnce();
  Forget();
  ExecSql("DELETE FROM scangate_clock_steps");
  const DigestScheme s1 = SchemeOf(Digester::HmacSha256("pins-s1"), "raw");
  const DigestScheme s2 = SchemeOf(Digester::HmacSha256("pins-s2"), "raw");
  pqxx::connection c(PgTestUrl());
  ASSERT_EQ(CheckDigestScheme(c, LocalScheme{s1, std::nullopt}, std::chrono::hours(1)).decision.action,
            SchemeAction::kRecord);
  const Digest pinned = RandomDigest();
  std::int64_t keep_until_us = 0, step_before_us = 0;
  {
    pqxx::work tx(c);
    const pqxx::row r = tx.exec_params1(
        "INSERT INTO scan_keys (digest, first_seen, keep_until)"
        " VALUES (scangate_stored_digest($1), now() - interval '2 hours', now() + interval '2 hours')"
        " RETURNING (extract(epoch FROM keep_until) * 1000000)::int8,"
        "           (extract(epoch FROM now() - interval '1 hour') * 1000000)::int8",
        pqxx::binarystring(pinned.data(), pinned.size()));
    keep_until_us = r[0].as<std::int64_t>();
    step_before_us = r[1].as<std::int64_t>();
    tx.commit();
  }
  RecordStep(1, 5 * kMinuteUs, step_before_us);  // an hour ago: after the row's first_seen, before the rotation
  const SchemeCheck rotated = CheckDigestScheme(c, LocalScheme{s2, s1}, std::chrono::hours(1));
  ASSERT_EQ(rotated.decision.action, SchemeAction::kStartRotation);
  ASSERT_TRUE(rotated.recorded && rotated.recorded->previous);
  EXPECT_EQ(rotated.recorded->previous_needed_until_us, keep_until_us + 5 * kMinuteUs);
  RecordStep(2, 3 * kMinuteUs, rotated.recorded->rotation_started_us + 1);  // after the start
  EXPECT_EQ(ReadRecorded().previous_needed_until_us, keep_until_us + 8 * kMinuteUs);
  {
    pqxx::work tx(c);
    tx.exec_params0("DELETE FROM scan_keys WHERE digest = scangate_stored_digest($1)",
                    pqxx::binarystring(pinned.data(), pinned.size()));
    tx.commit();
  }
  ExecSql("DELETE FROM scangate_clock_steps");
  Forget();
}

// The previous secret is needed while a row recorded under it is inside the horizon, and a row first seen at f is
// expired only when f + R + scangate_clock_ahead(f) < now() (sql/017): every row under the previous secret was first
// seen at or before the rotation's start, so the steps recorded after the start move the end of the rotation by as
// much — forward later, back earlier — and a step before the start does not.
TEST(SchemeFence, ThePreviousSecretIsNeededLongerByTheStepsAfterTheRotation) {
  MigrateOnce();
  Forget();
  ExecSql("DELETE FROM scangate_clock_steps");
  const DigestScheme s1 = SchemeOf(Digester::HmacSha256("steps-s1"), "raw");
  const DigestScheme s2 = SchemeOf(Digester::HmacSha256("steps-s2"), "raw");
  pqxx::connection c(PgTestUrl());
  ASSERT_EQ(CheckDigestScheme(c, LocalScheme{s1, std::nullopt}, std::chrono::hours(1)).decision.action,
            SchemeAction::kRecord);
  const SchemeCheck rotated = CheckDigestScheme(c, LocalScheme{s2, s1}, std::chrono::hours(1));
  ASSERT_EQ(rotated.decision.action, SchemeAction::kStartRotation);
  ASSERT_TRUE(rotated.recorded && rotated.recorded->previous);
  const std::int64_t started = rotated.recorded->rotation_started_us;
  const std::int64_t needed = rotated.recorded->previous_needed_until_us;
  EXPECT_EQ(needed, started + 60 * kMinuteUs);

  RecordStep(1, 5 * kMinuteUs, started - kMinuteUs);  // before the rotation: already in its start's reading
  EXPECT_EQ(ReadRecorded().previous_needed_until_us, needed);
  RecordStep(2, 7 * kMinuteUs, started + kMinuteUs);  // after it: 7 minutes more
  EXPECT_EQ(ReadRecorded().previous_needed_until_us, needed + 7 * kMinuteUs);
  RecordStep(3, -2 * kMinuteUs, started + 2 * kMinuteUs);  // and back: 2 minutes less
  EXPECT_EQ(ReadRecorded().previous_needed_until_us, needed + 5 * kMinuteUs);

  // The start check ends the rotation by the same rule: the recorded horizon passed a minute ago by PostgreSQL's
  // clock, but the clock stepped 5 minutes forward after the rotation's start, so its keys are 4 minutes inside it.
  ExecSql("DELETE FROM scangate_clock_steps");
  ExecSql("UPDATE scangate_digest_scheme SET rotation_started_at = now() - interval '61 minutes',"
          " previous_needed_until = now() - interval '1 minute'");
  const std::int64_t restarted = ReadRecorded().rotation_started_us;
  RecordStep(1, 5 * kMinuteUs, restarted + 30 * kMinuteUs);
  const SchemeCheck early = CheckDigestScheme(c, LocalScheme{s2, std::nullopt}, std::chrono::hours(1));
  EXPECT_EQ(early.decision.action, SchemeAction::kRefuse);
  EXPECT_EQ(early.decision.component, "previous_secret_missing") << early.decision.detail;
  ASSERT_TRUE(early.recorded && early.recorded->previous) << "the rotation ended inside the horizon";
  EXPECT_EQ(early.recorded->previous_needed_until_us - restarted, 65 * kMinuteUs);
  // Past the horizon and the step: it ends.
  ExecSql("UPDATE scangate_digest_scheme SET rotation_started_at = rotation_started_at - interval '5 minutes',"
          " previous_needed_until = previous_needed_until - interval '5 minutes'");
  EXPECT_EQ(CheckDigestScheme(c, LocalScheme{s2, std::nullopt}, std::chrono::hours(1)).decision.action,
            SchemeAction::kEndRotation);
  ExecSql("DELETE FROM scangate_clock_steps");
  Forget();
}

}  // namespace
}  // namespace scangate::storage
