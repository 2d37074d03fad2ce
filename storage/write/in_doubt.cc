#include "storage/write/in_doubt.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <thread>

#include "storage/pg/batch_errors.h"
#include "storage/pg/error_summary.h"

namespace scangate::storage {
namespace {

// txid_status() polling while the lost COMMIT is still "in progress" (and reconnect pauses while
// settling): 10, 20, 40 .. 200 ms, within kInDoubtResolveFor.
constexpr std::chrono::milliseconds kInDoubtPollMin{10};
constexpr std::chrono::milliseconds kInDoubtPollMax{200};
// libpq raises a connect_timeout below 2 s to 2 s.
constexpr std::chrono::seconds kMinConnectTimeout{2};

// The writer's connection string with connect_timeout cut to what is left of the settlement (a later keyword
// overrides an earlier one), so a connection attempt to a server that accepts but does not answer (one in the
// middle of a shutdown or a start under load) cannot hold the writer past kInDoubtResolveFor by the whole
// connect_timeout (10 s by default, per host address). Overshoot: at most kMinConnectTimeout per address.
std::string BoundedConninfo(const std::string& conninfo, StoreClock::duration left) {
  const auto seconds = std::max(kMinConnectTimeout, std::chrono::ceil<std::chrono::seconds>(left));
  return conninfo + " connect_timeout=" + std::to_string(seconds.count());
}

}  // namespace

InDoubt SettleInDoubt(WriterState& w, const InDoubtCommit& commit, std::string& why) {
  w.conn.reset();  // broken (or, under the fault hook, to be treated as broken)
  if (!commit.xid_trusted) {
    why = "no transaction id was noted";
    return InDoubt::kUnknown;
  }
  if (!commit.xid) return InDoubt::kCommitted;  // wrote nothing: its outcomes are rows others committed
  const auto deadline = StoreClock::now() + kInDoubtResolveFor;
  auto pause = kInDoubtPollMin;
  for (;;) {
    if (w.conn || ConnectWriter(w, BoundedConninfo(w.target.writer_conninfo, deadline - StoreClock::now()), &why)) {
      try {
        switch (QueryTxidStatus(*w.conn, *commit.xid, &why)) {
          case TxStatus::kCommitted: return InDoubt::kCommitted;
          case TxStatus::kAborted: return InDoubt::kAborted;
          case TxStatus::kUnknown: return InDoubt::kUnknown;
          case TxStatus::kInProgress: why = "transaction still in progress"; break;  // COMMIT still running
        }
      } catch (const std::exception& e) {
        why = ErrorSummary(e.what());
        w.conn.reset();
      }
    }
    if (StoreClock::now() + pause > deadline) {
      why = "not settled within " + std::to_string(kInDoubtResolveFor.count()) + " ms: " + why;
      return InDoubt::kUnknown;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, kInDoubtPollMax);
  }
}

}  // namespace scangate::storage
