// core/thread_name.h: the calling thread gets the name (as ps/top/perf read it), cut at Linux's 15 bytes.
#include "core/thread_name.h"

#include <pthread.h>

#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace scangate {
namespace {

std::string NameOf(pthread_t t) {
  char buf[64] = {};
  EXPECT_EQ(pthread_getname_np(t, buf, sizeof buf), 0);
  return buf;
}

TEST(ThreadName, NamesTheCallingThreadOnly) {
  const std::string before = NameOf(pthread_self());
  std::string seen;
  std::thread t([&] {
    SetThreadName("sg-test-1");
    seen = NameOf(pthread_self());
  });
  t.join();
  EXPECT_EQ(seen, "sg-test-1");
  EXPECT_EQ(NameOf(pthread_self()), before);
}

TEST(ThreadName, LongNamesAreCutNotRejected) {
  std::string seen;
  std::thread t([&] {
    SetThreadName("sg-pg-writer-0123456789");  // 23 bytes: pthread_setname_np alone would refuse it (ERANGE)
    seen = NameOf(pthread_self());
  });
  t.join();
  EXPECT_EQ(seen, "sg-pg-writer-01");
}

}  // namespace
}  // namespace scangate
