// Privacy of raw keys (invariant 4): scangate is run with the access log on, in ack=commit, ack=filter and
// keyed-digest (HMAC) modes, and sent valid keys (single, batch, repeats) and invalid requests that carry
// key-like secrets. Then everything it wrote is searched for every raw key: its log, /metrics, /stats and a
// pg_dump of the scangate database. None may be found. The digest of every valid key must be in the
// database (so the search looks at the right data and the test can fail), and with a secret the HMAC —
// not the plain SHA-256 — is stored and the secret itself appears nowhere.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <thread>

#include "util.h"

namespace scangate::hardening {
namespace {

constexpr int kSingleKeys = 60;
constexpr int kBatchKeys = 40;
constexpr auto kWriteBehindBound = std::chrono::seconds(15);
constexpr const char* kPgDump = "/usr/lib/postgresql/15/bin/pg_dump";

// Letters g..z only: such a token can never occur inside a hex digest, so a hit is a real leak.
std::string SecretToken(std::mt19937_64& rng, std::size_t n) {
  static constexpr char kLetters[] = "ghijklmnopqrstuvwxyz";
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += kLetters[rng() % 20];
  return s;
}

struct Sources {
  std::string log, metrics, stats, dump;
};

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

void RunPrivacy(const std::string& mode, const std::vector<std::string>& flags, const std::string& secret) {
  std::mt19937_64 rng(std::random_device{}());
  const std::string run_tag = SecretToken(rng, 10);
  auto new_key = [&] { return "pv" + run_tag + SecretToken(rng, 22); };
  auto digest_of = [&](const std::string& key) {
    return secret.empty() ? it::Sha256Hex(key) : HmacSha256Hex(secret, key);
  };

  std::vector<std::string> valid, raw;  // valid keys (stored), every raw secret sent (searched for)
  it::ScangateProcess server(flags);
  ASSERT_TRUE(server.Start());
  it::HttpClient client(server.port());
  std::uint64_t new_count = 0, dup_count = 0;

  for (int i = 0; i < kSingleKeys; ++i) {
    const std::string k = new_key();
    valid.push_back(k);
    const auto r1 = client.Post(
        "/observe", "{\"key\":" + it::JsonString(k) + ",\"source\":\"lane-" + std::to_string(i % 3) + "\"}");
    ASSERT_EQ(r1.status, 201) << r1;
    ASSERT_EQ(r1.json().at("digest").as_string(), digest_of(k)) << "digest in the answer is not the expected one";
    const auto r2 = client.Post("/observe", it::ObserveBody(k));
    ASSERT_EQ(r2.status, 200) << r2;
    new_count++;
    dup_count++;
  }
  std::string batch = "{\"keys\":[";
  std::vector<std::string> batch_keys;
  for (int i = 0; i < kBatchKeys; ++i) {
    const std::string k = new_key();
    batch_keys.push_back(k);
    valid.push_back(k);
    // Piece by piece: `"," + std::string&&` trips GCC 12's false -Wrestrict at -O3 (GCC PR105329).
    if (i) batch += ',';
    batch += i % 2 ? it::JsonString(k) : "{\"key\":" + it::JsonString(k) + ",\"source\":\"t9\"}";
  }
  batch += "]}";
  const auto rb1 = client.Post("/observe/batch", batch);
  ASSERT_EQ(rb1.status, 200) << rb1;
  const auto rb2 = client.Post("/observe/batch", batch);  // all duplicates now
  ASSERT_EQ(rb2.status, 200) << rb2;
  raw = valid;

  // Invalid requests carrying secrets: must be rejected without echoing them into the log.
  const std::string long_key = "pv" + run_tag + SecretToken(rng, 600);  // over 512 bytes
  raw.push_back(long_key);
  std::vector<std::pair<std::string, int>> rejected;
  auto send_bad = [&](const std::string& target, const std::string& body, std::optional<std::string> ct) {
    it::HttpClient c(server.port());
    const auto r = c.Post(target, body, ct);
    rejected.emplace_back(target, r.status);
    EXPECT_GE(r.status, 400) << r;
    EXPECT_LT(r.status, 500) << r;
  };
  send_bad("/observe", it::ObserveBody(long_key), "application/json");
  const std::string nul_secret = new_key();
  raw.push_back(nul_secret);
  send_bad("/observe", "{\"key\":\"" + nul_secret + "\\u0000\"}", "application/json");
  const std::string malformed_secret = new_key();
  raw.push_back(malformed_secret);
  send_bad("/observe", "{\"key\":\"" + malformed_secret + "\"", "application/json");
  const std::string ct_secret = new_key();
  raw.push_back(ct_secret);
  send_bad("/observe", it::ObserveBody(ct_secret), "text/plain");
  const std::string batch_secret = new_key();
  raw.push_back(batch_secret);
  send_bad("/observe/batch", "{\"keys\":[" + it::JsonString(batch_secret) + ",\"\"]}", "application/json");
  const std::string src_secret = new_key();
  raw.push_back(src_secret);
  send_bad("/observe", "{\"key\":" + it::JsonString(src_secret) + ",\"source\":\"" + std::string(100, 'q') + "\"}",
           "application/json");

  // ack=filter answers before the write: wait (bounded) for the write-behind to land.
  std::vector<std::string> digests;
  for (const auto& k : valid) digests.push_back(digest_of(k));
  it::Pg pg;
  const auto deadline = Clock::now() + kWriteBehindBound;
  std::int64_t present = 0;
  while ((present = pg.CountDigests(digests)) < static_cast<std::int64_t>(digests.size()) && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }

  Sources src;
  src.metrics = client.Get("/metrics").body;
  src.stats = client.Get("/stats").body;
  const int stop_status = server.Stop();  // SIGTERM: shutdown lines land in the log too
  src.log = server.Log();
  // The test's own database (fixture "pg" gives each test one): its URL, not a database name.
  const auto dump = RunCommand("runuser -u postgres -- " + std::string(kPgDump) + " -d " + ShellQuote(it::Env().pg_url));
  src.dump = dump.output;

  // Where did each raw key show up?
  std::size_t in_log = 0, in_metrics = 0, in_stats = 0, in_dump = 0;
  std::vector<std::string> leak_examples;
  auto leak = [&](const std::string& where, const std::string& text, const std::string& key, std::size_t& n) {
    // Search for the whole key and for its 20-letter core (a truncated key is a leak too).
    const std::string core = key.substr(2 + run_tag.size(), 20);
    if (text.find(key) != std::string::npos || text.find(core) != std::string::npos) {
      ++n;
      if (leak_examples.size() < 5) {
        const auto pos = text.find(core);
        leak_examples.push_back(where + ": ..." + text.substr(pos > 80 ? pos - 80 : 0, 200) + "...");
      }
    }
  };
  for (const auto& k : raw) {
    leak("log", src.log, k, in_log);
    leak("/metrics", src.metrics, k, in_metrics);
    leak("/stats", src.stats, k, in_stats);
    leak("pg_dump", src.dump, k, in_dump);
  }
  // The searched data is the right data: digests are in the dump, the run tag's keys were logged about.
  std::size_t digests_in_dump = 0, sha_in_db_with_secret = 0;
  for (const auto& d : digests) {
    // sql/013's table holds a digest's first 16 bytes as a uuid (8-4-4-4-12 hex digits); the old one a bytea.
    const std::string uuid =
        d.substr(0, 8) + "-" + d.substr(8, 4) + "-" + d.substr(12, 4) + "-" + d.substr(16, 4) + "-" + d.substr(20, 12);
    digests_in_dump += src.dump.find("\\\\x" + d) != std::string::npos || src.dump.find("\\x" + d) != std::string::npos ||
                       src.dump.find(uuid) != std::string::npos;
  }
  if (!secret.empty()) {
    std::vector<std::string> plain;
    for (const auto& k : valid) plain.push_back(it::Sha256Hex(k));
    sha_in_db_with_secret = static_cast<std::size_t>(pg.CountDigests(plain));
  }
  const std::size_t access_lines = server.LogEvents("access").size();
  std::size_t log_lines = 0;
  for (char c : src.log) log_lines += c == '\n';
  const bool secret_leaked =
      !secret.empty() && (src.log.find(secret) != std::string::npos || src.metrics.find(secret) != std::string::npos ||
                          src.stats.find(secret) != std::string::npos);

  Report("privacy[" + mode + "]: sent " + std::to_string(valid.size()) + " valid keys (" + std::to_string(new_count) +
         " single + " + std::to_string(kBatchKeys) + " batch, each twice) and " +
         std::to_string(raw.size() - valid.size()) + " rejected requests carrying secrets; searched log (" +
         std::to_string(src.log.size()) + " bytes, " + std::to_string(log_lines) + " lines, " +
         std::to_string(access_lines) + " access lines), /metrics (" + std::to_string(src.metrics.size()) +
         " bytes), /stats (" + std::to_string(src.stats.size()) + " bytes), pg_dump (" +
         std::to_string(src.dump.size()) + " bytes, rc " + std::to_string(dump.status) + ")");
  Report("privacy[" + mode + "]: raw keys found: log " + std::to_string(in_log) + ", /metrics " +
         std::to_string(in_metrics) + ", /stats " + std::to_string(in_stats) + ", pg_dump " + std::to_string(in_dump) +
         "; digests in DB " + std::to_string(present) + "/" + std::to_string(digests.size()) + ", in dump " +
         std::to_string(digests_in_dump) + "/" + std::to_string(digests.size()) +
         (secret.empty() ? std::string()
                         : ", plain SHA-256 in DB " + std::to_string(sha_in_db_with_secret) +
                               ", secret leaked: " + (secret_leaked ? "yes" : "no")) +
         "; exit status on SIGTERM " + std::to_string(stop_status));
  for (const auto& e : leak_examples) Report("privacy[" + mode + "]: leak example: " + e);

  EXPECT_EQ(dump.status, 0) << dump.output.substr(0, 500);
  EXPECT_NE(src.dump.find("scan_keys"), std::string::npos) << "pg_dump does not contain the table";
  // The access log was really on: at least one line per request sent above (the search saw them all).
  EXPECT_GE(access_lines, static_cast<std::size_t>(2 * kSingleKeys + 2));
  EXPECT_FALSE(src.metrics.empty());
  EXPECT_FALSE(src.stats.empty());
  EXPECT_EQ(in_log, 0u) << "raw keys in the server log";
  EXPECT_EQ(in_metrics, 0u) << "raw keys in /metrics";
  EXPECT_EQ(in_stats, 0u) << "raw keys in /stats";
  EXPECT_EQ(in_dump, 0u) << "raw keys in the database";
  EXPECT_EQ(present, static_cast<std::int64_t>(digests.size())) << "digests of valid keys missing in PostgreSQL";
  EXPECT_EQ(digests_in_dump, digests.size()) << "digests not found in pg_dump output: the search is blind";
  EXPECT_EQ(sha_in_db_with_secret, 0u) << "plain SHA-256 stored although a digest secret was configured";
  EXPECT_FALSE(secret_leaked) << "the digest secret appears in the log, /metrics or /stats";
  EXPECT_EQ(stop_status, 0);
}

TEST(HardeningPrivacy, CommitModeWritesNoRawKeys) { RunPrivacy("commit", {"--ack=commit", "--access-log=on"}, ""); }

TEST(HardeningPrivacy, FilterModeWritesNoRawKeys) { RunPrivacy("filter", {"--ack=filter", "--access-log=on"}, ""); }

TEST(HardeningPrivacy, KeyedDigestStoresHmacAndHidesSecret) {
  char tmpl[] = "/tmp/scangate-hardening-secret.XXXXXX";
  const int fd = ::mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  ::close(fd);
  std::mt19937_64 rng(std::random_device{}());
  const std::string secret = "sek" + SecretToken(rng, 29);
  std::ofstream(tmpl) << secret << "\n";  // trailing newline is stripped by the server
  RunPrivacy("hmac", {"--ack=commit", "--access-log=on", std::string("--digest-secret-file=") + tmpl}, secret);
  std::remove(tmpl);
}

}  // namespace
}  // namespace scangate::hardening
