// The disk side of saved engine states: what is restored, what is refused, and the budget.
// Here the test writes the bytes an engine would (the e2e tests use the real engine).
#include "kvstate/kv_files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <random>
#include <thread>

namespace kvgate::gateway {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class KvFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kvgate-kvfiles-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<KvFiles> open(uint64_t budget = 1 << 20, json identity = {{"model", "a"}}) {
    auto f = KvFiles::open(dir_, budget, std::move(identity));
    EXPECT_TRUE(f.ok()) << (f.ok() ? "" : f.error().message());
    return f.ok() ? std::move(*f) : nullptr;
  }
  // What an engine does on save: writes `bytes` random bytes under the name it is given.
  std::string engine_writes(KvFiles& files, const std::string& session, size_t bytes) {
    const std::string temp = files.temp_name(session);
    std::ofstream out(dir_ / temp, std::ios::binary);
    std::mt19937 rng(static_cast<uint32_t>(bytes));
    for (size_t i = 0; i < bytes; ++i) out.put(static_cast<char>(rng()));
    return temp;
  }
  KvFileRecord save(KvFiles& files, const std::string& session, size_t bytes, uint64_t tokens = 100) {
    auto r = files.commit(engine_writes(files, session, bytes),
                          {.session = session, .tokens = tokens, .prefix_messages = 3, .prefix_hash = 42});
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message());
    return r.ok() ? *r : KvFileRecord{};
  }
  size_t files_in_dir() const {
    size_t n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_)) ++n;
    return n;
  }

  fs::path dir_;
};

TEST_F(KvFilesTest, ASavedStateIsFoundAgainAfterReopening) {
  {
    auto files = open();
    KvFileRecord r = save(*files, "s_1", 5000, 321);
    EXPECT_EQ(r.bytes, 5000u);
    EXPECT_NE(r.file_hash, 0u);
#ifndef _WIN32  // Windows: an access list, set by util::make_private_file
    struct stat st {};
    ASSERT_EQ(::stat((dir_ / files->file_name("s_1")).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u) << "the state holds the conversation's tokens";
#endif
  }
  auto files = open();
  auto found = files->find("s_1");
  ASSERT_TRUE(found);
  EXPECT_EQ(found->tokens, 321u);
  EXPECT_EQ(found->prefix_messages, 3u);
  EXPECT_EQ(found->prefix_hash, 42u);
  EXPECT_EQ(files->total_bytes(), 5000u);
  EXPECT_FALSE(files->find("s_2"));
}

TEST_F(KvFilesTest, AFileOfAnotherIdentityIsKeptButNeverFound) {
  { save(*open(1 << 20, {{"model", "a"}, {"cache_type_k", "f16"}}), "s_1", 1000); }
  auto other = open(1 << 20, {{"model", "a"}, {"cache_type_k", "q8_0"}});
  EXPECT_FALSE(other->find("s_1"));
  EXPECT_TRUE(other->record("s_1")) << "kept: it is the right one again when the settings change back";
  EXPECT_TRUE(open(1 << 20, {{"model", "a"}, {"cache_type_k", "f16"}})->find("s_1"));
}

TEST_F(KvFilesTest, ATruncatedOrAlteredFileIsDeletedNotFound) {
  auto files = open();
  save(*files, "cut", 4000);
  save(*files, "flipped", 4000);
  fs::resize_file(dir_ / files->file_name("cut"), 3000);
  {
    std::fstream f(dir_ / files->file_name("flipped"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(2000);
    f.put('\x5a');
    f.seekp(2001);
    f.put('\xa5');
  }
  EXPECT_FALSE(files->find("cut"));
  EXPECT_FALSE(files->find("flipped"));
  EXPECT_FALSE(fs::exists(dir_ / files->file_name("cut")));
  EXPECT_FALSE(files->record("flipped"));
  EXPECT_EQ(files->total_bytes(), 0u);
  EXPECT_EQ(files_in_dir(), 0u);
}

TEST_F(KvFilesTest, TheBudgetEvictsTheLeastRecentlyUsed) {
  auto files = open(10000);
  save(*files, "a", 4000);
  save(*files, "b", 4000);
  // Used since; "b" is now the least recently used. (Times are in ms: make them differ.)
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  files->touch("a");
  save(*files, "c", 4000);
  EXPECT_LE(files->total_bytes(), 10000u);
  EXPECT_TRUE(files->record("a"));
  EXPECT_FALSE(files->record("b"));
  EXPECT_TRUE(files->record("c"));
  EXPECT_EQ(files->evictions(), 1u);
  EXPECT_EQ(files_in_dir(), 4u);  // two states, two records
}

TEST_F(KvFilesTest, AStateLargerThanTheWholeBudgetIsRefused) {
  auto files = open(1000);
  const std::string temp = engine_writes(*files, "big", 2000);
  auto r = files->commit(temp, {.session = "big", .tokens = 10});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("larger than the whole disk budget"), std::string::npos) << r.error().message();
  EXPECT_EQ(files_in_dir(), 0u);
}

TEST_F(KvFilesTest, ANewSaveReplacesTheSessionsFile) {
  auto files = open();
  save(*files, "s", 3000, 100);
  save(*files, "s", 5000, 200);
  EXPECT_EQ(files->count(), 1u);
  EXPECT_EQ(files->total_bytes(), 5000u);
  EXPECT_EQ(files->find("s")->tokens, 200u);
}

TEST_F(KvFilesTest, LeftoversAreCleanedWhenOpened) {
  {
    auto files = open();
    save(*files, "kept", 1000);
    save(*files, "orphan", 1000);
    engine_writes(*files, "half-written", 500);  // a save that never completed
    fs::path record = dir_ / files->file_name("orphan");
    record.replace_extension(".json");
    fs::remove(record);
    std::ofstream(dir_ / "kv-0000000000000000.json") << "{not json";
  }
  auto files = open();
  EXPECT_TRUE(files->find("kept"));
  EXPECT_EQ(files->count(), 1u);
  EXPECT_EQ(files_in_dir(), 2u);
}

TEST_F(KvFilesTest, FileNamesAreTheEnginesKindWhateverTheSessionId) {
  auto files = open();
  for (const std::string id : {"s_0123", "scope~../../etc/passwd", "x y/z\\w", ""}) {
    const std::string name = files->file_name(id);
    EXPECT_EQ(name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-."), std::string::npos) << name;
    const std::string temp = files->temp_name(id);
    EXPECT_EQ(temp.find('/'), std::string::npos) << temp;
  }
}

// kvgate up --engines: a conversation that moved from an engine that went down takes that
// engine's saved state, checked as its own would be.
TEST_F(KvFilesTest, AnotherEnginesStateIsTakenOnlyIntactAndOfTheSameIdentity) {
  const fs::path theirs_dir = dir_ / "engine-0";
  auto theirs = KvFiles::open(theirs_dir, 1 << 20, {{"model", "a"}});
  ASSERT_TRUE(theirs.ok());
  auto write = [&](const std::string& session, size_t bytes) {
    const std::string temp = (*theirs)->temp_name(session);
    std::ofstream out(theirs_dir / temp, std::ios::binary);
    for (size_t i = 0; i < bytes; ++i) out.put(static_cast<char>(i * 7));
    out.close();
    auto r = (*theirs)->commit(
        temp, {.session = session, .tokens = 90, .prefix_messages = 2, .prefix_hash = 7, .scope = "key-a"});
    EXPECT_TRUE(r.ok());
  };
  write("s_old", 4000);
  write("s_other", 3000);
  auto records = KvFiles::records_in(theirs_dir);
  ASSERT_EQ(records.size(), 2u);
  const KvFileRecord old = records[0].session == "s_old" ? records[0] : records[1];
  EXPECT_EQ(old.scope, "key-a");
  EXPECT_EQ(old.prefix_hash, 7u);

  auto mine = open();  // dir_, the same identity
  auto taken = mine->adopt(theirs_dir, old, "s_new");
  ASSERT_TRUE(taken.ok()) << taken.error().message();
  EXPECT_EQ(taken->session, "s_new");
  EXPECT_EQ(taken->tokens, 90u);
  EXPECT_EQ(taken->file_hash, old.file_hash);
  ASSERT_TRUE(mine->find("s_new"));
  EXPECT_TRUE((*theirs)->find("s_old")) << "the other engine keeps its own file";

  auto other_identity = KvFiles::open(dir_ / "engine-2", 1 << 20, {{"model", "b"}});
  ASSERT_TRUE(other_identity.ok());
  EXPECT_FALSE((*other_identity)->adopt(theirs_dir, old, "s_new").ok());
  EXPECT_FALSE((*other_identity)->find("s_new"));

  // Changed since its record was read (the other engine saved again): not taken.
  KvFileRecord stale = records[0].session == "s_other" ? records[0] : records[1];
  stale.file_hash ^= 1;
  EXPECT_FALSE(mine->adopt(theirs_dir, stale, "s_stale").ok());
  EXPECT_FALSE(mine->find("s_stale"));
  fs::remove(theirs_dir / (*theirs)->file_name("s_other"));
  EXPECT_FALSE(
      mine->adopt(theirs_dir, records[0].session == "s_other" ? records[0] : records[1], "s_gone").ok());
}

}  // namespace
}  // namespace kvgate::gateway

namespace kvgate::gateway {
namespace {

// A session id that is not UTF-8 (refused at the edge since, request_checks.h) must still never
// make a save throw: before, the record's dump threw type_error.316 after the state file was
// written, and every later turn on that slot failed the same way.
TEST(KvFilesRecordTest, AnIdThatIsNotUtf8IsWrittenNotThrown) {
  const fs::path dir = fs::temp_directory_path() / ("kvgate-kvfiles-utf8-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  {
    auto files = KvFiles::open(dir, 1 << 20, {{"model", "a\xff"}});
    ASSERT_TRUE(files.ok());
    const std::string session = "open~\xff\xfe-bad";
    const std::string temp = (*files)->temp_name(session);
    std::ofstream(dir / temp, std::ios::binary) << "state";
    std::optional<Result<KvFileRecord>> r;
    ASSERT_NO_THROW(r.emplace((*files)->commit(temp, {.session = session, .tokens = 1, .prefix_messages = 1})));
    EXPECT_TRUE(r->ok()) << (r->ok() ? "" : r->error().message());
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kvgate::gateway
