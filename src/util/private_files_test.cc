#include "util/private_files.h"

#include <fstream>

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace kvgate::util {
namespace {

namespace fs = std::filesystem;

unsigned mode_of(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
  return st.st_mode & 0777;
}

TEST(PrivateFilesTest, DirectoriesAndFilesAreOwnerOnlyWhateverTheUmask) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("kvgate_private_{}", ::getpid());
  fs::remove_all(dir);
  const mode_t old = ::umask(022);
  ASSERT_TRUE(make_private_dir(dir / "state").ok());
  EXPECT_EQ(mode_of(dir / "state"), 0700u);
  ASSERT_TRUE(make_private_file(dir / "state/sessions.db").ok());
  EXPECT_EQ(mode_of(dir / "state/sessions.db"), 0600u);
  // An existing world-readable file is restricted.
  { std::ofstream(dir / "state/old.log") << "x"; }
  ::chmod((dir / "state/old.log").c_str(), 0644);
  ASSERT_TRUE(make_private_file(dir / "state/old.log").ok());
  EXPECT_EQ(mode_of(dir / "state/old.log"), 0600u);
  ASSERT_TRUE(write_private_file(dir / "state/engine.key", "secret\n").ok());
  EXPECT_EQ(mode_of(dir / "state/engine.key"), 0600u);
  std::ifstream in(dir / "state/engine.key");
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "secret");
  ASSERT_TRUE(write_private_file(dir / "state/engine.key", "other\n").ok());  // replaced
  EXPECT_EQ(mode_of(dir / "state/engine.key"), 0600u);
  ::umask(old);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kvgate::util
