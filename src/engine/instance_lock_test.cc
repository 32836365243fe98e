#include "engine/instance_lock.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

namespace kvgate::engine {
namespace {

namespace fs = std::filesystem;

class InstanceLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("kvgate_locks_{}_{}", ::getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(InstanceLockTest, SecondHolderIsRefusedWithTheFirstOnesDescription) {
  auto first = InstanceLock::acquire({"listen 127.0.0.1:8787", "model /m.gguf"},
                                     "kvgate up (pid 111, listening on "
                                     "127.0.0.1:8787, engine port 40000)",
                                     dir_);
  ASSERT_TRUE(first.ok()) << first.error().message();
  auto second = InstanceLock::acquire({"listen 127.0.0.1:8787"}, "kvgate up (pid 222)", dir_);
  ASSERT_FALSE(second.ok());
  const std::string msg = second.error().message();
  EXPECT_NE(
      msg.find("listen 127.0.0.1:8787 is already served: kvgate up (pid 111, listening on 127.0.0.1:8787, "
               "engine port 40000)"),
      std::string::npos)
      << msg;
  // The description follows updates.
  (*first)->update("kvgate up (pid 111, engine port 40001)");
  auto third = InstanceLock::acquire({"model /m.gguf"}, "x", dir_);
  ASSERT_FALSE(third.ok());
  EXPECT_NE(third.error().message().find("engine port 40001"), std::string::npos) << third.error().message();
  // Released with the holder.
  first->reset();
  EXPECT_TRUE(InstanceLock::acquire({"listen 127.0.0.1:8787", "model /m.gguf"}, "y", dir_).ok());
}

TEST_F(InstanceLockTest, AllOrNothing) {
  auto holder = InstanceLock::acquire({"b"}, "holder of b", dir_);
  ASSERT_TRUE(holder.ok());
  auto both = InstanceLock::acquire({"a", "b"}, "wants a and b", dir_);
  ASSERT_FALSE(both.ok());
  EXPECT_TRUE(InstanceLock::acquire({"a"}, "a alone", dir_).ok());  // a was released again
}

TEST_F(InstanceLockTest, ReleasedWhenTheHolderIsKilled) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto l = InstanceLock::acquire({"listen 127.0.0.1:9"}, "child", dir_);
    (void)!::write(ready[1], l.ok() ? "1" : "0", 1);
    ::pause();
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, '1');
  EXPECT_FALSE(InstanceLock::acquire({"listen 127.0.0.1:9"}, "parent", dir_).ok());
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_TRUE(InstanceLock::acquire({"listen 127.0.0.1:9"}, "parent", dir_).ok());
  ::close(ready[0]);
  ::close(ready[1]);
}

TEST_F(InstanceLockTest, FileNamesAreReadableAndDistinct) {
  const auto a = InstanceLock::file_for("listen 127.0.0.1:8787", dir_);
  const auto b = InstanceLock::file_for("listen 127.0.0.1:8788", dir_);
  EXPECT_NE(a, b);
  EXPECT_EQ(a.parent_path(), dir_);
  EXPECT_EQ(a.filename().string().rfind("listen_127.0.0.1_8787-", 0), 0u) << a;
}

}  // namespace
}  // namespace kvgate::engine
