// Black-box integration harness for the scangate service (see harness.h).
#include "harness.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace scangate::it {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr std::uint64_t kMaxResponseBodyBytes = 64ull << 20;  // far above any scangate response
constexpr auto kPollInterval = std::chrono::milliseconds(20);

std::string Getenv(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

// Runs the io_context until the one pending operation started by `start` completes.
template <class Start>
void RunOne(net::io_context& ioc, Start&& start) {
  ioc.restart();
  start();
  ioc.run();
}

HttpResponse FromMessage(http::response<http::string_body>& msg) {
  HttpResponse r;
  r.status = static_cast<int>(msg.result_int());
  for (const auto& field : msg) {
    std::string name = Lower(std::string(field.name_string()));
    auto [it, inserted] = r.headers.emplace(name, std::string(field.value()));
    if (!inserted) it->second += ", " + std::string(field.value());
  }
  r.body = std::move(msg.body());
  r.keep_alive = msg.keep_alive();
  return r;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Environment and small helpers

const TestEnv& Env() {
  static const TestEnv env = [] {
    TestEnv e;
    const std::string pg_dir = Getenv("SCANGATE_TEST_PG_DIR");
    if (pg_dir.empty()) {
      std::cerr << "SCANGATE_TEST_PG_DIR is not set: run this test through ctest (fixture \"pg\"), e.g.\n"
                   "  ctest --test-dir <build> -R service_ --output-on-failure\n";
      std::abort();
    }
    e.pg_url = Trim(ReadFile(pg_dir + "/url"));
    e.pg_port = Trim(ReadFile(pg_dir + "/port"));
    e.pgdata = Trim(ReadFile(pg_dir + "/pgdata"));
    if (e.pg_url.empty() || e.pg_port.empty() || e.pgdata.empty()) {
      std::cerr << "fixture files url/port/pgdata missing in " << pg_dir << " (did pg_start run?)\n";
      std::abort();
    }
    e.source_dir = Getenv("SCANGATE_SOURCE_DIR");
    e.server_binary = Getenv("SCANGATE_IT_SERVER");  // manual override
#ifdef SCANGATE_SERVER_BINARY
    if (e.server_binary.empty()) e.server_binary = SCANGATE_SERVER_BINARY;
#endif
    if (e.server_binary.empty()) e.server_binary = Getenv("SCANGATE_BINARY_DIR") + "/server/scangate";
    if (::access(e.server_binary.c_str(), X_OK) != 0) {
      std::cerr << "scangate binary not found or not executable: " << e.server_binary
                << " (build target scangate first)\n";
      std::abort();
    }
    return e;
  }();
  return env;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Sha256Hex(std::string_view key) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(key.data(), key.size(), md, &len, EVP_sha256(), nullptr) != 1 || len != 32) {
    throw std::runtime_error("EVP_Digest failed");
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(64);
  for (unsigned i = 0; i < len; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 0xf];
  }
  return out;
}

std::string RandomHex(std::size_t bytes) {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}() ^ (static_cast<std::uint64_t>(::getpid()) << 32) ^
                             static_cast<std::uint64_t>(Clock::now().time_since_epoch().count())};
  static constexpr char kHex[] = "0123456789abcdef";
  std::lock_guard lock(mu);
  std::string out;
  for (std::size_t i = 0; i < bytes; ++i) {
    const auto b = static_cast<unsigned>(rng() & 0xff);
    out += kHex[b >> 4];
    out += kHex[b & 0xf];
  }
  return out;
}

std::string UniqueKey(std::string_view tag) {
  static const std::string run = RandomHex(32);
  static std::atomic<std::uint64_t> n{0};
  return "it-" + run + "-" + std::string(tag) + "-" + std::to_string(n.fetch_add(1));
}

std::string JsonString(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string ObserveBody(std::string_view key) { return "{\"key\":" + JsonString(key) + "}"; }

std::string BatchBody(const std::vector<std::string>& keys) {
  std::string b = "{\"keys\":[";
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (i != 0) b += ',';
    b += JsonString(keys[i]);
  }
  return b + "]}";
}

// ---------------------------------------------------------------------------------------------
// ScangateProcess

ScangateProcess::ScangateProcess(std::vector<std::string> extra_flags) : flags_(std::move(extra_flags)) {
  char tmpl[] = "/tmp/scangate-it.XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  log_path_ = dir_ + "/scangate.log";
  port_path_ = dir_ + "/port";
}

ScangateProcess::~ScangateProcess() {
  if (pid_ > 0) Kill();
  if (::testing::Test::HasFailure() && !log_printed_) {
    std::cerr << "---- scangate log (" << log_path_ << "), tail ----\n" << LogTail() << "\n---- end of log ----\n";
  } else if (!::testing::Test::HasFailure()) {
    std::remove(log_path_.c_str());
    std::remove(port_path_.c_str());
    std::remove((dir_ + "/preload-probe.log").c_str());
    std::error_code ec;
    std::filesystem::remove_all(dir_ + "/journal", ec);
    ::rmdir(dir_.c_str());
  }
}

std::string ScangateProcess::LogTail(std::size_t max_bytes) const {
  std::string log = Log();
  if (log.size() > max_bytes) log = "...\n" + log.substr(log.size() - max_bytes);
  return log;
}

std::vector<boost::json::object> ScangateProcess::LogEvents(std::string_view event) const {
  std::vector<boost::json::object> out;
  std::istringstream in(Log());
  std::string line;
  while (std::getline(in, line)) {
    boost::system::error_code ec;
    boost::json::value v = boost::json::parse(line, ec);
    if (ec || !v.is_object()) continue;
    const auto* e = v.as_object().if_contains("event");
    if (e != nullptr && e->is_string() && e->as_string() == event) out.push_back(v.as_object());
  }
  return out;
}

std::string ScangateProcess::journal_dir() const {
  for (const auto& f : flags_) {
    if (f.rfind("--journal-dir=", 0) == 0) return f.substr(std::string("--journal-dir=").size());
  }
  return dir_ + "/journal";
}

void ScangateProcess::SetEnv(std::string name, std::string value) { env_[std::move(name)] = std::move(value); }

std::vector<std::string> ScangateProcess::ChildEnvironment() const {
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const std::string name(entry.substr(0, entry.find('=')));
    if (env_.count(name) == 0) out.emplace_back(entry);
  }
  for (const auto& [name, value] : env_) out.push_back(name + "=" + value);
  return out;
}

namespace {

// fork + execve with stdin from /dev/null and stdout/stderr appended to `log_path`; the child dies with the
// test process. Everything the child touches is built before fork (a multithreaded parent: no allocation after).
pid_t Spawn(std::vector<std::string> args, std::vector<std::string> environment, const std::string& log_path) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (auto& e : environment) envp.push_back(e.data());
  envp.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  // Child: die with the test process; stdout and stderr go to the log file.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(126);
  const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  const int devnull = ::open("/dev/null", O_RDONLY);
  if (fd < 0 || devnull < 0) ::_exit(125);
  ::dup2(devnull, 0);
  ::dup2(fd, 1);
  ::dup2(fd, 2);
  ::execve(argv[0], argv.data(), envp.data());
  std::fprintf(stderr, "harness: execve %s failed: %s\n", argv[0], std::strerror(errno));
  ::_exit(127);
}

}  // namespace

::testing::AssertionResult ScangateProcess::ProbePreload(const std::vector<std::string>& environment) const {
  const auto preload = env_.find("LD_PRELOAD");
  if (preload == env_.end()) return ::testing::AssertionSuccess();
  const std::string probe_log = dir_ + "/preload-probe.log";
  std::remove(probe_log.c_str());
  const pid_t pid = Spawn({Env().server_binary, "--version"}, environment, probe_log);
  if (pid < 0) return ::testing::AssertionFailure() << "fork failed: " << std::strerror(errno);
  const auto deadline = Clock::now() + kPreloadProbeTimeout;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) != pid) {
    if (Clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return ::testing::AssertionFailure()
             << "scangate hangs at start under LD_PRELOAD=" << preload->second << ": `" << Env().server_binary
             << " --version` did not exit within " << kPreloadProbeTimeout.count()
             << " s. The preloaded library and this build's runtime (a sanitizer's?) do not combine. Its output:\n"
             << ReadFile(probe_log);
    }
    std::this_thread::sleep_for(kPollInterval);
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return ::testing::AssertionFailure() << "scangate --version fails under LD_PRELOAD=" << preload->second
                                         << " (wait status " << status << "). Its output:\n"
                                         << ReadFile(probe_log);
  }
  return ::testing::AssertionSuccess();
}

namespace {
bool keep_digest_scheme = false;
}  // namespace

void KeepDigestScheme(bool keep) { keep_digest_scheme = keep; }

void ForgetDigestScheme(const std::string& url) {
  pqxx::connection conn(url);
  pqxx::work tx(conn);
  tx.exec("DO $$ BEGIN IF to_regclass('scangate_digest_scheme') IS NOT NULL THEN "
          "DELETE FROM scangate_digest_scheme; END IF; END $$");
  tx.commit();
}

::testing::AssertionResult ScangateProcess::Start() {
  if (pid_ > 0) return ::testing::AssertionFailure() << "already running";
  const TestEnv& env = Env();
  const std::vector<std::string> environment = ChildEnvironment();
  if (auto probed = ProbePreload(environment); !probed) return probed;
  if (!keep_digest_scheme) {
    std::string url = env.pg_url;
    for (const auto& f : flags_) {
      if (f.rfind("--database-url=", 0) == 0) url = f.substr(std::string("--database-url=").size());
    }
    try {
      ForgetDigestScheme(url);
    } catch (const std::exception&) {
      // PostgreSQL down or not set up (outage tests, --partitions): nothing recorded can be forgotten there.
    }
  }
  std::remove(port_path_.c_str());
  port_ = 0;

  auto has_flag = [&](std::string_view name) {
    for (const auto& f : flags_) {
      if (f.rfind(std::string(name) + "=", 0) == 0 || f == name) return true;
    }
    return false;
  };
  std::vector<std::string> args{env.server_binary};
  if (!has_flag("--database-url")) args.push_back("--database-url=" + env.pg_url);
  if (!has_flag("--listen")) args.push_back("--listen=127.0.0.1");
  args.push_back("--port=0");
  args.push_back("--port-file=" + port_path_);
  if (!has_flag("--threads")) args.push_back("--threads=2");
  // ack=filter journals into a directory of its own per process unless the test names one (e.g. to restart on it).
  if (!has_flag("--journal-dir")) args.push_back("--journal-dir=" + dir_ + "/journal");
  for (const auto& f : flags_) args.push_back(f);

  {  // a header line in the log file, so a reader knows which run it is
    std::ofstream log(log_path_, std::ios::app);
    log << "# harness: exec";
    for (const auto& a : args) log << ' ' << a;
    log << '\n';
  }

  const pid_t pid = Spawn(args, environment, log_path_);
  if (pid < 0) return ::testing::AssertionFailure() << "fork failed: " << std::strerror(errno);
  pid_ = pid;

  const auto deadline = Clock::now() + kStartupTimeout;
  auto exited = [&]() -> std::optional<int> {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    }
    return std::nullopt;
  };
  auto failure = [&](const std::string& what) {
    log_printed_ = true;
    return ::testing::AssertionFailure() << "scangate did not start: " << what << "\n---- log " << log_path_
                                         << " ----\n"
                                         << LogTail() << "\n---- end of log ----";
  };

  // 1. the port file: the port number and a newline, written once listening
  while (true) {
    if (auto st = exited()) return failure("process exited with status " + std::to_string(*st));
    const std::string content = ReadFile(port_path_);
    if (!content.empty() && content.back() == '\n') {
      try {
        const int p = std::stoi(content);
        if (p <= 0 || p > 65535) return failure("port file holds an invalid port: " + content);
        port_ = static_cast<std::uint16_t>(p);
        break;
      } catch (const std::exception&) {
        return failure("port file holds no number: " + content);
      }
    }
    if (Clock::now() > deadline) {
      std::string what = "no port file after " + std::to_string(kStartupTimeout.count()) + " s";
      const std::string wchan = ReadFile("/proc/" + std::to_string(pid_) + "/wchan");
      if (!wchan.empty()) what += " (the process is alive, waiting in " + wchan + ")";
      if (const auto p = env_.find("LD_PRELOAD"); p != env_.end()) what += "; it runs under LD_PRELOAD=" + p->second;
      return failure(what);
    }
    std::this_thread::sleep_for(kPollInterval);
  }

  // 2. readiness: PostgreSQL up and the filter warm (asked on the admin listener with --admin-listen:
  //    the main port answers /readyz with 404 then)
  const bool admin_split = std::any_of(flags_.begin(), flags_.end(),
                                       [](const std::string& f) { return f.rfind("--admin-listen", 0) == 0; });
  admin_port_ = 0;
  std::string last;
  while (true) {
    if (auto st = exited()) return failure("process exited with status " + std::to_string(*st));
    if (admin_split && admin_port_ == 0) {
      for (const auto& e : LogEvents("listening")) {
        if (e.contains("admin_port")) admin_port_ = static_cast<std::uint16_t>(e.at("admin_port").to_number<int>());
      }
    }
    try {
      if (admin_split && admin_port_ == 0) throw std::runtime_error("no admin_port in the listening log line yet");
      HttpClient client(admin_split ? admin_port_ : port_);
      HttpResponse r = client.Get("/readyz");
      if (r.status == 200) return ::testing::AssertionSuccess();
      last = "GET /readyz -> " + std::to_string(r.status) + " " + r.body;
    } catch (const std::exception& e) {
      last = std::string("GET /readyz failed: ") + e.what();
    }
    if (Clock::now() > deadline) {
      return failure("not ready after " + std::to_string(kStartupTimeout.count()) + " s; last: " + last);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

int ScangateProcess::Stop() {
  if (pid_ <= 0) return -1001;
  ::kill(pid_, SIGTERM);
  const auto deadline = Clock::now() + kStopTimeout;
  while (Clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    }
    std::this_thread::sleep_for(kPollInterval);
  }
  Kill();
  return -1000;
}

void ScangateProcess::Kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

// ---------------------------------------------------------------------------------------------
// HTTP

std::string HttpResponse::header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? std::string() : it->second;
}

boost::json::object HttpResponse::json() const {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(body, ec);
  if (ec || !v.is_object()) {
    ADD_FAILURE() << "response body is not a JSON object: " << *this;
    return {};
  }
  return v.as_object();
}

std::ostream& operator<<(std::ostream& os, const HttpResponse& r) {
  os << "HTTP " << r.status;
  for (const auto& [k, v] : r.headers) os << "\n  " << k << ": " << v;
  std::string body = r.body.size() > 600 ? r.body.substr(0, 600) + "..." : r.body;
  return os << "\n  body: " << body;
}

struct HttpClient::Impl {
  net::io_context ioc;
  beast::tcp_stream stream{ioc};
  beast::flat_buffer buffer;
};

HttpClient::HttpClient(std::uint16_t port) : port_(port) { Reconnect(); }
HttpClient::~HttpClient() = default;

void HttpClient::Reconnect() {
  impl_ = std::make_unique<Impl>();
  beast::error_code ec;
  impl_->stream.expires_after(kIoTimeout);
  RunOne(impl_->ioc, [&] {
    impl_->stream.async_connect(tcp::endpoint(net::ip::address_v4::loopback(), port_),
                                [&](beast::error_code e) { ec = e; });
  });
  if (ec) throw std::runtime_error("connect to 127.0.0.1:" + std::to_string(port_) + ": " + ec.message());
  impl_->stream.socket().set_option(tcp::no_delay(true));
  ++connects_;
}

bool HttpClient::is_open() const { return impl_ && impl_->stream.socket().is_open(); }

std::uint16_t HttpClient::local_port() const {
  beast::error_code ec;
  auto ep = impl_->stream.socket().local_endpoint(ec);
  return ec ? 0 : ep.port();
}

void HttpClient::SendRaw(const std::string& bytes) {
  beast::error_code ec;
  impl_->stream.expires_after(kIoTimeout);
  RunOne(impl_->ioc, [&] {
    net::async_write(impl_->stream, net::buffer(bytes), [&](beast::error_code e, std::size_t) { ec = e; });
  });
  if (ec) throw std::runtime_error("write: " + ec.message());
}

HttpResponse HttpClient::ReadResponse() {
  http::response_parser<http::string_body> parser;
  parser.body_limit(kMaxResponseBodyBytes);
  beast::error_code ec;
  impl_->stream.expires_after(kIoTimeout);
  RunOne(impl_->ioc, [&] {
    http::async_read(impl_->stream, impl_->buffer, parser, [&](beast::error_code e, std::size_t) { ec = e; });
  });
  if (ec) throw std::runtime_error("read response: " + ec.message());
  return FromMessage(parser.get());
}

HttpResponse HttpClient::Request(const std::string& method, const std::string& target, const std::string& body,
                                 std::optional<std::string> content_type,
                                 const std::vector<std::pair<std::string, std::string>>& extra_headers) {
  http::request<http::string_body> req;
  req.method_string(method);
  req.target(target);
  req.version(11);
  req.set(http::field::host, "127.0.0.1:" + std::to_string(port_));
  req.set(http::field::user_agent, "scangate-it");
  if (content_type) req.set(http::field::content_type, *content_type);
  for (const auto& [k, v] : extra_headers) req.set(k, v);
  req.body() = body;
  if (method == "POST" || method == "PUT" || !body.empty()) req.prepare_payload();

  beast::error_code ec;
  impl_->stream.expires_after(kIoTimeout);
  RunOne(impl_->ioc, [&] {
    http::async_write(impl_->stream, req, [&](beast::error_code e, std::size_t) { ec = e; });
  });
  if (ec) throw std::runtime_error(method + " " + target + ": write: " + ec.message());
  return ReadResponse();
}

HttpResponse HttpClient::Post(const std::string& target, const std::string& body,
                              std::optional<std::string> content_type) {
  return Request("POST", target, body, std::move(content_type));
}

HttpResponse HttpClient::Get(const std::string& target) { return Request("GET", target, "", std::nullopt); }

std::string RawExchange(std::uint16_t port, const std::string& bytes, std::chrono::milliseconds timeout,
                        std::string_view source) {
  net::io_context ioc;
  beast::tcp_stream stream(ioc);
  beast::error_code ec;
  if (!source.empty()) {
    stream.socket().open(tcp::v4());
    stream.socket().bind(tcp::endpoint(net::ip::make_address(std::string(source)), 0));
  }
  stream.expires_after(kIoTimeout);
  RunOne(ioc, [&] {
    stream.async_connect(tcp::endpoint(net::ip::address_v4::loopback(), port), [&](beast::error_code e) { ec = e; });
  });
  if (ec) throw std::runtime_error("connect: " + ec.message());
  stream.expires_after(kIoTimeout);
  RunOne(ioc, [&] {
    net::async_write(stream, net::buffer(bytes), [&](beast::error_code e, std::size_t) { ec = e; });
  });
  // A write error (the server closed early, e.g. after 431) is fine: read what it sent.
  std::string out;
  stream.expires_at(Clock::now() + timeout);
  char buf[16384];
  while (true) {
    std::size_t n = 0;
    RunOne(ioc, [&] {
      stream.async_read_some(net::buffer(buf), [&](beast::error_code e, std::size_t got) {
        ec = e;
        n = got;
      });
    });
    out.append(buf, n);
    if (ec) break;  // eof, reset or timeout
  }
  return out;
}

::testing::AssertionResult IsProblem(const HttpResponse& r, int status, std::string_view slug) {
  if (r.status != status) return ::testing::AssertionFailure() << "expected status " << status << ", got " << r;
  const std::string ct = Lower(r.header("content-type"));
  if (ct.rfind("application/problem+json", 0) != 0) {
    return ::testing::AssertionFailure() << "content type is not application/problem+json: " << r;
  }
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(r.body, ec);
  if (ec || !v.is_object()) return ::testing::AssertionFailure() << "problem body is not a JSON object: " << r;
  const auto& o = v.as_object();
  const std::string want_type = "urn:scangate:problem:" + std::string(slug);
  const auto* type = o.if_contains("type");
  if (type == nullptr || !type->is_string() || type->as_string() != want_type) {
    return ::testing::AssertionFailure() << "problem type is not " << want_type << ": " << r;
  }
  const auto* title = o.if_contains("title");
  if (title == nullptr || !title->is_string() || title->as_string().empty()) {
    return ::testing::AssertionFailure() << "problem has no title: " << r;
  }
  const auto* st = o.if_contains("status");
  if (st == nullptr || !st->is_int64() || st->as_int64() != status) {
    return ::testing::AssertionFailure() << "problem status field is not " << status << ": " << r;
  }
  const auto* detail = o.if_contains("detail");
  if (detail == nullptr || !detail->is_string()) {
    return ::testing::AssertionFailure() << "problem has no detail string: " << r;
  }
  return ::testing::AssertionSuccess();
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL

Pg::Pg() : conn_(std::make_unique<pqxx::connection>(Env().pg_url)) {}

RowBlocker::RowBlocker(const std::vector<std::string>& keys) : conn_(Env().pg_url), tx_(conn_) {
  for (const auto& k : keys) {
    tx_.exec_params0("INSERT INTO scan_keys (digest, seen_by) VALUES (scangate_stored_digest(decode($1, 'hex')), 'blocker')", Sha256Hex(k));
  }
}

void RowBlocker::Release() { tx_.abort(); }

bool Pg::WaitForLockWaiter() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    pqxx::nontransaction tx(*conn_);
    // This database's waiters only: other tests share the cluster (fixture "pg"), each in a database of its own;
    // and client backends only: a follower's walsender creating its slot waits for running transactions too.
    if (tx.exec1("SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                 "WHERE NOT l.granted AND a.datname = current_database() AND a.backend_type = 'client backend'")[0]
            .as<int>() > 0) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

std::int64_t Pg::CountDigest(const std::string& hex) {
  pqxx::nontransaction tx(*conn_);
  return tx.exec_params("SELECT count(*) FROM scan_keys WHERE digest = scangate_stored_digest(decode($1, 'hex'))", hex)[0][0]
      .as<std::int64_t>();
}

std::int64_t Pg::CountDigests(const std::vector<std::string>& hexes) {
  std::string joined;
  for (const auto& h : hexes) {
    if (!joined.empty()) joined += ',';
    joined += h;
  }
  pqxx::nontransaction tx(*conn_);
  return tx
      .exec_params(
          "SELECT count(*) FROM scan_keys WHERE digest IN "
          "(SELECT DISTINCT scangate_stored_digest(decode(h, 'hex')) FROM unnest(string_to_array($1, ',')) AS h)",
          joined)[0][0]
      .as<std::int64_t>();
}

std::optional<std::string> Pg::SourceOf(const std::string& hex) {
  pqxx::nontransaction tx(*conn_);
  auto r = tx.exec_params("SELECT seen_by FROM scan_keys WHERE digest = scangate_stored_digest(decode($1, 'hex'))", hex);
  if (r.empty() || r[0][0].is_null()) return std::nullopt;
  return r[0][0].as<std::string>();
}

std::int64_t Pg::TotalRows() {
  pqxx::nontransaction tx(*conn_);
  return tx.exec("SELECT count(*) FROM scan_keys")[0][0].as<std::int64_t>();
}

// On fixture "pg" the cluster is shared by tests running side by side (tests/CMakeLists.txt): stopping it would
// fail them, so a test that does must be registered with scangate_pg_solo_test.
static bool RefuseSharedClusterControl(const char* what) {
  const char* shared = std::getenv("SCANGATE_TEST_PG_SHARED");
  if (shared == nullptr || std::string_view(shared) != "1") return false;
  std::cerr << "refused: " << what << " of the shared PostgreSQL of fixture \"pg\"; register this test with "
            << "scangate_pg_solo_test (tests/CMakeLists.txt)\n";
  return true;
}

std::string TempDir(const char* tag) {
  std::string tmpl = std::string("/tmp/scangate-") + tag + ".XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  return tmpl;
}

std::vector<std::string> UniqueKeys(int n, std::string_view tag) {
  std::vector<std::string> keys;
  for (int i = 0; i < n; ++i) keys.push_back(UniqueKey(tag));
  return keys;
}

std::map<int, int> ObserveConcurrently(std::uint16_t port, const std::vector<std::string>& keys) {
  std::mutex mu;
  std::map<int, int> by_status;
  std::vector<std::thread> threads;
  threads.reserve(keys.size());
  for (const auto& k : keys) {
    threads.emplace_back([&, k] {
      int status = -1;
      try {
        HttpClient c(port);
        const HttpResponse r = c.Post("/observe", ObserveBody(k));
        status = r.status == 503 && !r.has_header("retry-after") ? -503 : r.status;
      } catch (const std::exception&) {
      }
      const std::lock_guard<std::mutex> lock(mu);
      ++by_status[status];
    });
  }
  for (auto& t : threads) t.join();
  return by_status;
}

std::string Describe(const std::map<int, int>& by_status) {
  std::string s;
  for (const auto& [status, n] : by_status) s += std::to_string(status) + ":" + std::to_string(n) + " ";
  return s;
}

boost::json::object FollowerOf(HttpClient& c) {
  const boost::json::object stats = c.Get("/stats").json();
  if (!stats.contains("follower")) return {};
  const auto& dbs = stats.at("follower").at("databases").as_array();
  return dbs.empty() ? boost::json::object{} : dbs[0].as_object();
}

namespace {
constexpr auto kStatsWait = std::chrono::seconds(20);  // failure detection only

template <class Pred>
bool PollStats(Pred done) {
  const auto deadline = std::chrono::steady_clock::now() + kStatsWait;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}
}  // namespace

bool WaitFollowerFresh(HttpClient& c) {
  return PollStats([&c] {
    const boost::json::object f = FollowerOf(c);
    return f.contains("fresh") && f.at("fresh").as_bool();
  });
}

bool WaitWarm(HttpClient& c) {
  return PollStats([&c] {
    const boost::json::object o = c.Get("/stats").json();
    const auto* f = o.if_contains("filter");
    if (f == nullptr || !f->is_object()) return false;
    const auto* w = f->as_object().if_contains("warm");
    return w != nullptr && w->is_bool() && w->as_bool();
  });
}

bool WaitJournalDrained(HttpClient& c) {
  return PollStats([&c] {
    const boost::json::object stats = c.Get("/stats").json();
    return stats.contains("journal") && stats.at("journal").at("backlog").to_number<std::uint64_t>() == 0;
  });
}

namespace {
// Test isolation for the peers' watermark (issue 42): a journal owner a previous test case killed (kill -9, a failed
// assertion's teardown, a stop while PostgreSQL was down) leaves its row `running`, and every later instance on that
// database would then — correctly — hold its new keys for it (503). Tests run on one host, so a row of this host
// whose pid no longer exists is certainly such a leftover: it is retired before each test case, as an operator
// would retire an instance gone for good. Rows of live processes (a suite's shared server) are left alone.
void RetireLeftoverInstances() {
  const char* dir = std::getenv("SCANGATE_TEST_PG_DIR");
  if (dir == nullptr || *dir == '\0') return;  // not an integration test run
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) return;
  try {
    pqxx::connection c(Env().pg_url);
    pqxx::nontransaction tx(c);
    if (tx.exec1("SELECT to_regclass('scangate_instances') IS NULL")[0].as<bool>()) return;
    const pqxx::result rows = tx.exec_params(
        "SELECT DISTINCT instance_id::text, pid FROM scangate_instances WHERE state = 'running' AND host = $1 "
        "AND pid IS NOT NULL",
        std::string(host));
    for (const auto& row : rows) {
      const auto pid = static_cast<pid_t>(row[1].as<long>());
      if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to probe): left alone
      tx.exec_params("SELECT * FROM scangate_retire_instance($1::uuid)", row[0].as<std::string>());
      std::cerr << "# harness: retired instance " << row[0].as<std::string>() << " (pid " << pid
                << " gone) left running by an earlier test\n";
    }
  } catch (const std::exception& e) {
    std::cerr << "# harness: leftover instances not checked: " << e.what() << "\n";
  }
}

class RetireLeftoversListener : public ::testing::EmptyTestEventListener {
  void OnTestStart(const ::testing::TestInfo&) override { RetireLeftoverInstances(); }
};

// Registered once per test binary that links the harness, before main() runs the tests.
[[maybe_unused]] const bool kRetireLeftoversRegistered = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new RetireLeftoversListener);
  return true;
}();
}  // namespace

int RetireInstance(const std::string& journal_dir) {
  std::string id = ReadFile(journal_dir + "/instance");
  while (!id.empty() && id.back() == '\n') id.pop_back();
  if (id.empty()) {
    ADD_FAILURE() << "no instance file in " << journal_dir;
    return -1;
  }
  const TestEnv& env = Env();
  const std::string cmd = ShellQuote(env.server_binary) + " --retire-instance=" + ShellQuote(id) +
                          " --database-url=" + ShellQuote(env.pg_url) + " 1>&2";
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

int PgClusterStop() {
  if (RefuseSharedClusterControl("pg.sh stop")) return 1;
  const TestEnv& env = Env();
  const std::string cmd = ShellQuote(env.source_dir + "/scripts/pg.sh") + " stop " + ShellQuote(env.pgdata);
  return std::system(cmd.c_str());
}

int PgClusterStart() {
  if (RefuseSharedClusterControl("pg.sh start")) return 1;
  const TestEnv& env = Env();
  const std::string cmd = ShellQuote(env.source_dir + "/scripts/pg.sh") + " start " + ShellQuote(env.pgdata) +
                          " " + ShellQuote(env.pg_port);
  return std::system(cmd.c_str());
}

double ScrapeMetric(HttpClient& c, std::string_view name) {
  const HttpResponse r = c.Get("/metrics");
  EXPECT_EQ(r.status, 200) << r;
  const auto v = MetricValue(r.body, name);
  EXPECT_TRUE(v.has_value()) << name << " missing from /metrics";
  return v.value_or(-1);
}

DecidedWhere ReadDecidedWhere(HttpClient& c) {
  const HttpResponse r = c.Get("/stats");
  EXPECT_EQ(r.status, 200) << r;
  const boost::json::object o = r.json();
  const auto number = [](const boost::json::object& obj, std::string_view key) -> std::uint64_t {
    return obj.contains(key) ? obj.at(key).to_number<std::uint64_t>() : 0;
  };
  DecidedWhere d;
  if (o.contains("pg")) {
    d.pg_inserted = number(o.at("pg").as_object(), "inserted");
    d.pg_duplicates = number(o.at("pg").as_object(), "duplicates");
  }
  if (o.contains("recent")) {
    d.recent_hits = number(o.at("recent").as_object(), "hits");
    d.recent_replays = number(o.at("recent").as_object(), "replays");
  }
  d.replays = number(o, "idempotent_replays");
  return d;
}

ObserveAnswer ReadObserveAnswer(const HttpResponse& r) {
  ObserveAnswer a;
  a.status = r.status;
  std::ostringstream os;
  os << r;
  a.text = os.str();
  if (r.status != 200 && r.status != 201) return a;
  const boost::json::object o = r.json();
  if (const auto* v = o.if_contains("verdict")) a.verdict = std::string(v->as_string());
  if (const auto* v = o.if_contains("via")) a.via = std::string(v->as_string());
  if (const auto* v = o.if_contains("digest")) a.digest = std::string(v->as_string());
  if (const auto* v = o.if_contains("first_seen")) a.first_seen = std::string(v->as_string());
  if (const auto* v = o.if_contains("mismatch"); v != nullptr && v->is_array()) {
    for (const auto& m : v->as_array()) a.mismatch.emplace_back(m.as_string());
  }
  return a;
}

ObserveAnswer ObserveKey(HttpClient& c, const std::string& key) {
  return ReadObserveAnswer(c.Post("/observe", ObserveBody(key)));
}

std::optional<double> MetricValue(const std::string& metrics_text, std::string_view name) {
  std::istringstream in(metrics_text);
  std::string line;
  std::optional<double> sum;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line.rfind(name, 0) != 0) continue;
    if (line.size() <= name.size() || (line[name.size()] != ' ' && line[name.size()] != '{')) continue;
    const auto sp = line.rfind(' ');
    if (sp == std::string::npos) continue;
    // Samples may carry a timestamp after the value: "name value [ts]". Take the field after the labels.
    std::string rest = line.substr(line[name.size()] == '{' ? line.find('}') + 1 : name.size());
    std::istringstream fields(rest);
    double v = 0;
    if (fields >> v) sum = sum.value_or(0) + v;
  }
  return sum;
}

}  // namespace scangate::it
