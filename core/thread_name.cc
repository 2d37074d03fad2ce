#include "core/thread_name.h"

#include <pthread.h>

#include <algorithm>
#include <array>
#include <cstring>

namespace scangate {

void SetThreadName(std::string_view name) {
  std::array<char, 16> buf{};  // 15 bytes + NUL: pthread_setname_np refuses longer names (ERANGE)
  const std::size_t n = std::min(name.size(), buf.size() - 1);
  std::memcpy(buf.data(), name.data(), n);
  (void)pthread_setname_np(pthread_self(), buf.data());
}

}  // namespace scangate
