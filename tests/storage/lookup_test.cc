// Tests storage/lookup.h against the throwaway PostgreSQL of fixture "pg": found (first_seen and source
// as the writers recorded them), not found, never a write, refusal while unreachable. Recovery after an
// outage is covered end to end by tests/server/service_lookup_test.cc.
#include "storage/lookup.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <random>
#include <string>

#include <pqxx/pqxx>

#include "storage/store.h"

namespace scangate::storage {
namespace {

std::string Url() {
  const char* dir = std::getenv("SCANGATE_TEST_PG_DIR");
  std::ifstream in(std::string(dir != nullptr ? dir : "") + "/url");
  std::string line;
  std::getline(in, line);
  return line;
}

Digest RandomDigest() {
  static std::mt19937_64 rng{std::random_device{}()};
  Digest d;
  for (std::size_t i = 0; i < d.size(); i += 8) {
    const std::uint64_t v = rng();
    std::memcpy(d.data() + i, &v, 8);
  }
  return d;
}

RecordLookup FindSync(Lookup& l, const Digest& d) {
  std::promise<RecordLookup> p;
  auto f = p.get_future();
  if (!l.Find(d, [&p](const RecordLookup& r) { p.set_value(r); })) {
    ADD_FAILURE() << "Find refused";
    return RecordLookup{};
  }
  EXPECT_EQ(f.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  return f.get();
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
  std::promise<Result> inserted;
  ASSERT_TRUE(store.Submit(0, seen, "lane 5", [&](const Result& r) { inserted.set_value(r); }));
  const Result ins = inserted.get_future().get();
  ASSERT_EQ(ins.outcome, Outcome::kInserted);

  Lookup lookup(LookupOptions{Url()});
  lookup.Start();
  ASSERT_TRUE(lookup.up());
  pqxx::connection c(Url());
  const auto rows = Rows(c);

  RecordLookup r = FindSync(lookup, seen);
  EXPECT_EQ(r.status, RecordLookup::Status::kFound);
  EXPECT_EQ(r.first_seen, ins.first_seen);
  EXPECT_EQ(r.source, std::optional<std::string>("lane 5"));

  r = FindSync(lookup, RandomDigest());
  EXPECT_EQ(r.status, RecordLookup::Status::kNotFound);
  EXPECT_EQ(Rows(c), rows) << "a lookup wrote";
  lookup.Shutdown();
  EXPECT_FALSE(lookup.Find(seen, [](const RecordLookup&) { ADD_FAILURE() << "ran after Shutdown"; }));
}

TEST(Lookup, UnreachableRefuses) {
  Lookup lookup(LookupOptions{"postgresql://postgres@127.0.0.1:1/none?connect_timeout=1"});
  lookup.Start();
  EXPECT_FALSE(lookup.up());
  EXPECT_FALSE(lookup.Find(RandomDigest(), [](const RecordLookup&) { ADD_FAILURE() << "ran although refused"; }));
}

}  // namespace
}  // namespace scangate::storage
