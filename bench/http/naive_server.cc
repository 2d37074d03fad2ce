// naive_server: the baseline a user would write without scangate's design, for the load benchmark.
// Same HTTP front as scangate; per request: parse the JSON key (Boost.JSON), SHA-256 it (OpenSSL EVP), and run
// ONE "INSERT ... ON CONFLICT DO NOTHING RETURNING first_seen" in its own transaction on a pooled libpqxx
// connection. No filter, no batching. Blocking DB calls run on a fixed thread pool (one connection per thread),
// never on the io threads; the answer goes back to the connection's io thread via net::dispatch.
// Usage: naive_server --port 8082 --threads 2 --database-url URL --pool 16
#include <openssl/evp.h>

#include <boost/json.hpp>
#include <pqxx/pqxx>

#include <array>
#include <condition_variable>
#include <deque>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "http_front.h"

namespace {

using namespace bench_http;
namespace json = boost::json;

constexpr std::size_t kMaxKeyBytes = 512;        // 400 above (scangate's limit)
constexpr std::size_t kMaxSourceChars = 64;      // 400 above (scangate's limit)
constexpr std::size_t kQueueLimit = 65536;       // queued DB jobs; 503 above
constexpr std::chrono::milliseconds kReconnectPause{200};

// Same schema as scangate's migration, created here only when missing (run this server on its own database).
constexpr const char* kCreateTable =
    "CREATE TABLE IF NOT EXISTS scan_keys(digest bytea PRIMARY KEY CHECK (octet_length(digest) = 32), "
    "first_seen timestamptz NOT NULL DEFAULT now(), source text)";
constexpr const char* kInsert =
    "INSERT INTO scan_keys(digest, source) VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING first_seen";

using Digest = std::array<unsigned char, 32>;

std::string Hex(const Digest& d) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(64, '0');
  for (std::size_t i = 0; i < d.size(); ++i) {
    out[2 * i] = kDigits[d[i] >> 4];
    out[2 * i + 1] = kDigits[d[i] & 15];
  }
  return out;
}

Digest Sha256(std::string_view key) {
  Digest d{};
  unsigned int len = 0;
  if (EVP_Digest(key.data(), key.size(), d.data(), &len, EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("EVP_Digest failed");
  }
  return d;
}

struct Job {
  Digest digest;
  std::string source;
  unsigned version;
  Reply reply;
};

// Fixed pool of blocking workers, one libpqxx connection each, fed from one FIFO queue.
class DbPool {
 public:
  DbPool(std::string url, unsigned size) : url_(std::move(url)) {
    {
      pqxx::connection conn(url_);
      pqxx::work tx(conn);
      tx.exec0(kCreateTable);
      tx.commit();
    }
    for (unsigned i = 0; i < size; ++i) workers_.emplace_back([this] { Work(); });
  }

  // False when the queue is full (caller answers 503).
  bool Submit(Job job) {
    {
      std::lock_guard lock(mu_);
      if (queue_.size() >= kQueueLimit) return false;
      queue_.push_back(std::move(job));
    }
    cv_.notify_one();
    return true;
  }

 private:
  void Work() {
    std::optional<pqxx::connection> conn;
    for (;;) {
      Job job;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return !queue_.empty(); });
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      try {
        if (!conn || !conn->is_open()) {
          conn.emplace(url_);
          conn->prepare("insert_key", kInsert);
        }
        pqxx::work tx(*conn);
        const pqxx::result r =
            tx.exec_prepared("insert_key", pqxx::binarystring(job.digest.data(), job.digest.size()), job.source);
        tx.commit();
        const bool inserted = !r.empty();
        std::string body = inserted ? R"({"verdict":"new","digest":")" : R"({"verdict":"duplicate","digest":")";
        body += Hex(job.digest);
        body += R"(","via":"exact"})";
        job.reply(MakeResponse(inserted ? http::status::created : http::status::ok, std::move(body), job.version));
      } catch (const std::exception& e) {
        std::cerr << R"({"event":"error","what":"db"})" << std::endl;
        conn.reset();
        auto res = MakeResponse(http::status::service_unavailable, R"({"error":"unavailable"})", job.version);
        res.set(http::field::retry_after, "1");
        job.reply(std::move(res));
        std::this_thread::sleep_for(kReconnectPause);
      }
    }
  }

  std::string url_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  std::vector<std::jthread> workers_;  // never joined in practice: the process exits on SIGTERM
};

Response BadRequest(std::string_view detail, unsigned version) {
  return MakeResponse(http::status::bad_request, std::string(R"({"error":")") + std::string(detail) + "\"}", version);
}

void Handle(DbPool& pool, Request& req, Reply reply) {
  if (req.method() != http::verb::post || req.target() != "/observe") {
    reply(MakeResponse(http::status::not_found, R"({"error":"not-found"})", req.version()));
    return;
  }
  json::error_code ec;
  const json::value doc = json::parse(req.body(), ec);
  if (ec || !doc.is_object()) return reply(BadRequest("malformed-json", req.version()));
  const json::object& obj = doc.get_object();
  const json::string* key = obj.if_contains("key") ? obj.at("key").if_string() : nullptr;
  if (key == nullptr || key->empty() || key->size() > kMaxKeyBytes) {
    return reply(BadRequest("invalid-key", req.version()));
  }
  std::string source;
  if (const json::value* s = obj.if_contains("source")) {
    if (!s->is_string() || s->get_string().size() > kMaxSourceChars) {
      return reply(BadRequest("invalid-source", req.version()));
    }
    source = s->get_string().c_str();
  }
  const unsigned version = req.version();
  Job job{Sha256(std::string_view(key->data(), key->size())), std::move(source), version, reply};
  if (!pool.Submit(std::move(job))) {
    auto res = MakeResponse(http::status::service_unavailable, R"({"error":"unavailable"})", version);
    res.set(http::field::retry_after, "1");
    reply(std::move(res));
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Flags flags(argc, argv);
    const unsigned port = flags.GetUnsigned("port", 8082);
    const unsigned threads = flags.GetUnsigned("threads", 0);
    const unsigned pool_size = flags.GetUnsigned("pool", 16);
    const std::string url = flags.Get("database-url", "");
    flags.CheckAllUsed();
    if (url.empty()) throw std::invalid_argument("--database-url is required");
    if (pool_size == 0) throw std::invalid_argument("--pool must be >= 1");
    DbPool pool(url, pool_size);
    const Handler handler = [&pool](Request& req, Reply reply) { Handle(pool, req, std::move(reply)); };
    const int rc = Serve(static_cast<unsigned short>(port), threads, handler);
    std::_Exit(rc);  // workers block on the queue forever; skip joining them
  } catch (const std::exception& e) {
    std::cerr << "naive_server: " << e.what() << "\n";
    return 2;
  }
}
