// ExactStore: what the verdict logic (server/service.h) needs of the exact authority — insert-if-absent of
// a digest with a committed outcome, ack=filter write-behind, health, counters. storage::Store (PostgreSQL)
// implements it; tests substitute an in-memory fake so the verdict and routing logic run without a
// database. Invariant (every implementation): kInserted/kDuplicate only once the decision is durable, and
// exactly one kInserted per digest ever. One virtual call per item; no other cost.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/digest.h"

namespace scangate::storage {

struct Result;      // storage/store.h
struct StoreStats;  // storage/store.h
// Runs once per Submit with the outcome; must not block (see storage/store.h).
using Completion = std::function<void(const Result&)>;

class ExactStore {
 public:
  virtual ~ExactStore() = default;
  // Contracts as documented on storage::Store (store.h): thread-safe, never block on I/O.
  virtual bool Submit(std::uint32_t route, const Digest& d, std::string source, Completion done) = 0;
  virtual bool SubmitWriteBehind(std::uint32_t route, const Digest& d, std::string source) = 0;
  virtual bool up() const = 0;
  virtual StoreStats Stats() const = 0;
};

}  // namespace scangate::storage
