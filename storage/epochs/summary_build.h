// BuildEpochSummary: the membership summary (core/epoch_summary.h) of one closed epoch's digests, read from
// PostgreSQL — the close's step between the epoch's sorted rewrite and the summary's commit (the epoch layout,
// issue 54). Invariant: the summary holds every digest the relation holds in the caller's snapshot, so it has no
// false negative for it: build it on a relation no one writes any more, or in the transaction that commits it.
// It is sized for exactly the digests read (a summary is always at design load). Memory: the digests are held
// (16 B each: 24 MB for 1.5 M keys) until the count is known, then the summary is sized and filled.
#pragma once

#include <string_view>

#include <libpq-fe.h>

#include "core/epoch_summary.h"

namespace scangate::storage {

// True for a name that needs no quoting in SQL: 1..63 characters of [a-z0-9_], not starting with a digit. The
// epochs' relations are scangate's own; anything else is refused before it reaches a statement.
bool IsPlainIdentifier(std::string_view name);

// Reads `relation`'s digest column by binary COPY over `conn` (idle, or inside the caller's transaction) and returns
// its summary at `bits_per_key`. Throws std::invalid_argument for a relation name that is not plain, and
// std::runtime_error "BuildEpochSummary: ..." when PostgreSQL refuses or the stream breaks. Threading: one call per
// connection at a time.
EpochSummary BuildEpochSummary(PGconn* conn, std::string_view relation,
                               double bits_per_key = kEpochSummaryBitsPerKey);

}  // namespace scangate::storage
