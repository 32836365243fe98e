#include "engine/rotating_log.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

namespace kvgate::engine {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class RotatingLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("kvgate_rotlog_{}_{}", ::getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(RotatingLogTest, RotatesBySizeAndKeepsN) {
  const fs::path file = dir_ / "logs" / "engine.log";
  auto log = RotatingLog::open(file, 20, 2);
  ASSERT_TRUE(log.ok()) << log.error().message();
  // Each line is 10 bytes with its newline: two fit in 20 bytes.
  for (int i = 0; i < 7; ++i) (*log)->write_line(fmt::format("line {:04}", i));
  EXPECT_EQ(slurp(file), "line 0006\n");
  EXPECT_EQ(slurp(file.string() + ".1"), "line 0004\nline 0005\n");
  EXPECT_EQ(slurp(file.string() + ".2"), "line 0002\nline 0003\n");
  EXPECT_FALSE(fs::exists(file.string() + ".3"));  // line 0000/0001 were dropped
}

TEST_F(RotatingLogTest, AppendsToAnExistingFileAndCountsItsSize) {
  const fs::path file = dir_ / "engine.log";
  fs::create_directories(dir_);
  std::ofstream(file, std::ios::binary) << "old 12345\n";  // 10 bytes (no CR on Windows)
  auto log = RotatingLog::open(file, 20, 1);
  ASSERT_TRUE(log.ok());
  (*log)->write_line("new 12345");
  (*log)->write_line("new 67890");
  EXPECT_EQ(slurp(file.string() + ".1"), "old 12345\nnew 12345\n");
  EXPECT_EQ(slurp(file), "new 67890\n");
}

TEST_F(RotatingLogTest, KeepZeroTruncatesAndLongLinesAreWhole) {
  const fs::path file = dir_ / "engine.log";
  auto log = RotatingLog::open(file, 8, 0);
  ASSERT_TRUE(log.ok());
  (*log)->write_line("a much longer line than the limit");
  (*log)->write_line("b");
  EXPECT_EQ(slurp(file), "b\n");
  EXPECT_FALSE(fs::exists(file.string() + ".1"));
}

TEST_F(RotatingLogTest, BadArguments) {
  EXPECT_FALSE(RotatingLog::open(dir_ / "x.log", 0, 1).ok());
  EXPECT_FALSE(RotatingLog::open(dir_ / "x.log", 10, -1).ok());
  auto r = RotatingLog::open("/proc/kvgate-cannot-write/x.log", 10, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("cannot open log file"), std::string::npos);
}

}  // namespace
}  // namespace kvgate::engine
