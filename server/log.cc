#include "server/log.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <memory>
#include <string>

#include <boost/json/serialize.hpp>

namespace scangate::server {

std::string NowRfc3339() {
  const auto now = std::chrono::system_clock::now();
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(us / 1'000'000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  const std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%06lldZ", static_cast<long long>(us % 1'000'000));
  return buf;
}

void Log(LogLevel level, std::string_view event, boost::json::object fields) {
  boost::json::object line;
  line.reserve(fields.size() + 3);
  line["ts"] = NowRfc3339();
  line["level"] = level == LogLevel::kInfo ? "info" : level == LogLevel::kWarn ? "warn" : "error";
  line["event"] = event;
  for (auto& kv : fields) line[kv.key()] = std::move(kv.value());
  std::string text = boost::json::serialize(line);
  text.push_back('\n');
  // The mutex keeps a line whole even when write(2) is short (pipe full, signal) and must continue.
  static std::mutex mu;
  const std::lock_guard lock(mu);
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t w = ::write(STDERR_FILENO, p, left);
    if (w <= 0) break;
    p += w;
    left -= static_cast<std::size_t>(w);
  }
}

namespace {
class StorageAdapter final : public storage::LogSink {
 public:
  void Write(storage::LogSeverity severity, std::string_view event, boost::json::object fields) override {
    Log(severity == storage::LogSeverity::kInfo   ? LogLevel::kInfo
        : severity == storage::LogSeverity::kWarn ? LogLevel::kWarn
                                                  : LogLevel::kError,
        event, std::move(fields));
  }
};
}  // namespace

std::shared_ptr<storage::LogSink> StorageLogSink() { return std::make_shared<StorageAdapter>(); }

}  // namespace scangate::server
