// The ways a Store writes a key, for the epochs' tests (issue 54): the batch INSERT (the filter did not say new), the
// binary COPY (it did: a Bloom negative), the pack INSERT (GS1 attributes). Each test runs its case on every path.
#pragma once

#include "storage/store.h"
#include "tests/answer_within.h"

namespace scangate::storage {

struct WritePath {
  const char* name;
  Expect expect;
  bool pack;
};
inline constexpr WritePath kWritePaths[] = {{"insert", Expect::kUnknown, false}, {"copy", Expect::kNew, false},
                                            {"pack", Expect::kUnknown, true}};

// Submits `d` by `path` (source "till-1"); the answer comes later (Answer::Within). False when Submit refused.
inline bool SubmitBy(Store& store, const Digest& d, const WritePath& path, const Answer<Result>& answer) {
  PackAttrs attrs;
  if (path.pack) attrs.expiry = 20'000;  // days since 1970-01-01: a pack row
  return store.Submit(d[0], d, "till-1", answer.Setter(), nullptr, path.expect, attrs);
}

}  // namespace scangate::storage
