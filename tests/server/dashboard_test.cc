// Tests GET /dashboard (server/metrics/dashboard.h) in a real browser: scangate with --admin-listen against the
// fixture's PostgreSQL, a few hundred observations, then headless Chromium renders the page (its own
// JavaScript polling /stats). Screenshots at laptop and tablet sizes are saved as test artifacts; the
// rendered DOM must agree with /stats (request rate > 0, PostgreSQL up, key count = keys observed).
// Then PostgreSQL is stopped and the page must say "down" within a few seconds; it is restarted at the end.
// Stops the shared cluster, so it is ordered after the other service tests (like service_outage_test).
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "harness.h"

namespace scangate::it {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kNewKeys = 300;                                  // distinct keys observed before rendering
constexpr int kRepeats = 100;                                  // repeats of those (duplicates)
constexpr auto kSettleTimeout = std::chrono::seconds(15);      // /stats catching up with the load
constexpr auto kDownTimeout = std::chrono::seconds(20);        // page shows PostgreSQL down (failure detection)
constexpr auto kRecoveryTimeout = std::chrono::seconds(60);    // /readyz after PostgreSQL is back
constexpr int kBudgetMs = 6000;                                // Chromium virtual time per rendering (6 polls)
constexpr auto kPoll = std::chrono::milliseconds(100);

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string Chromium() {
  const char* env = std::getenv("SCANGATE_CHROMIUM");
  return env != nullptr && *env != '\0' ? env : "/usr/bin/chromium";
}

fs::path ArtifactDir() {
  const char* bin = std::getenv("SCANGATE_BINARY_DIR");
  fs::path dir = fs::path(bin != nullptr ? bin : fs::temp_directory_path().string()) / "test-artifacts";
  fs::create_directories(dir);
  return dir;
}

// Runs headless Chromium on `url` with `mode` (--dump-dom or --screenshot=...), a fresh profile and a
// virtual-time budget (the page's timers run, /stats fetches are real); returns stdout (the DOM for
// --dump-dom). Chromium's own chatter goes to test-artifacts/chromium.log.
std::string RunChromium(const std::string& url, const std::string& mode, const std::string& window_size) {
  char tmpl[] = "/tmp/scangate-chromium.XXXXXX";
  const char* profile = ::mkdtemp(tmpl);
  if (profile == nullptr) throw std::runtime_error("mkdtemp failed");
  std::string cmd = "timeout 120 " + Quote(Chromium()) + " --headless --disable-gpu --disable-quic --no-first-run" +
                    " --disable-background-networking --disable-component-update --disable-sync" +
                    " --hide-scrollbars --user-data-dir=" + Quote(profile) + " --window-size=" + window_size +
                    " --virtual-time-budget=" + std::to_string(kBudgetMs) + " " + mode + " " + Quote(url) +
                    " 2>>" + Quote((ArtifactDir() / "chromium.log").string());
  if (::geteuid() == 0) cmd.insert(cmd.find(" --headless"), " --no-sandbox");  // root: no user namespaces
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[65536];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    const int status = ::pclose(p);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fs::remove_all(profile);
      throw std::runtime_error("chromium failed (status " + std::to_string(status) + "): " + cmd);
    }
  }
  fs::remove_all(profile);
  return out;
}

// The opening tag of the element with id `id` in a serialized DOM; "" when absent.
std::string Tag(const std::string& dom, const std::string& id) {
  std::smatch m;
  if (std::regex_search(dom, m, std::regex("<[a-z0-9]+\\s[^>]*\\bid=\"" + id + "\"[^>]*>"))) return m.str();
  return "";
}
std::optional<std::string> Attr(const std::string& dom, const std::string& id, const std::string& attr) {
  std::smatch m;
  const std::string tag = Tag(dom, id);
  if (std::regex_search(tag, m, std::regex("\\s" + attr + "=\"([^\"]*)\""))) return m[1].str();
  return std::nullopt;
}
double NumAttr(const std::string& dom, const std::string& id) {
  const auto v = Attr(dom, id, "data-value");
  return v ? std::strtod(v->c_str(), nullptr) : -1.0;
}

std::uint64_t StatsKeys(HttpClient& admin) { return admin.Get("/stats").json().at("filter").at("keys").to_number<std::uint64_t>(); }

// Restarts the cluster when a test ends early while it is stopped.
struct ClusterGuard {
  bool stopped = false;
  ~ClusterGuard() {
    if (stopped) PgClusterStart();
  }
};

// Repeats of already-observed keys, one at a time, until stopped: a request rate that adds no filter key.
class RepeatLoad {
 public:
  RepeatLoad(std::uint16_t port, std::vector<std::string> keys) : thread_([this, port, keys = std::move(keys)] {
    std::optional<HttpClient> c;
    for (std::size_t i = 0; !stop_.load(); ++i) {
      try {
        if (!c) c.emplace(port);
        const HttpResponse r = c->Post("/observe", ObserveBody(keys[i % keys.size()]));
        if (r.status == 201) new_verdicts_.fetch_add(1);  // must stay 0: every key was seen before
        if (!r.keep_alive) c.reset();
      } catch (const std::exception&) {
        c.reset();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));  // gentle on a shared machine
    }
  }) {}
  ~RepeatLoad() { Stop(); }
  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  int new_verdicts() const { return new_verdicts_.load(); }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int> new_verdicts_{0};
  std::thread thread_;
};

// Without --admin-listen the page is on the main port: self-contained HTML with a restrictive CSP.
TEST(Dashboard, ServedOnMainPortWithoutAdminListener) {
  ScangateProcess server;
  ASSERT_TRUE(server.Start());
  HttpClient c(server.port());
  const HttpResponse r = c.Get("/dashboard");
  ASSERT_EQ(r.status, 200) << r;
  EXPECT_EQ(r.header("content-type"), "text/html; charset=utf-8");
  EXPECT_NE(r.header("content-security-policy").find("connect-src 'self'"), std::string::npos);
  EXPECT_NE(r.body.find("id=\"pg-state\""), std::string::npos);
  EXPECT_NE(r.body.find("Dygraph"), std::string::npos);  // the charting library is inlined
  EXPECT_EQ(r.body.find("@DYGRAPH"), std::string::npos);  // every placeholder was filled
  // Nothing loaded from elsewhere: no external script, style or image references.
  EXPECT_FALSE(std::regex_search(r.body, std::regex(R"((src|href)\s*=\s*["']?(https?:)?//)")));
  EXPECT_EQ(c.Post("/dashboard", "{}").status, 405);
}

// --rate-limit: the page lists the 429s of the terminal that flooded (from /stats rate_limit), and not the
// other one; without the limit the card stays hidden (checked in RendersLiveStatsInChromium's DOM).
TEST(Dashboard, RateLimitCardInChromium) {
  ASSERT_TRUE(fs::exists(Chromium())) << Chromium() << " is missing: bash scripts/deps.sh installs chromium";
  const fs::path tokens = ArtifactDir() / "dashboard-tokens";
  {
    std::FILE* f = std::fopen(tokens.c_str(), "w");
    ASSERT_NE(f, nullptr);
    const std::string text = Sha256Hex("dash-a") + " till-a\n" + Sha256Hex("dash-b") + " till-b\n";
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  }
  ScangateProcess server({"--tokens-file=" + tokens.string(), "--rate-limit=5", "--rate-burst=5"});
  ASSERT_TRUE(server.Start());
  HttpClient c(server.port());
  const std::string key = UniqueKey("dashboard-flood");
  int limited = 0;
  for (int i = 0; i < 40; ++i) {
    const HttpResponse r = c.Request("POST", "/observe", ObserveBody(key), "application/json",
                                     {{"Authorization", "Bearer dash-a"}});
    if (r.status == 429) ++limited;
    if (!r.keep_alive) c.Reconnect();  // a 429 closes the connection (its body is never read)
  }
  ASSERT_GT(limited, 0);
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port()) + "/dashboard";
  const fs::path shot = ArtifactDir() / "dashboard-rate-limit.png";
  fs::remove(shot);
  RunChromium(url, "--screenshot=" + shot.string(), "1280,1000");
  std::printf("dashboard screenshot (rate limit): %s\n", shot.c_str());
  const std::string dom = RunChromium(url, "--dump-dom", "1280,800");
  const std::string card = Tag(dom, "rate-card");
  ASSERT_NE(card, "") << dom.substr(0, 2000);
  EXPECT_EQ(card.find("hidden"), std::string::npos) << card;
  EXPECT_NE(dom.find("<dt title=\"till-a\">till-a</dt><dd class=\"num\" data-value=\"" + std::to_string(limited) +
                     "\">"),
            std::string::npos)
      << dom.substr(dom.find("rate-card"), 1500);
  EXPECT_EQ(dom.find(">till-b<"), std::string::npos);
  fs::remove(tokens);
}

// The page in Chromium shows what /stats says, and PostgreSQL going down.
TEST(Dashboard, RendersLiveStatsInChromium) {
  ASSERT_TRUE(fs::exists(Chromium())) << Chromium() << " is missing: bash scripts/deps.sh test installs chromium";
  ScangateProcess server({"--admin-listen=127.0.0.1:0", "--threads=2"});
  ASSERT_TRUE(server.Start());
  ASSERT_NE(server.admin_port(), 0);
  HttpClient main_port(server.port());
  HttpClient admin(server.admin_port());
  EXPECT_EQ(main_port.Get("/dashboard").status, 404);  // like /metrics: only on the admin listener
  const std::string url = "http://127.0.0.1:" + std::to_string(server.admin_port()) + "/dashboard";

  // Keys already in the shared database were warm-loaded: count from a settled baseline.
  // The cached filter sample may predate the end of the warm start: wait for one taken after now.
  std::uint64_t before = 0;
  const double asked = admin.Get("/stats").json().at("uptime_seconds").to_number<double>();
  for (const auto deadline = Clock::now() + kSettleTimeout;; std::this_thread::sleep_for(kPoll)) {
    ASSERT_LT(Clock::now(), deadline) << "the filter sample was not refreshed";
    const auto s = admin.Get("/stats").json();
    const auto& f = s.at("filter").as_object();
    if (s.at("uptime_seconds").to_number<double>() - f.at("snapshot_age_seconds").to_number<double>() > asked) {
      before = f.at("keys").to_number<std::uint64_t>();
      break;
    }
  }
  std::vector<std::string> keys;
  for (int i = 0; i < kNewKeys; ++i) {
    keys.push_back(UniqueKey("dashboard"));
    ASSERT_EQ(main_port.Post("/observe", ObserveBody(keys.back())).status, 201);
  }
  for (int i = 0; i < kRepeats; ++i) ASSERT_EQ(main_port.Post("/observe", ObserveBody(keys[i])).status, 200);
  const std::uint64_t want_keys = before + kNewKeys;
  std::uint64_t stats_keys = 0;
  for (const auto deadline = Clock::now() + kSettleTimeout; Clock::now() < deadline;) {
    if ((stats_keys = StatsKeys(admin)) == want_keys) break;
    std::this_thread::sleep_for(kPoll);
  }
  ASSERT_EQ(stats_keys, want_keys) << "/stats never counted the observed keys";

  RepeatLoad load(server.port(), keys);  // a live request rate while the page renders
  for (const auto& [size, name] : {std::pair{"1280,800", "dashboard-1280x800.png"},
                                   std::pair{"800,1100", "dashboard-800x1100.png"}}) {
    const fs::path shot = ArtifactDir() / name;
    fs::remove(shot);
    RunChromium(url, "--screenshot=" + shot.string(), size);
    ASSERT_TRUE(fs::exists(shot) && fs::file_size(shot) > 10'000) << "no screenshot at " << shot;
    std::printf("dashboard screenshot: %s\n", shot.c_str());
  }
  const std::string dom = RunChromium(url, "--dump-dom", "1280,800");
  ASSERT_NE(Tag(dom, "req-rate"), "") << "the page did not render:\n" << dom.substr(0, 2000);
  EXPECT_EQ(Attr(dom, "poll-state", "data-state"), "ok");
  EXPECT_EQ(Attr(dom, "pg-state", "data-state"), "up");
  EXPECT_GT(NumAttr(dom, "req-rate"), 0.0);
  EXPECT_EQ(NumAttr(dom, "filter-keys"), static_cast<double>(want_keys));
  // A fresh admin connection after the Chromium runs: the admin listener closes one that idled 5 s
  // (--admin-idle-timeout), as a browser or Prometheus would find and replace it.
  HttpClient admin_after(server.admin_port());
  EXPECT_EQ(StatsKeys(admin_after), want_keys);  // the repeats added no key
  EXPECT_GT(NumAttr(dom, "lat-p99"), 0.0);
  EXPECT_GE(NumAttr(dom, "lat-p99"), NumAttr(dom, "lat-p50"));
  EXPECT_GE(NumAttr(dom, "c-keys-written"), static_cast<double>(kNewKeys));
  EXPECT_NE(Tag(dom, "shard-strip"), "");
  EXPECT_NE(Tag(dom, "rate-card").find("hidden"), std::string::npos) << "no --rate-limit: no rate-limit card";
  EXPECT_EQ(load.new_verdicts(), 0);

  // PostgreSQL down: the page says so within a few seconds (a fresh key makes the writers notice).
  ClusterGuard guard;
  ASSERT_EQ(PgClusterStop(), 0) << "scripts/pg.sh stop failed";
  guard.stopped = true;
  std::string state;
  const auto t0 = Clock::now();
  std::optional<HttpClient> fresh;  // the load's repeats are answered from the recent set: a fresh key needs
                                    // PostgreSQL and makes the writers notice the outage (it gets 503)
  while (Clock::now() - t0 < kDownTimeout) {
    try {
      if (!fresh) fresh.emplace(server.port());
      if (!fresh->Post("/observe", ObserveBody(UniqueKey("dashboard-down"))).keep_alive) fresh.reset();
    } catch (const std::exception&) {
      fresh.reset();
    }
    state = Attr(RunChromium(url, "--dump-dom", "1280,800"), "pg-state", "data-state").value_or("<missing>");
    if (state == "down") break;
  }
  EXPECT_EQ(state, "down") << "the page did not show PostgreSQL down within " << kDownTimeout.count() << " s";
  EXPECT_FALSE(HttpClient(server.admin_port()).Get("/stats").json().at("pg").at("up").as_bool());
  const fs::path down_shot = ArtifactDir() / "dashboard-pg-down.png";
  RunChromium(url, "--screenshot=" + down_shot.string(), "1280,800");
  std::printf("dashboard screenshot (PostgreSQL down): %s\n", down_shot.c_str());

  ASSERT_EQ(PgClusterStart(), 0) << "scripts/pg.sh start failed";
  guard.stopped = false;
  bool ready = false;
  for (const auto deadline = Clock::now() + kRecoveryTimeout; !ready && Clock::now() < deadline;) {
    try {
      HttpClient probe(server.admin_port());
      ready = probe.Get("/readyz").status == 200;
    } catch (const std::exception&) {
    }
    if (!ready) std::this_thread::sleep_for(kPoll);
  }
  EXPECT_TRUE(ready) << "scangate did not recover after PostgreSQL restarted";
  load.Stop();
  EXPECT_EQ(load.new_verdicts(), 0);
  EXPECT_EQ(server.Stop(), 0);
}

}  // namespace
}  // namespace scangate::it
