// Black-box integration harness for the scangate service: starts the real `scangate` binary against
// the throwaway PostgreSQL of the CTest fixture "pg", talks to it over real TCP (Boost.Beast, no
// server code linked in) and checks PostgreSQL directly (libpqxx). Every wait is bounded and fails
// with a clear message; the server's log is kept and printed when a test fails.
// Used by tests/server/service_*_test.cc; the server's own unit tests live in tests/server/unit.cmake.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json.hpp>
#include <gtest/gtest.h>
#include <pqxx/pqxx>
#include <sys/types.h>

namespace scangate::it {

// Bounds of every wait in the harness. They bound failure detection only; no test asserts speed.
constexpr std::chrono::seconds kStartupTimeout{30};   // port file + GET /readyz == 200
constexpr std::chrono::seconds kStopTimeout{30};      // SIGTERM -> exit
constexpr std::chrono::seconds kIoTimeout{20};        // one HTTP request/response exchange
// With an LD_PRELOAD, Start() first runs `scangate --version` under the same environment: a preload that does not
// combine with the build's runtime (a sanitizer's) hangs there, and this bound names it instead of a port-file wait.
constexpr std::chrono::seconds kPreloadProbeTimeout{10};

// Where the fixture and the binary are (from the environment CTest sets via scangate_pg_test).
struct TestEnv {
  std::string pg_url;
  std::string pg_port;
  std::string pgdata;
  std::string source_dir;
  std::string server_binary;
};
const TestEnv& Env();  // aborts the test binary with a clear message when the environment is missing

std::string ReadFile(const std::string& path);  // "" when missing
std::string Sha256Hex(std::string_view key);    // 64 lowercase hex chars (OpenSSL, independent of core/)
std::string RandomHex(std::size_t bytes);
// A key unique to this test-binary run: "it-<random64hex>-<tag>-<n>".
std::string UniqueKey(std::string_view tag);
// Minimal JSON string escaping for building request bodies.
std::string JsonString(std::string_view s);
std::string ObserveBody(std::string_view key);
// {"keys":[...]} for /observe/batch, the keys in order.
std::string BatchBody(const std::vector<std::string>& keys);

// The digest scheme a database records (sql/014, issue 55) refuses an instance with another secret or --keys. The
// cases of one test binary share one database and mix them, so Start() forgets the recorded scheme of the database
// it starts on (--database-url, else the test's) before the exec, unless a test keeps it: KeepDigestScheme(true)
// (service_digest_scheme_test, which tests the refusal). Call from the test's thread.
void KeepDigestScheme(bool keep);
// Deletes the recorded scheme of `url`'s database (nothing when none). Throws pqxx errors.
void ForgetDigestScheme(const std::string& url);

// A running scangate process. Destruction kills it (SIGKILL) if it is still running.
class ScangateProcess {
 public:
  explicit ScangateProcess(std::vector<std::string> extra_flags = {});
  ~ScangateProcess();
  ScangateProcess(const ScangateProcess&) = delete;
  ScangateProcess& operator=(const ScangateProcess&) = delete;

  // An environment variable for the child only (the test process's own environment is untouched), e.g.
  // LD_PRELOAD. Applies to every later Start().
  void SetEnv(std::string name, std::string value);
  // fork/exec, wait for the port file, then for GET /readyz == 200. On failure the message
  // includes the tail of the server log. With an LD_PRELOAD set, a child that hangs at start under it is named
  // as such (kPreloadProbeTimeout).
  ::testing::AssertionResult Start();
  // SIGTERM and wait; returns the exit status (>= 0) or -signal when killed by a signal,
  // or -1000 when it did not exit within kStopTimeout (then it is killed).
  int Stop();
  void Kill();  // SIGKILL and reap
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }  // for signals other than Stop's (SIGHUP); -1 when not running
  std::uint16_t port() const { return port_; }
  std::uint16_t admin_port() const { return admin_port_; }  // with --admin-listen (from the log), else 0
  const std::string& log_path() const { return log_path_; }
  // The --journal-dir it runs with (its own flag, else the one the harness gives it).
  std::string journal_dir() const;
  std::string Log() const { return ReadFile(log_path_); }
  std::string LogTail(std::size_t max_bytes = 8000) const;
  // JSON log lines whose "event" equals `event`.
  std::vector<boost::json::object> LogEvents(std::string_view event) const;

 private:
  // The child's environment: this process's, with env_ set over it ("NAME=value" each).
  std::vector<std::string> ChildEnvironment() const;
  // With LD_PRELOAD in env_: `scangate --version` under it exits 0 within kPreloadProbeTimeout, else a failure
  // that says the preload hangs or breaks the binary.
  ::testing::AssertionResult ProbePreload(const std::vector<std::string>& environment) const;

  std::vector<std::string> flags_;
  std::map<std::string, std::string> env_;
  std::string dir_;
  std::string log_path_;
  std::string port_path_;
  pid_t pid_ = -1;
  std::uint16_t port_ = 0;
  std::uint16_t admin_port_ = 0;
  bool log_printed_ = false;
};

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  bool keep_alive = false;
  std::string header(const std::string& lower_name) const;
  bool has_header(const std::string& lower_name) const { return headers.count(lower_name) != 0; }
  // Parsed body; an empty object (and a test failure) when the body is not a JSON object.
  boost::json::object json() const;
};
std::ostream& operator<<(std::ostream& os, const HttpResponse& r);

// A keep-alive HTTP/1.1 connection to 127.0.0.1:port. Errors throw std::runtime_error (a closed
// connection, a timeout); the caller decides whether that is a failure.
class HttpClient {
 public:
  explicit HttpClient(std::uint16_t port);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // `content_type` nullopt sends no Content-Type header.
  HttpResponse Post(const std::string& target, const std::string& body,
                    std::optional<std::string> content_type = std::string("application/json"));
  HttpResponse Get(const std::string& target);
  HttpResponse Request(const std::string& method, const std::string& target, const std::string& body,
                       std::optional<std::string> content_type,
                       const std::vector<std::pair<std::string, std::string>>& extra_headers = {});
  // Raw access for pipelining: write bytes as one write, then read responses one by one.
  void SendRaw(const std::string& bytes);
  HttpResponse ReadResponse();
  void Reconnect();
  bool is_open() const;
  std::uint16_t local_port() const;  // identifies the TCP connection
  int connects() const { return connects_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::uint16_t port_;
  int connects_ = 0;
};

// One /observe answer, read: the status, the verdict body's fields ("" / empty when absent) and the whole
// response as text for failure messages.
struct ObserveAnswer {
  int status = 0;
  std::string verdict, via, digest, first_seen;
  std::vector<std::string> mismatch;  // --keys=gs1
  std::string text;
};
ObserveAnswer ReadObserveAnswer(const HttpResponse& r);
// POST /observe {"key": key} and its answer.
ObserveAnswer ObserveKey(HttpClient& c, const std::string& key);

// Send arbitrary bytes on a fresh connection to 127.0.0.1:port, read until the server closes or `timeout` passes.
// `source`: another local IPv4 address to connect from (e.g. "127.0.0.2", a load balancer's); "" = the default.
std::string RawExchange(std::uint16_t port, const std::string& bytes,
                        std::chrono::milliseconds timeout = std::chrono::milliseconds(3000),
                        std::string_view source = {});

// Checks one problem+json error response: status, content type, type slug, title, detail.
::testing::AssertionResult IsProblem(const HttpResponse& r, int status, std::string_view slug);

// Direct PostgreSQL access for checking what the service wrote.
class Pg {
 public:
  Pg();  // connects to Env().pg_url
  std::int64_t CountDigest(const std::string& hex);
  // How many of `hexes` are present (one query).
  std::int64_t CountDigests(const std::vector<std::string>& hexes);
  std::optional<std::string> SourceOf(const std::string& hex);
  std::int64_t TotalRows();
  // Polls (up to 60 s) until some backend waits for a lock — e.g. a writer blocked behind a test's
  // uncommitted row. False if none did.
  bool WaitForLockWaiter();
  pqxx::connection& conn() { return *conn_; }

 private:
  std::unique_ptr<pqxx::connection> conn_;
};

// An uncommitted row for each key's digest, in a transaction of the test's own: a writer inserting one of them
// blocks on its lock until Release() (rolled back: the writer's own insert then goes through). Stalls the
// write path for as long as a test wants, without timing.
class RowBlocker {
 public:
  explicit RowBlocker(const std::vector<std::string>& keys);
  void Release();

 private:
  pqxx::connection conn_;
  pqxx::work tx_;
};

// A write stall: one transaction of the test's own holds LOCK TABLE scan_keys IN SHARE ROW EXCLUSIVE MODE until
// Release() (or destruction): inserts and COPY wait, reads go on, other tables (the peers', the scheme's) are
// written as usual.
class TableLock {
 public:
  TableLock() : conn_(Env().pg_url), tx_(conn_) { tx_.exec0("LOCK TABLE scan_keys IN SHARE ROW EXCLUSIVE MODE"); }
  void Release() { tx_.abort(); }

 private:
  pqxx::connection conn_;
  pqxx::work tx_;
};

// Every key POSTed to /observe at `port` at once, one connection and thread per key (a request that waits does not
// hold up the others, and the instance's journal takes them in a few groups: `n` sequential requests under a loaded
// machine can outlast --max-commit-lag on their own). Counted by status; a 503 without Retry-After counts as -503,
// no answer at all (nothing listens) as -1.
std::map<int, int> ObserveConcurrently(std::uint16_t port, const std::vector<std::string>& keys);
// "201:3 503:2 " for failure messages.
std::string Describe(const std::map<int, int>& by_status);

// A fresh directory "/tmp/scangate-<tag>.XXXXXX" (journals of the tests that name theirs, e.g. to restart on it).
std::string TempDir(const char* tag);
// `n` keys unique to this run (UniqueKey).
std::vector<std::string> UniqueKeys(int n, std::string_view tag);
// /stats "follower" of the first followed database of the instance at `c` ({} without one).
boost::json::object FollowerOf(HttpClient& c);
// Polls /stats (bounded, 20 s) until that follower is fresh / the journal's backlog is 0 (every key the instance
// answered new is committed in PostgreSQL). False when the bound passed.
bool WaitFollowerFresh(HttpClient& c);
bool WaitJournalDrained(HttpClient& c);
// ... until the instance's warm start finished (/stats filter.warm): its filter's negatives are answers from then on.
bool WaitWarm(HttpClient& c);

// `scangate --retire-instance=<id> --database-url=<the test's>` for the instance whose journal is `journal_dir` (its
// `instance` file; issue 42): the operator's command for an instance gone for good, so the others stop waiting for
// it. Returns the command's exit status (0 retired, 3 nothing running to retire); its output goes to stderr.
int RetireInstance(const std::string& journal_dir);

// The shared throwaway cluster, via scripts/pg.sh. Both return the shell exit status.
int PgClusterStop();
int PgClusterStart();

// Value of an unlabelled Prometheus sample `name` in a /metrics text; nullopt when absent.
std::optional<double> MetricValue(const std::string& metrics_text, std::string_view name);
// GET /metrics on `c` and the value of `name` (a labelled sample as `name{l="v"}`); a test failure and -1 when
// the request fails or the sample is absent.
double ScrapeMetric(HttpClient& c, std::string_view name);

// What an instance decided in PostgreSQL and what from memory, from its /stats (issue 44): PostgreSQL's outcomes
// (a repeat decided there is one more duplicate), the recent set's duplicate hits and replayed retries, and every
// replayed retry. A counter the binary does not report reads 0.
struct DecidedWhere {
  std::uint64_t pg_inserted = 0, pg_duplicates = 0, recent_hits = 0, recent_replays = 0, replays = 0;
};
DecidedWhere ReadDecidedWhere(HttpClient& c);

}  // namespace scangate::it
