// Tests storage/partitions/partition_map.h: parsing PL/Proxy's cluster options, PartitionOf against sql/007's
// scangate_partition_hash on the fixture's PostgreSQL (bit for bit), and ReadPartitionMap against a real
// plproxy foreign server in a scratch database.
#include "storage/partitions/partition_map.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <pqxx/pqxx>

#include "tests/storage/pg_test_db.h"
#include "tests/storage/scratch_db.h"

namespace scangate::storage {
namespace {

TEST(ParsePartitionOptions, GoodMapInIndexOrderWhateverTheOptionOrder) {
  const PartitionMap m = ParsePartitionOptions(
      {"connection_lifetime=1800", "p1=host=b dbname=p1", "p0=host=a dbname=p0", "p3=host=d", "p2=host=c"});
  ASSERT_EQ(m.conninfo.size(), 4u);
  EXPECT_EQ(m.conninfo[0], "host=a dbname=p0");
  EXPECT_EQ(m.conninfo[1], "host=b dbname=p1");
  EXPECT_EQ(m.conninfo[2], "host=c");
  EXPECT_EQ(m.conninfo[3], "host=d");
  EXPECT_EQ(ParsePartitionOptions({"p0=x"}).conninfo.size(), 1u);  // 2^0 = one partition
}

TEST(ParsePartitionOptions, ValuesKeepSpacesAndEqualSigns) {
  const PartitionMap m =
      ParsePartitionOptions({"p0=host=127.0.0.1 port=5601 dbname=scangate_p0 options='-c a=b'", "p1="});
  EXPECT_EQ(m.conninfo[0], "host=127.0.0.1 port=5601 dbname=scangate_p0 options='-c a=b'");
  EXPECT_EQ(m.conninfo[1], "");
}

TEST(ParsePartitionOptions, ExtraOptionsIgnored) {
  const PartitionMap m = ParsePartitionOptions({"connection_lifetime=1800", "disable_binary=1", "p0=a",
                                                "partitions=9", "px=zz", "p=1", "p1=b", "keepalive_idle=60"});
  EXPECT_EQ(m.conninfo, (std::vector<std::string>{"a", "b"}));
}

TEST(ParsePartitionOptions, MissingPartitionRefused) {
  try {
    ParsePartitionOptions({"p0=a", "p1=b", "p3=d"});
    FAIL() << "a map without p2 was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("p2 is missing"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ParsePartitionOptions({"p1=b"}), std::invalid_argument);  // no p0
}

TEST(ParsePartitionOptions, CountNotPowerOfTwoRefused) {
  try {
    ParsePartitionOptions({"p0=a", "p1=b", "p2=c"});
    FAIL() << "a map of 3 partitions was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("power of two"), std::string::npos) << e.what();
  }
}

TEST(ParsePartitionOptions, NoPartitionsOrDuplicateRefused) {
  EXPECT_THROW(ParsePartitionOptions({}), std::invalid_argument);
  EXPECT_THROW(ParsePartitionOptions({"connection_lifetime=1800"}), std::invalid_argument);
  EXPECT_THROW(ParsePartitionOptions({"p0=a", "p0=b"}), std::invalid_argument);
  EXPECT_THROW(ParsePartitionOptions({"p0=a", "p01=b"}), std::invalid_argument);  // ambiguous: refused
}

TEST(PartitionOf, BytesFourToSevenBigEndian) {
  Digest d{};
  d[0] = d[1] = d[2] = d[3] = 0xff;  // the writer route's bytes: no influence
  d[4] = 0x12;
  d[5] = 0x34;
  d[6] = 0x56;
  d[7] = 0x7b;
  EXPECT_EQ(PartitionOf(d, 1), 0u);
  EXPECT_EQ(PartitionOf(d, 2), 1u);
  EXPECT_EQ(PartitionOf(d, 16), 0xbu);
  EXPECT_EQ(PartitionOf(d, 256), 0x7bu);
  EXPECT_EQ(PartitionOf(d, 65536), 0x567bu);
  EXPECT_EQ(PartitionOf(d, std::size_t{1} << 32), 0x1234567bu);
}

TEST(DescribeConninfo, HostPortDbnameOnly) {
  const std::string s = DescribeConninfo("host=10.0.0.5 port=5601 dbname=scangate_p3 user=u password=s3cret");
  EXPECT_EQ(s, "host=10.0.0.5 port=5601 dbname=scangate_p3");
  EXPECT_EQ(DescribeConninfo("postgresql://u:s3cret@db1:5433/keys"), "host=db1 port=5433 dbname=keys");
  EXPECT_EQ(DescribeConninfo("host='unterminated"), "<unparsable>");
}

class PgPartitionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(PgDir().empty()) << "SCANGATE_TEST_PG_DIR not set (run through ctest)";
    MigrateOnce();
  }
};

// PartitionOf(d, n) == scangate_partition_hash(d) & (n - 1) for random digests and several n, and the whole
// 32-bit hash agrees (the int4's sign bit included).
TEST_F(PgPartitionTest, PartitionOfMatchesSql) {
  const std::vector<Digest> ds = RandomDigests(1000);
  std::string values;
  for (std::size_t i = 0; i < ds.size(); ++i) {
    values += (i == 0 ? "" : ",") + std::string("(") + std::to_string(i) + ", '" + HexBytea(ds[i]) + "'::bytea)";
  }
  pqxx::connection c(PgTestUrl());
  pqxx::nontransaction tx(c);
  const pqxx::result r = tx.exec(
      "SELECT i, scangate_partition_hash(d)::int8 & 4294967295, scangate_partition_hash(d) & 1, "
      "scangate_partition_hash(d) & 3, scangate_partition_hash(d) & 7, scangate_partition_hash(d) & 63, "
      "scangate_partition_hash(d) & 1023 FROM (VALUES " + values + ") v(i, d) ORDER BY i");
  ASSERT_EQ(r.size(), ds.size());
  int negative = 0;
  for (const auto& row : r) {
    const Digest& d = ds[row[0].as<std::size_t>()];
    const auto full = row[1].as<std::uint64_t>();
    EXPECT_EQ(PartitionOf(d, std::size_t{1} << 32), full);
    negative += full >= 0x80000000u ? 1 : 0;
    const std::size_t counts[] = {2, 4, 8, 64, 1024};
    for (std::size_t k = 0; k < 5; ++k) EXPECT_EQ(PartitionOf(d, counts[k]), row[static_cast<int>(2 + k)].as<unsigned>());
  }
  EXPECT_GT(negative, 0);  // the sign bit was exercised
  EXPECT_EQ(tx.exec1("SELECT scangate_partition_hash(NULL) IS NULL")[0].as<bool>(), true);
}

// The map as PL/Proxy holds it: a foreign server of the plproxy wrapper, read back in index order with its
// values intact (spaces, '=', quotes and commas survive the text[] round trip); another cluster name is
// "no PL/Proxy cluster"; a broken map is std::invalid_argument.
TEST_F(PgPartitionTest, ReadPartitionMapFromForeignServer) {
  ScratchDb proxy("scangate_pm_proxy");
  proxy.Exec("CREATE EXTENSION plproxy");
  proxy.Exec("CREATE SERVER sgtest FOREIGN DATA WRAPPER plproxy OPTIONS (connection_lifetime '1800', "
             "p1 'host=127.0.0.1 port=5602 dbname=scangate_p1', "
             "p0 'host=127.0.0.1 port=5601 dbname=scangate_p0 application_name=''a, \"b\"''')");
  const PartitionMap m = ReadPartitionMap(proxy.conninfo, "sgtest");
  ASSERT_EQ(m.conninfo.size(), 2u);
  EXPECT_EQ(m.conninfo[0], "host=127.0.0.1 port=5601 dbname=scangate_p0 application_name='a, \"b\"'");
  EXPECT_EQ(m.conninfo[1], "host=127.0.0.1 port=5602 dbname=scangate_p1");

  try {
    ReadPartitionMap(proxy.conninfo, "nosuch");
    FAIL() << "an absent cluster was read";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no PL/Proxy cluster named"), std::string::npos) << e.what();
  }
  // (PL/Proxy's own validator refuses a map of 3 partitions at ALTER time: ParsePartitionOptions' tests cover it.)
  proxy.Exec("ALTER SERVER sgtest OPTIONS (ADD p2 'host=x', ADD p3 'host=y')");
  const PartitionMap four = ReadPartitionMap(proxy.conninfo, "sgtest");
  ASSERT_EQ(four.conninfo.size(), 4u);
  EXPECT_EQ(four.conninfo[3], "host=y");
}

}  // namespace
}  // namespace scangate::storage
