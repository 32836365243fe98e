#include "bench/csv.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <unistd.h>

#include "bench/output_dir.h"

namespace kvgate::bench {
namespace {

TEST(CsvTest, QuotesOnlyWhatNeedsIt) {
  EXPECT_EQ(csv_field("plain"), "plain");
  EXPECT_EQ(csv_field(""), "");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_field("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(csv_field("cr\r"), "\"cr\r\"");
}

TEST(CsvTest, Numbers) {
  EXPECT_EQ(format_number(12.5), "12.5");
  EXPECT_EQ(format_number(3.0), "3");
  EXPECT_EQ(format_number(1234.5678, 2), "1234.57");
  EXPECT_EQ(format_number(0.0004, 3), "0");
  EXPECT_EQ(format_number(-0.0004, 3), "0");
  EXPECT_EQ(format_number(-2.25, 1), "-2.2");  // round half to even in the binary value 2.25
  EXPECT_EQ(format_number(NAN), "");
  EXPECT_EQ(format_number(INFINITY), "inf");
  EXPECT_EQ(format_number(100, 0), "100");
}

TEST(CsvTest, RowsAndHeader) {
  CsvWriter w({"name", "value"});
  w.row({"a", "1"});
  w.row({"b,c", "2"});
  EXPECT_EQ(w.rows(), 2U);
  EXPECT_EQ(w.text(), "name,value\r\na,1\r\n\"b,c\",2\r\n");
}

TEST(OutputDirTest, CreatesTheFolderAndReplacesFiles) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("kvgate_outdir_" + std::to_string(::getpid())) / "a" / "b";
  std::filesystem::remove_all(dir.parent_path().parent_path());
  auto out = OutputDir::open(dir);
  ASSERT_TRUE(out.ok()) << out.error().message();
  ASSERT_TRUE(out->write("x.txt", "first").ok());
  ASSERT_TRUE(out->write("x.txt", "second").ok());
  std::ifstream in(dir / "x.txt");
  std::stringstream ss;
  ss << in.rdbuf();
  in.close();  // Windows removes no file that is open
  EXPECT_EQ(ss.str(), "second");
  EXPECT_EQ(out->written().size(), 2U);
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 1U);  // no temporary left behind
  // A file where the folder should be.
  auto bad = OutputDir::open(dir / "x.txt");
  EXPECT_FALSE(bad.ok());
  std::filesystem::remove_all(dir.parent_path().parent_path());
}

}  // namespace
}  // namespace kvgate::bench
