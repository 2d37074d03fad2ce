// The digest scheme is the database's (issue 55), black-box against the real binary and PostgreSQL: an instance
// whose digest secret, --keys or stored form differs from the one the database recorded is refused at start (exit
// 2, log event digest_scheme_mismatch naming the component, never the secret); --digest-secret-previous-file rotates
// the secret with the horizon intact (keys recorded under the old secret are duplicates, /lookup finds them, new
// keys are recorded under the new one), and the needed-until it reports follows a step of PostgreSQL's clock; and an
// instance still on the old secret alone, running while another starts the rotation, is fenced: no key is answered
// `new` twice, checked while both run.
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "harness.h"

namespace scangate::it {
namespace {

std::string Hex(const unsigned char* p, std::size_t n) {
  std::string out;
  char buf[3];
  for (std::size_t i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof buf, "%02x", p[i]);
    out += buf;
  }
  return out;
}

std::string HmacHex(const std::string& secret, const std::string& key) {
  unsigned char md[32];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(key.data()), key.size(), md, &len);
  return Hex(md, len);
}

// A secret file holding `secret` (and a newline, which the server strips).
std::string SecretFile(const std::string& secret) {
  const std::string path = TempDir("scheme-secret") + "/secret";
  std::ofstream(path) << secret << "\n";
  return path;
}

// Every test starts from a database without a recorded scheme (its rows stay; keys are unique per run), and the
// harness keeps what the instances record.
void ForgetScheme() {
  KeepDigestScheme(true);
  ForgetDigestScheme(Env().pg_url);
}

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs scangate with `flags` until it exits by itself (bounded: `timeout` stops one that serves instead — on a
// build without the check — with status 124). Returns the exit status and everything it wrote.
std::pair<int, std::string> RunUntilExit(const std::vector<std::string>& flags) {
  std::string cmd = "timeout 20 " + ShellQuote(Env().server_binary) + " --database-url=" + ShellQuote(Env().pg_url) +
                    " --listen=127.0.0.1 --port=0 --journal-dir=" + ShellQuote(TempDir("scheme-journal"));
  for (const auto& f : flags) cmd += " " + ShellQuote(f);
  cmd += " 2>&1";
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return {-1, "popen failed"};
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// The first JSON log line of `event` in `out` ({} when none).
boost::json::object EventIn(const std::string& out, std::string_view event) {
  std::size_t pos = 0;
  while (pos < out.size()) {
    std::size_t end = out.find('\n', pos);
    if (end == std::string::npos) end = out.size();
    const std::string line = out.substr(pos, end - pos);
    pos = end + 1;
    if (line.find("\"event\":\"" + std::string(event) + "\"") == std::string::npos) continue;
    boost::system::error_code ec;
    boost::json::value v = boost::json::parse(line, ec);
    if (!ec && v.is_object()) return v.as_object();
  }
  return {};
}

// Refused at start: exit 2 and a digest_scheme_mismatch event naming `component`; no secret in the output.
void ExpectRefused(const std::vector<std::string>& flags, std::string_view component,
                   const std::vector<std::string>& secrets, std::string_view detail_part = {}) {
  const auto [status, out] = RunUntilExit(flags);
  EXPECT_EQ(status, 2) << "not refused (124: it served)\n" << out;
  const boost::json::object e = EventIn(out, "digest_scheme_mismatch");
  ASSERT_FALSE(e.empty()) << "no digest_scheme_mismatch event\n" << out;
  EXPECT_EQ(e.at("component").as_string(), component) << out;
  EXPECT_EQ(e.at("exit_code").as_int64(), 2);
  const std::string detail(e.at("detail").as_string());
  if (!detail_part.empty()) {
    EXPECT_NE(detail.find(detail_part), std::string::npos) << detail;
  }
  for (const auto& s : secrets) EXPECT_EQ(out.find(s), std::string::npos) << "a secret reached the log";
}

// s1, then s2, then no secret, on one database: the second and the third are refused (they would answer every key
// of the horizon `new` again); s1 again still knows the key.
TEST(DigestScheme, RestartsWithAnotherSecretAreRefused) {
  ForgetScheme();
  const std::string s1 = "scheme-s1-" + RandomHex(12), s2 = "scheme-s2-" + RandomHex(12);
  const std::string f1 = SecretFile(s1), f2 = SecretFile(s2);
  const std::string key = UniqueKey("three-restarts");
  {
    ScangateProcess a({"--digest-secret-file=" + f1, "--capacity=100000"});
    ASSERT_TRUE(a.Start());
    HttpClient c(a.port());
    EXPECT_EQ(ObserveKey(c, key).status, 201);
    EXPECT_EQ(a.LogEvents("digest_scheme").size(), 1u) << a.LogTail();
    EXPECT_EQ(a.Stop(), 0);
  }
  ExpectRefused({"--digest-secret-file=" + f2, "--capacity=100000"}, "secret", {s1, s2}, "--digest-secret-file");
  ExpectRefused({"--capacity=100000"}, "secret_presence", {s1, s2});
  ScangateProcess again({"--digest-secret-file=" + f1, "--capacity=100000"});
  ASSERT_TRUE(again.Start());
  HttpClient c(again.port());
  EXPECT_EQ(ObserveKey(c, key).status, 200) << "the key recorded before the refused starts";
  Pg pg;
  EXPECT_EQ(pg.CountDigest(HmacHex(s1, key)), 1);
  EXPECT_EQ(pg.CountDigest(HmacHex(s2, key)), 0);
  EXPECT_EQ(pg.CountDigest(Sha256Hex(key)), 0);
  EXPECT_EQ(again.Stop(), 0);
}

// --keys=gs1 beside a running --keys=raw instance, and a second instance with another secret beside a running one:
// refused; the running one goes on answering.
TEST(DigestScheme, AnotherSchemeBesideARunningInstanceIsRefused) {
  ForgetScheme();
  const std::string s1 = "scheme-beside-" + RandomHex(12), s2 = "scheme-other-" + RandomHex(12);
  const std::string f1 = SecretFile(s1), f2 = SecretFile(s2);
  ScangateProcess a({"--digest-secret-file=" + f1, "--capacity=100000"});
  ASSERT_TRUE(a.Start());
  HttpClient c(a.port());
  const std::string key = UniqueKey("beside");
  EXPECT_EQ(ObserveKey(c, key).status, 201);
  ExpectRefused({"--digest-secret-file=" + f1, "--keys=gs1", "--capacity=100000"}, "keys", {s1}, "--keys");
  ExpectRefused({"--digest-secret-file=" + f2, "--capacity=100000"}, "secret", {s1, s2});
  EXPECT_EQ(ObserveKey(c, key).status, 200);
  EXPECT_EQ(ObserveKey(c, UniqueKey("beside-new")).status, 201);
  EXPECT_EQ(a.Stop(), 0);
}

// Rotation: keys recorded under s1 are duplicates under s2 + previous s1 (single and batch, both ack modes), /lookup
// finds them, new keys are recorded under s2 alone; s1 alone is refused afterwards, and so is s2 alone while the
// horizon still needs s1; /stats and /metrics say the previous secret cannot go yet.
TEST(DigestScheme, RotationKeepsTheHorizon) {
  ForgetScheme();
  const std::string s1 = "scheme-rot1-" + RandomHex(12), s2 = "scheme-rot2-" + RandomHex(12);
  const std::string f1 = SecretFile(s1), f2 = SecretFile(s2);
  const std::vector<std::string> old_keys = UniqueKeys(4, "rot-old");
  std::vector<std::string> first_seen;
  {
    ScangateProcess a({"--digest-secret-file=" + f1, "--capacity=100000"});
    ASSERT_TRUE(a.Start());
    HttpClient c(a.port());
    for (const auto& k : old_keys) {
      const ObserveAnswer r = ObserveKey(c, k);
      EXPECT_EQ(r.status, 201) << r.text;
      first_seen.push_back(ObserveKey(c, k).first_seen);
    }
    EXPECT_EQ(a.Stop(), 0);
  }
  Pg pg;
  for (const std::string ack : {"commit", "filter"}) {
    SCOPED_TRACE("--ack=" + ack);
    ScangateProcess b({"--digest-secret-file=" + f2, "--digest-secret-previous-file=" + f1, "--ack=" + ack,
                       "--capacity=100000"});
    ASSERT_TRUE(b.Start());
    HttpClient c(b.port());
    for (std::size_t i = 0; i < old_keys.size(); ++i) {
      const ObserveAnswer r = ObserveKey(c, old_keys[i]);
      EXPECT_EQ(r.status, 200) << "a key recorded under the previous secret answered new: " << r.text;
      EXPECT_EQ(r.first_seen, first_seen[i]);
      EXPECT_EQ(pg.CountDigest(HmacHex(s2, old_keys[i])), 0) << "recorded again under the new secret";
    }
    const HttpResponse lk = c.Post("/lookup", ObserveBody(old_keys[0]));
    EXPECT_EQ(lk.status, 200) << lk;
    const std::string fresh = UniqueKey("rot-new-" + ack);
    const HttpResponse batch = c.Post("/observe/batch", BatchBody({old_keys[1], fresh, fresh}));
    ASSERT_EQ(batch.status, 200) << batch;
    const boost::json::object body = batch.json();
    const auto& results = body.at("results").as_array();
    ASSERT_EQ(results.size(), 3u) << batch;
    EXPECT_EQ(results[0].as_object().at("verdict"), "duplicate") << batch;
    EXPECT_EQ(results[1].as_object().at("verdict"), "new") << batch;
    EXPECT_EQ(results[2].as_object().at("verdict"), "duplicate") << batch;
    EXPECT_EQ(pg.CountDigest(HmacHex(s2, fresh)), 1) << "a new key is recorded under the new secret";
    EXPECT_EQ(pg.CountDigest(HmacHex(s1, fresh)), 0);
    EXPECT_EQ(c.Post("/lookup", ObserveBody(fresh)).status, 200);
    const boost::json::object stats = c.Get("/stats").json();
    const auto& scheme = stats.at("digest_scheme").as_object();
    EXPECT_TRUE(scheme.at("previous_secret").as_bool());
    EXPECT_GE(scheme.at("previous_duplicates").as_int64(), 4);
    const auto& db = scheme.at("databases").as_array().at(0).as_object();
    EXPECT_TRUE(db.at("rotation").as_bool()) << stats;
    EXPECT_FALSE(db.at("previous_can_go").as_bool()) << stats;
    EXPECT_TRUE(db.contains("previous_needed_until")) << stats;
    EXPECT_EQ(ScrapeMetric(c, "scangate_digest_previous_can_go{partition=\"db\"}"), 0);
    EXPECT_EQ(b.Stop(), 0);
  }
  ExpectRefused({"--digest-secret-file=" + f1, "--capacity=100000"}, "secret", {s1, s2}, "rotated");
  ExpectRefused({"--digest-secret-file=" + f2, "--capacity=100000"}, "previous_secret_missing", {s1, s2},
                "--digest-secret-previous-file");
}

// A forward step of PostgreSQL's clock recorded after the rotation's start keeps the keys recorded under the
// previous secret inside the horizon that much longer (sql/017): a running instance's /metrics and /stats move the
// needed-until by the step and keep saying the previous secret cannot go — --ack=commit (the row read at its start)
// and --ack=filter (re-read by its scheme watch) alike.
TEST(DigestScheme, AStepAfterTheRotationKeepsThePreviousSecretLonger) {
  ForgetScheme();
  const std::string s1 = "scheme-step1-" + RandomHex(12), s2 = "scheme-step2-" + RandomHex(12);
  const std::string f1 = SecretFile(s1), f2 = SecretFile(s2);
  {
    ScangateProcess a({"--digest-secret-file=" + f1, "--capacity=100000"});
    ASSERT_TRUE(a.Start());
    EXPECT_EQ(a.Stop(), 0);
  }
  constexpr std::int64_t kStepEpoch = 1'000'000;  // far past any epoch the fixture's clock opens
  Pg pg;
  const auto steps = [&](const std::string& sql) {
    pqxx::work tx(pg.conn());
    tx.exec_params0(sql, kStepEpoch);
    tx.commit();
  };
  for (const std::string ack : {"commit", "filter"}) {
    SCOPED_TRACE("--ack=" + ack);
    ScangateProcess b({"--digest-secret-file=" + f2, "--digest-secret-previous-file=" + f1, "--ack=" + ack,
                       "--capacity=100000"});
    ASSERT_TRUE(b.Start());
    HttpClient c(b.port());
    const std::string until = "scangate_digest_previous_needed_until_seconds{partition=\"db\"}";
    const double before = ScrapeMetric(c, until);
    EXPECT_GT(before, 0);
    steps("INSERT INTO scangate_clock_steps (epoch, before, step) VALUES ($1, now(), interval '10 minutes')");
    double after = before;
    for (int i = 0; i < 100 && after < before + 600 - 1e-3; ++i) {  // the clock reader and the watch: ~1 s
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      after = ScrapeMetric(c, until);
    }
    EXPECT_NEAR(after - before, 600, 1e-3) << "the needed-until did not follow the step";
    EXPECT_EQ(ScrapeMetric(c, "scangate_digest_previous_can_go{partition=\"db\"}"), 0);
    const boost::json::object stats = c.Get("/stats").json();
    const auto& db = stats.at("digest_scheme").at("databases").as_array().at(0).as_object();
    EXPECT_FALSE(db.at("previous_can_go").as_bool()) << stats;
    steps("DELETE FROM scangate_clock_steps WHERE epoch = $1");
    EXPECT_EQ(b.Stop(), 0);
  }
}

// An instance on s1 alone keeps running while another starts the rotation to s2: from then on the old one answers
// no key `new` (its inserts are refused in PostgreSQL; --ack=filter: its filter's `new` needs a lease on the scheme
// it no longer gets), so every fresh key is `new` exactly once — checked while both run, whichever answers first.
class DigestSchemeConcurrent : public ::testing::TestWithParam<const char*> {};

TEST_P(DigestSchemeConcurrent, OldInstanceIsFencedWhileANewOneRotates) {
  ForgetScheme();
  const std::string s1 = "scheme-conc1-" + RandomHex(12), s2 = "scheme-conc2-" + RandomHex(12);
  const std::string f1 = SecretFile(s1), f2 = SecretFile(s2);
  ScangateProcess a({"--digest-secret-file=" + f1, std::string("--ack=") + GetParam(), "--request-timeout=2s",
                     "--capacity=100000"});
  ASSERT_TRUE(a.Start());
  HttpClient ca(a.port());
  const std::string before = UniqueKey("conc-before");
  ASSERT_EQ(ObserveKey(ca, before).status, 201);
  // --ack=commit: no watermark of its own, so the old instance's peer coverage does not hold it back — only the
  // fence (its inserts) and its lease (its filter's `new`) do.
  ScangateProcess b({"--digest-secret-file=" + f2, "--digest-secret-previous-file=" + f1, "--ack=commit",
                     "--request-timeout=2s", "--capacity=100000"});
  ASSERT_TRUE(b.Start());
  ASSERT_TRUE(a.running());
  HttpClient cb(b.port());
  EXPECT_EQ(ObserveKey(cb, before).status, 200) << "the key the old instance recorded before the rotation";
  std::string first_refusal;  // the old instance's first answer that was not `new`, for the record
  auto observe = [&first_refusal](HttpClient& c, const std::string& k) {
    try {
      const ObserveAnswer r = ObserveKey(c, k);
      if (r.status == 503 && first_refusal.empty()) first_refusal = r.text;
      return r.status;
    } catch (const std::exception&) {
      c.Reconnect();
      return 0;
    }
  };
  int second_news = 0, news = 0;
  std::string answers;  // "b/a" statuses per key, for the record
  for (const auto& k : UniqueKeys(6, "conc-b-first")) {  // the new instance first
    const int nb = observe(cb, k), na = observe(ca, k);
    answers += " B" + std::to_string(nb) + "/A" + std::to_string(na);
    news += (nb == 201) + (na == 201);
    if (nb == 201 && na == 201) ++second_news;
    EXPECT_NE(na, 201) << "the old instance answered new a key the new one had answered new";
  }
  for (const auto& k : UniqueKeys(6, "conc-a-first")) {  // the old instance first
    const int na = observe(ca, k), nb = observe(cb, k);
    answers += " A" + std::to_string(na) + "/B" + std::to_string(nb);
    news += (nb == 201) + (na == 201);
    if (nb == 201 && na == 201) ++second_news;
    EXPECT_NE(na, 201) << "the old instance answered a key new after the rotation";
    EXPECT_EQ(nb, 201) << "the new instance must decide a key the old one could not";
  }
  std::printf("concurrent rotation (--ack=%s old instance):%s\nfirst 503: %s\n", GetParam(), answers.c_str(),
              first_refusal.c_str());
  EXPECT_EQ(second_news, 0);
  EXPECT_EQ(news, 12);
  if (std::string(GetParam()) == "filter") {
    EXPECT_FALSE(a.LogEvents("digest_scheme_changed").empty()) << a.LogTail();
  }
  EXPECT_TRUE(a.running());
  EXPECT_TRUE(b.running());
  a.Kill();  // its fenced rows would be retried until the shutdown bound
  EXPECT_EQ(b.Stop(), 0);
}

INSTANTIATE_TEST_SUITE_P(Ack, DigestSchemeConcurrent, ::testing::Values("commit", "filter"));

}  // namespace
}  // namespace scangate::it
