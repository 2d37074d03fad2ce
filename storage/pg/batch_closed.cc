// BatchStatement's look-up of a batch's digests in the closed epochs (storage/pg/batch_statement.h
// PrepareClosedProbe, PlanClosedProbes; issue 54): the statement, the plan of which digests go to which epoch, and the
// answer of the digests live there. Split from batch_statement.cc (the ON CONFLICT path), as batch_copy.cc is.
#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "storage/pg/batch_internal.h"
#include "storage/pg/batch_statement.h"

namespace scangate::storage {
namespace {

using batch_internal::Binary;
using batch_internal::DigestOid;
using batch_internal::Guard;
using batch_internal::RecordOf;

// The look-up of a batch's digests in the closed epochs (storage/epochs/catalog.h; issue 54), the first statement
// after the write order when some digest may be in one (ClosedEpochs::PlanProbes): $1..$n the digests ({DIGEST}[])
// to look up in relations[0..n) (empty: none there), $n+1 the clock guard (as the take-over's). Returns (epoch index,
// ordinality in its array, first_seen µs, lot hex, expiry days, request hex) of each LIVE row: one a take-over would
// not take (a closed epoch is immutable, so an expired row there is left alone and the key is inserted into the
// open epoch). The rule is the pack INSERT's (keep_until, else first_seen + R; less the clock's steps since
// first_seen), which is the raw one's for rows without a keep_until; its cheap bound (the steps back recorded) is
// read once for all branches (a CTE), and a row inside it never pays for scangate_clock_ahead(). One index probe
// per digest and epoch (the epoch's primary key).
constexpr const char* kClosedProbeName = "scangate_probe_closed";
constexpr const char* kClosedProbeHead = "WITH b AS MATERIALIZED (SELECT scangate_clock_behind(NULL) AS behind)";
constexpr const char* kClosedProbeBranch = R"sql(
SELECT {E}, u.o, (extract(epoch FROM k.first_seen) * 1000000)::int8, encode({SEND}(k.lot), 'hex'),
       k.expiry - date 'epoch', encode({SEND}(k.request), 'hex')
FROM unnest(${P}::{DIGEST}[]) WITH ORDINALITY AS u(d, o) JOIN {REL} AS k ON k.digest = u.d
WHERE NOT coalesce({EXPIRED} AND {GUARD}, false)
)sql";
// Expired with a horizon of {R} µs / without one (only a row with a keep_until expires).
constexpr const char* kClosedExpiredOrR =
    "coalesce(k.keep_until, k.first_seen + {R} * interval '1 microsecond') < now() + (SELECT behind FROM b)"
    " AND coalesce(k.keep_until, k.first_seen + {R} * interval '1 microsecond') < now() - scangate_clock_ahead(k.first_seen)";
constexpr const char* kClosedExpired =
    "k.keep_until IS NOT NULL AND k.keep_until < now() + (SELECT behind FROM b)"
    " AND k.keep_until < now() - scangate_clock_ahead(k.first_seen)";

std::string ClosedProbeSql(const std::vector<std::string>& relations, std::chrono::seconds retention) {
  const bool r_on = retention.count() > 0;
  const std::string r = std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(retention).count());
  const std::string guard = Guard(static_cast<int>(relations.size()) + 1);
  std::string sql = kClosedProbeHead;
  for (std::size_t e = 0; e < relations.size(); ++e) {
    if (e > 0) sql += "UNION ALL";
    sql += Substitute(kClosedProbeBranch, {{"{E}", std::to_string(e)},
                                           {"{P}", std::to_string(e + 1)},
                                           {"{REL}", relations[e]},
                                           {"{EXPIRED}", r_on ? kClosedExpiredOrR : kClosedExpired},
                                           {"{GUARD}", guard},
                                           {"{R}", r}});
  }
  return sql;
}

}  // namespace

void BatchStatement::PrepareClosedProbe(pqxx::connection& conn, const std::vector<std::string>& relations,
                                        std::chrono::seconds retention, TableLayout layout) {
  if (relations.empty()) return;
  conn.prepare(kClosedProbeName, ForLayout(ClosedProbeSql(relations, retention), layout));
}

bool BatchStatement::PlanClosedProbes(const std::vector<ClosedEpoch>& closed) {
  closed_count_ = closed.size();
  probes_ = ClosedEpochs::PlanProbes(closed, digest_);
  // PlanProbes names epochs by id: each probe gets its epoch's position instead (the statement's parameter).
  absl::flat_hash_map<std::int64_t, std::int64_t> position;
  for (std::size_t e = 0; e < closed.size(); ++e) position.emplace(closed[e].id, static_cast<std::int64_t>(e));
  for (EpochProbe& p : probes_) p.epoch = position.at(p.epoch);
  return !probes_.empty();
}

std::size_t BatchStatement::ProbeClosedBeforeCopy(pqxx::transaction_base& tx) {
  const std::size_t n = distinct();
  copy_found_.assign(n, 0);
  copy_found_seen_.assign(n, 0);
  copy_found_recorded_.assign(n, PackAttrs{});
  copy_found_request_known_.assign(n, 0);
  return ProbeClosed(tx, copy_found_, copy_found_seen_, copy_found_recorded_, copy_found_request_known_);
}

std::size_t BatchStatement::ProbeClosed(pqxx::transaction_base& tx, std::vector<char>& answered,
                                        std::vector<std::int64_t>& first_seen, std::vector<PackAttrs>& recorded,
                                        std::vector<char>& request_known) {
  if (probes_.empty()) return 0;
  std::vector<PgBinaryArray> arrays;
  arrays.reserve(closed_count_);
  for (std::size_t e = 0; e < closed_count_; ++e) arrays.emplace_back(DigestOid(layout_));
  for (const EpochProbe& p : probes_) {
    for (const std::uint32_t i : p.items) arrays[static_cast<std::size_t>(p.epoch)].Add(StoredBytesOf(digest_[i], layout_));
  }
  std::vector<pqxx::binarystring> params;
  params.reserve(closed_count_);
  for (auto& a : arrays) params.push_back(Binary(a.Finish()));
  const pqxx::result r = tx.exec_prepared(kClosedProbeName, pqxx::prepare::make_dynamic_params(params), guard_us_);
  std::vector<const EpochProbe*> probe_of(closed_count_, nullptr);
  for (const EpochProbe& p : probes_) probe_of[static_cast<std::size_t>(p.epoch)] = &p;
  std::size_t found = 0;
  for (const auto& row : r) {
    const auto e = row[0].as<std::size_t>();
    const auto o = row[1].as<std::size_t>();
    if (e >= closed_count_ || probe_of[e] == nullptr || o < 1 || o > probe_of[e]->items.size()) {
      throw std::runtime_error("closed epochs' probe returned a row out of range");
    }
    const std::uint32_t i = probe_of[e]->items[o - 1];
    const std::int64_t seen = row[2].as<std::int64_t>();
    if (answered[i] && first_seen[i] >= seen) continue;  // live in two closed epochs: the newest row answers
    found += answered[i] ? 0 : 1;
    answered[i] = 1;
    first_seen[i] = seen;
    recorded[i] = RecordOf(row, 3, layout_);
    request_known[i] = pack_ ? 1 : 0;  // as the follow-up SELECT: the raw path does not read the row's record
  }
  return found;
}

}  // namespace scangate::storage
