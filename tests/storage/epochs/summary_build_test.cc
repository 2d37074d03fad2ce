// storage/epochs/summary_build.h against the throwaway PostgreSQL of fixture "pg": a summary built from a relation
// holds every digest in it (read back by a plain SELECT, not the COPY under test) at the 0.1 % target; its bytes
// survive a bytea column, and a byte changed there no longer parses; names that are not plain and relations that are
// not there are refused, leaving the connection usable; an empty relation gives an empty summary.
#include "storage/epochs/summary_build.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "storage/pg/libpq_handles.h"
#include "tests/core/counter_digest.h"
#include "tests/storage/pg_test_db.h"

namespace scangate::storage {
namespace {

PgConnPtr Connect() {
  PgConnPtr c(PQconnectdb(PgTestUrl().c_str()));
  DropNotices(c.get());
  if (!c || PQstatus(c.get()) != CONNECTION_OK) throw std::runtime_error("no connection to the fixture's database");
  return c;
}

PgResultPtr Exec(PGconn* c, const std::string& sql) {
  PgResultPtr r(PQexec(c, sql.c_str()));
  const auto st = PQresultStatus(r.get());
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) throw std::runtime_error(sql + ": " + PQerrorMessage(c));
  return r;
}

std::vector<Digest> AllDigests(PGconn* c, const std::string& table) {
  // The stored form as 64 hex digits (the 16 bytes, zeros after them: core/digest.h StoredDigest).
  PgResultPtr r = Exec(c, "SELECT rpad(encode(uuid_send(digest), 'hex'), 64, '0') FROM " + table);
  std::vector<Digest> out;
  for (int i = 0; i < PQntuples(r.get()); ++i) {
    const auto d = DigestFromHex(PQgetvalue(r.get(), i, 0));
    if (!d) throw std::runtime_error("not a digest's hex");
    out.push_back(*d);
  }
  return out;
}

// An epoch's table of `n` random digests, as the layout keeps them (uuid primary key).
void MakeEpoch(PGconn* c, const std::string& table, int n) {
  Exec(c, "DROP TABLE IF EXISTS " + table);
  Exec(c, "CREATE TABLE " + table + " (first_seen timestamptz NOT NULL DEFAULT now(), digest uuid PRIMARY KEY)");
  Exec(c, "INSERT INTO " + table + " (digest) SELECT gen_random_uuid() FROM generate_series(1, " +
              std::to_string(n) + ")");
}

TEST(EpochSummaryBuild, HoldsEveryDigestOfTheRelation) {
  PgConnPtr c = Connect();
  constexpr int kRows = 100'000;
  MakeEpoch(c.get(), "summary_build_epoch", kRows);
  const EpochSummary s = BuildEpochSummary(c.get(), "summary_build_epoch");
  EXPECT_EQ(s.keys(), static_cast<std::uint64_t>(kRows));
  EXPECT_EQ(s.lines(), EpochSummary::GeometryFor(kRows).lines) << "sized for exactly the rows read";
  const std::vector<Digest> rows = AllDigests(c.get(), "summary_build_epoch");
  ASSERT_EQ(rows.size(), static_cast<std::size_t>(kRows));
  std::uint64_t missed = 0;
  for (const Digest& d : rows) missed += !s.MayContain(d);
  EXPECT_EQ(missed, 0u) << "a false negative: a key in this epoch would be new a second time";
  // Absent digests: the 0.1 % target, 3 binomial sigmas for the sample.
  constexpr std::uint64_t kQueries = 1'000'000;
  std::uint64_t fp = 0;
  for (std::uint64_t i = 0; i < kQueries; ++i) fp += s.MayContain(test_support::CounterDigest(i, 7));
  EXPECT_LE(static_cast<double>(fp) / kQueries, 0.001 + 3 * std::sqrt(0.001 * 0.999 / kQueries));
  EXPECT_GT(fp, 0u);
}

// The bytes go into PostgreSQL as a bytea (binary parameter, STORAGE EXTERNAL: random bits do not compress) and come
// back whole; a byte changed in the database makes them unparseable, never a summary with a bit lost.
TEST(EpochSummaryBuild, SurvivesAByteaAndRefusesOneChanged) {
  PgConnPtr c = Connect();
  MakeEpoch(c.get(), "summary_build_stored", 20'000);
  const std::string bytes = BuildEpochSummary(c.get(), "summary_build_stored").Serialize();
  Exec(c.get(), "DROP TABLE IF EXISTS summary_build_bytes");
  Exec(c.get(), "CREATE TABLE summary_build_bytes (id int PRIMARY KEY, summary bytea NOT NULL)");
  Exec(c.get(), "ALTER TABLE summary_build_bytes ALTER COLUMN summary SET STORAGE EXTERNAL");
  const char* values[1] = {bytes.data()};
  const int lengths[1] = {static_cast<int>(bytes.size())};
  const int formats[1] = {1};
  PgResultPtr ins(PQexecParams(c.get(), "INSERT INTO summary_build_bytes VALUES (1, $1)", 1, nullptr, values, lengths,
                               formats, 0));
  ASSERT_EQ(PQresultStatus(ins.get()), PGRES_COMMAND_OK) << PQerrorMessage(c.get());
  const auto read_back = [&] {
    PgResultPtr r(PQexecParams(c.get(), "SELECT summary FROM summary_build_bytes WHERE id = 1", 0, nullptr, nullptr,
                               nullptr, nullptr, 1));
    EXPECT_EQ(PQresultStatus(r.get()), PGRES_TUPLES_OK) << PQerrorMessage(c.get());
    return std::string(PQgetvalue(r.get(), 0, 0), static_cast<std::size_t>(PQgetlength(r.get(), 0, 0)));
  };
  const std::string back = read_back();
  EXPECT_EQ(back, bytes);
  const auto parsed = EpochSummary::Parse(back);
  ASSERT_TRUE(parsed.has_value());
  std::uint64_t missed = 0;
  for (const Digest& d : AllDigests(c.get(), "summary_build_stored")) missed += !parsed->MayContain(d);
  EXPECT_EQ(missed, 0u);

  Exec(c.get(), "UPDATE summary_build_bytes SET summary = set_byte(summary, 100, get_byte(summary, 100) # 1)");
  std::string why;
  EXPECT_FALSE(EpochSummary::Parse(read_back(), &why).has_value());
  EXPECT_NE(why.find("SHA-256"), std::string::npos) << why;
}

TEST(EpochSummaryBuild, RefusesWhatIsNotAPlainExistingRelation) {
  EXPECT_TRUE(IsPlainIdentifier("scan_keys_e_0a1b"));
  EXPECT_FALSE(IsPlainIdentifier(""));
  EXPECT_FALSE(IsPlainIdentifier("1epoch"));
  EXPECT_FALSE(IsPlainIdentifier("Epoch"));
  EXPECT_FALSE(IsPlainIdentifier("e; DROP TABLE e"));
  EXPECT_FALSE(IsPlainIdentifier("public.e"));
  EXPECT_FALSE(IsPlainIdentifier(std::string(64, 'e')));
  EXPECT_TRUE(IsPlainIdentifier(std::string(63, 'e')));

  PgConnPtr c = Connect();
  EXPECT_THROW(BuildEpochSummary(c.get(), "e; DROP TABLE e"), std::invalid_argument);
  Exec(c.get(), "DROP TABLE IF EXISTS summary_build_missing");
  try {
    BuildEpochSummary(c.get(), "summary_build_missing");
    ADD_FAILURE() << "no error for a missing relation";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("BuildEpochSummary: "), std::string::npos) << e.what();
  }
  // A digest column holding a NULL: the stream is refused whole, not summarised without the row.
  Exec(c.get(), "DROP TABLE IF EXISTS summary_build_null");
  Exec(c.get(), "CREATE TABLE summary_build_null (digest uuid)");
  Exec(c.get(), "INSERT INTO summary_build_null VALUES (gen_random_uuid()), (NULL)");
  EXPECT_THROW(BuildEpochSummary(c.get(), "summary_build_null"), std::runtime_error);
  // The connection still serves (a failed COPY statement leaves it idle).
  PQclear(PQexec(c.get(), "ROLLBACK"));
  EXPECT_NO_THROW(Exec(c.get(), "SELECT 1"));
}

TEST(EpochSummaryBuild, EmptyRelationGivesAnEmptySummary) {
  PgConnPtr c = Connect();
  MakeEpoch(c.get(), "summary_build_empty", 0);
  const EpochSummary s = BuildEpochSummary(c.get(), "summary_build_empty");
  EXPECT_EQ(s.keys(), 0u);
  EXPECT_EQ(s.lines(), 1u);
  EXPECT_FALSE(s.MayContain(test_support::CounterDigest(1)));
}

}  // namespace
}  // namespace scangate::storage
