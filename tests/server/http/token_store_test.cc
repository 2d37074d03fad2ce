// Unit tests of server/http/token_store.h: reading a tokens file, a reload that swaps the tokens in force, a
// failed reload that keeps them, and a snapshot that outlives the reload that replaced it.
#include "server/http/token_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "core/digest.h"

namespace scangate::server {
namespace {

std::string HashHex(std::string_view token) { return ToHex(Digester::Sha256()(token)); }

class TokenStoreTest : public ::testing::Test {
 protected:
  void Write(const std::string& text) {
    std::ofstream(path_, std::ios::trunc) << text;
  }
  void TearDown() override { std::filesystem::remove(path_); }
  std::string path_ = ::testing::TempDir() + "token_store_test_" + std::to_string(::getpid()) + ".tokens";
};

TEST_F(TokenStoreTest, ReloadSwapsAndAFailureKeepsTheOldTokens) {
  Write(HashHex("one") + " t1\n");
  TokenStore store(path_, LoadTokensFile(path_));
  const auto first = store.Current();
  ASSERT_TRUE(first->Verify("one"));
  EXPECT_FALSE(first->Verify("two"));

  Write(HashHex("two") + " t2 observe\n");
  EXPECT_EQ(store.Reload(), 1u);
  const auto second = store.Current();
  EXPECT_FALSE(second->Verify("one"));  // removed
  ASSERT_TRUE(second->Verify("two"));
  EXPECT_EQ(second->terminal(*second->Verify("two")).id, "t2");
  EXPECT_TRUE(first->Verify("one"));  // an older snapshot a request still holds is unchanged

  Write(HashHex("three") + " bad/id\n");
  try {
    store.Reload();
    ADD_FAILURE() << "a bad file must not load";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("line 1"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find(HashHex("three").substr(0, 12)), std::string::npos) << e.what();
  }
  EXPECT_EQ(store.Current(), second);  // kept
  std::filesystem::remove(path_);
  EXPECT_THROW(store.Reload(), std::runtime_error);
  EXPECT_EQ(store.Current(), second);
}

// Requests verifying tokens while the file is reloaded over and over: each sees either the old or the new
// tokens, never a torn state (the TSan build in scripts/test.sh checks the swap).
TEST_F(TokenStoreTest, ConcurrentVerifyDuringReloads) {
  Write(HashHex("stable") + " t-stable\n" + HashHex("a") + " t-a\n");
  TokenStore store(path_, LoadTokensFile(path_));
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&] {
      while (!stop.load()) {
        const auto v = store.Current();
        const auto i = v->Verify("stable");  // listed in every version of the file
        if (!i || v->terminal(*i).id != "t-stable") failures.fetch_add(1);
      }
    });
  }
  for (int i = 0; i < 50; ++i) {
    Write(HashHex("stable") + " t-stable\n" + HashHex(i % 2 ? "a" : "b") + " t-ab\n");
    EXPECT_EQ(store.Reload(), 2u);
  }
  stop.store(true);
  for (auto& r : readers) r.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(TokenStoreTest, NoFileMeansNothingToReload) {
  TokenStore store("", {});
  EXPECT_FALSE(store.Current()->enabled());
  EXPECT_EQ(store.Reload(), 0u);
}

}  // namespace
}  // namespace scangate::server
