// Group-commit rate of the two durable-journal candidates for --ack=filter (issue 12), fsync-bound, closed loop:
// N appender threads each append one record (digest, time, source), wait until it is durable, repeat.
//   journal: storage/journal/journal.h — segment file, length + CRC32C per record, one write + fdatasync per group.
//   sqlite:  SQLite 3 in WAL mode, synchronous=FULL (the WAL is fsynced at every COMMIT), the same group
//            commit around it: one flusher thread takes whatever accumulated and runs BEGIN; INSERT x n; COMMIT.
// Usage: journal_bench [--dir DIR] [--seconds S] [--appenders 1,16,64,256]
// Prints one line per (system, appenders): records/s, groups/s, mean group size, mean sync/commit ms.
#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "storage/journal/journal.h"

namespace {

using namespace scangate;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

struct Waiters {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<char> done;  // per appender
  void Complete(const std::vector<int>& who) {
    {
      std::lock_guard lk(mu);
      for (int i : who) done[static_cast<std::size_t>(i)] = 1;
    }
    cv.notify_all();
  }
  void Wait(int i) {
    std::unique_lock lk(mu);
    cv.wait(lk, [&] { return done[static_cast<std::size_t>(i)] != 0; });
    done[static_cast<std::size_t>(i)] = 0;
  }
};

storage::JournalRecord Rec(int appender, std::uint64_t n) {
  storage::JournalRecord r;
  std::uint64_t v = n * 1000003u + static_cast<std::uint64_t>(appender);
  for (std::size_t b = 0; b < r.digest.size(); b += 8) std::memcpy(r.digest.data() + b, &v, 8), v = v * 6364136223846793005ull + 1;
  r.time_us = static_cast<std::int64_t>(n);
  r.source = "till-" + std::to_string(appender);
  return r;
}

struct Result {
  double records_per_s, groups_per_s, mean_group, mean_sync_ms;
};

Result RunJournal(const std::string& dir, int appenders, double seconds) {
  fs::remove_all(dir);
  Waiters w;
  w.done.assign(static_cast<std::size_t>(appenders), 0);
  storage::JournalOptions o;
  o.dir = dir;
  o.identity = "bench";
  o.max_bytes = 1ull << 30;
  o.on_commit = [&](std::vector<storage::JournalEntry>& g, storage::JournalFate) {
    std::vector<int> who;
    for (const auto& e : g) who.push_back(static_cast<int>(e.record.time_us >> 40));
    w.Complete(who);
  };
  storage::Journal j(o);
  j.Start();
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> records{0};
  std::vector<std::thread> threads;
  const auto t0 = Clock::now();
  for (int a = 0; a < appenders; ++a) {
    threads.emplace_back([&, a] {
      for (std::uint64_t n = 0; !stop.load(); ++n) {
        auto r = Rec(a, n);
        r.time_us = (static_cast<std::int64_t>(a) << 40) | static_cast<std::int64_t>(n & 0xffffffff);
        j.Append(std::move(r));
        w.Wait(a);
        records.fetch_add(1);
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop.store(true);
  for (auto& t : threads) t.join();
  const double el = std::chrono::duration<double>(Clock::now() - t0).count();
  const auto s = j.Stats();
  j.Stop();
  fs::remove_all(dir);
  return {records.load() / el, s.groups / el, s.group_size_count ? s.group_size_sum / s.group_size_count : 0,
          s.fsync_seconds_count ? 1000 * s.fsync_seconds_sum / s.fsync_seconds_count : 0};
}

void Check(int rc, sqlite3* db, const char* what) {
  if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
    std::fprintf(stderr, "sqlite %s: %s\n", what, sqlite3_errmsg(db));
    std::exit(1);
  }
}

Result RunSqlite(const std::string& dir, int appenders, double seconds) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  sqlite3* db = nullptr;
  Check(sqlite3_open((dir + "/journal.db").c_str(), &db), db, "open");
  Check(sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; "
                         "CREATE TABLE j(digest BLOB PRIMARY KEY, time_us INTEGER, source TEXT) WITHOUT ROWID;",
                     nullptr, nullptr, nullptr),
        db, "setup");
  sqlite3_stmt* ins = nullptr;
  Check(sqlite3_prepare_v2(db, "INSERT OR IGNORE INTO j VALUES (?, ?, ?)", -1, &ins, nullptr), db, "prepare");
  Waiters w;
  w.done.assign(static_cast<std::size_t>(appenders), 0);
  std::mutex qmu;
  std::condition_variable qcv;
  std::vector<std::pair<int, storage::JournalRecord>> queue;
  std::atomic<bool> stop{false};
  std::uint64_t groups = 0, in_groups = 0;
  double commit_s = 0;
  std::thread flusher([&] {
    std::vector<std::pair<int, storage::JournalRecord>> batch;
    for (;;) {
      {
        std::unique_lock lk(qmu);
        qcv.wait(lk, [&] { return !queue.empty() || stop.load(); });
        if (queue.empty()) return;
        batch.swap(queue);
      }
      const auto t0 = Clock::now();
      Check(sqlite3_exec(db, "BEGIN", nullptr, nullptr, nullptr), db, "begin");
      for (auto& [a, r] : batch) {
        sqlite3_bind_blob(ins, 1, r.digest.data(), 32, SQLITE_STATIC);
        sqlite3_bind_int64(ins, 2, r.time_us);
        sqlite3_bind_text(ins, 3, r.source.data(), static_cast<int>(r.source.size()), SQLITE_STATIC);
        Check(sqlite3_step(ins), db, "insert");
        sqlite3_reset(ins);
      }
      Check(sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr), db, "commit");
      commit_s += std::chrono::duration<double>(Clock::now() - t0).count();
      ++groups;
      in_groups += batch.size();
      std::vector<int> who;
      for (auto& [a, r] : batch) who.push_back(a);
      w.Complete(who);
      batch.clear();
    }
  });
  std::atomic<std::uint64_t> records{0};
  std::vector<std::thread> threads;
  const auto t0 = Clock::now();
  std::atomic<bool> stop_appenders{false};
  for (int a = 0; a < appenders; ++a) {
    threads.emplace_back([&, a] {
      for (std::uint64_t n = 0; !stop_appenders.load(); ++n) {
        {
          std::lock_guard lk(qmu);
          queue.emplace_back(a, Rec(a, n));
        }
        qcv.notify_one();
        w.Wait(a);
        records.fetch_add(1);
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop_appenders.store(true);
  for (auto& t : threads) t.join();
  const double el = std::chrono::duration<double>(Clock::now() - t0).count();
  stop.store(true);
  qcv.notify_all();
  flusher.join();
  sqlite3_finalize(ins);
  sqlite3_close(db);
  fs::remove_all(dir);
  return {records.load() / el, groups / el, groups ? static_cast<double>(in_groups) / groups : 0,
          groups ? 1000 * commit_s / groups : 0};
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "/tmp/scangate-journal-bench";
  double seconds = 3;
  std::vector<int> appenders{1, 16, 64, 256};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--dir") dir = argv[i + 1];
    else if (a == "--seconds") seconds = std::stod(argv[i + 1]);
    else if (a == "--appenders") {
      appenders.clear();
      std::stringstream ss(argv[i + 1]);
      for (std::string t; std::getline(ss, t, ',');) appenders.push_back(std::stoi(t));
    }
  }
  std::printf("| appenders | system | records/s | groups/s | mean group | mean sync (journal) / COMMIT (sqlite) ms |\n");
  std::printf("|---:|---|---:|---:|---:|---:|\n");
  for (int n : appenders) {  // the two systems back to back per row: same background load
    for (int round = 0; round < 2; ++round) {
      const bool sqlite = round == 1;
      const Result r = sqlite ? RunSqlite(dir + "/sqlite", n, seconds) : RunJournal(dir + "/journal", n, seconds);
      std::printf("| %d | %s | %.0f | %.0f | %.1f | %.2f |\n", n, sqlite ? "sqlite WAL" : "segment+CRC32C",
                  r.records_per_s, r.groups_per_s, r.mean_group, r.mean_sync_ms);
      std::fflush(stdout);
    }
  }
}
