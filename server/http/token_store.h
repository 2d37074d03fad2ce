// TokenStore: the tokens (--tokens-file) in force now, swappable at run time (SIGHUP: App calls Reload). Each
// request takes a reference to the current TokenVerifier (an immutable snapshot) and keeps it until its
// answer, so a reload never changes a request half-way. Invariant: a file that cannot be read or parsed
// leaves the tokens in force untouched; error messages name the file and line, never a token or a hash.
// The lock guards only the pointer swap/copy (a few ns held); verification itself runs unlocked.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/mutex.h"
#include "server/http/auth.h"

namespace scangate::server {

// Reads and parses a tokens file. Throws std::runtime_error "'<path>': cannot read" or "'<path>' line N: ...".
std::vector<Terminal> LoadTokensFile(const std::string& path);

class TokenStore {
 public:
  // `path` empty: nothing to reload (Reload() does nothing); tokens are on when `terminals` is not empty.
  TokenStore(std::string path, std::vector<Terminal> terminals);
  // The tokens in force. Safe to call concurrently.
  std::shared_ptr<const TokenVerifier> Current() const;
  // Rereads the file and swaps the new tokens in; on a failure keeps the old ones and throws
  // std::runtime_error (LoadTokensFile's message). Returns the number of tokens now in force. Safe to call
  // concurrently with Current() and itself.
  std::size_t Reload();
  const std::string& path() const { return path_; }

 private:
  const std::string path_;
  mutable Mutex mu_;
  std::shared_ptr<const TokenVerifier> current_ ABSL_GUARDED_BY(mu_);
};

}  // namespace scangate::server
