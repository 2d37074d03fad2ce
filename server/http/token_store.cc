#include "server/http/token_store.h"

#include <fstream>
#include <iterator>
#include <utility>
#include <variant>

namespace scangate::server {

std::vector<Terminal> LoadTokensFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("'" + path + "': cannot read");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw std::runtime_error("'" + path + "': read error");
  auto parsed = ParseTokensFile(text);
  if (auto* e = std::get_if<TokenFileError>(&parsed)) {
    throw std::runtime_error("'" + path + "' line " + std::to_string(e->line) + ": " + e->message);
  }
  return std::get<std::vector<Terminal>>(std::move(parsed));
}

TokenStore::TokenStore(std::string path, std::vector<Terminal> terminals)
    : path_(std::move(path)), current_(std::make_shared<const TokenVerifier>(std::move(terminals))) {}

std::shared_ptr<const TokenVerifier> TokenStore::Current() const {
  MutexLock lock(&mu_);
  return current_;
}

std::size_t TokenStore::Reload() {
  if (path_.empty()) return 0;
  auto next = std::make_shared<const TokenVerifier>(LoadTokensFile(path_));  // throws: the old tokens stay
  const std::size_t n = next->size();
  std::shared_ptr<const TokenVerifier> old;
  {
    MutexLock lock(&mu_);
    old = std::exchange(current_, std::move(next));
  }
  return n;  // `old` is freed here, outside the lock (or by the last request still holding it)
}

}  // namespace scangate::server
