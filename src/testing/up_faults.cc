#include "testing/up_faults.h"

#include <algorithm>
#include <cstdlib>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>
#include <signal.h>
#include <sqlite3.h>
#include <unistd.h>

#include "engine/pinned.h"
#include "gguf/file.h"
#include "session/session_store.h"
#include "testing/engines_under_test.h"
#include "testing/eventually.h"
#include "util/net.h"

namespace kvgate::testing {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

int run(const std::string& command) { return std::system((command + " >/dev/null 2>&1").c_str()); }

}  // namespace

json conversation(const std::string& tag, int turns) {
  json m = json::array({{{"role", "system"}, {"content", fmt::format("You are the assistant of {}.", tag)}}});
  for (int i = 0; i < turns; ++i) {
    m.push_back({{"role", "user"}, {"content", fmt::format("[{}] question {}", tag, i)}});
    if (i + 1 < turns) m.push_back({{"role", "assistant"}, {"content", "fine"}});
  }
  return m;
}

std::string kind_of(const JsonAnswer& a) {
  if (a.status == 0) return "connection broken";
  std::string k = std::to_string(a.status);
  if (a.status != 200 && a.body.is_object() && a.body.contains("error"))
    k += " " + a.body["error"].value("code", "");
  return k;
}

void UpFaultsTest::SetUp() {
  dir_ = fs::temp_directory_path() /
         fmt::format("kvgate_up_faults_{}_{}", ::getpid(),
                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
  fs::remove_all(dir_);
  fs::create_directories(dir_);
  auto port = util::pick_free_port();
  ASSERT_TRUE(port.ok());
  port_ = *port;
}

void UpFaultsTest::TearDown() {
  up_.reset();
  if (!mounted_image_.empty()) run("umount -l " + (dir_ / "state").string());
  fs::remove_all(dir_);
}

fs::path UpFaultsTest::synth(const gguf::SynthSpec& spec, const std::string& name) {
  auto vocab_path = engine::vocab_file("qwen2");
  EXPECT_TRUE(vocab_path.ok());
  auto vocab = gguf::File::open(*vocab_path);
  EXPECT_TRUE(vocab.ok());
  const fs::path path = dir_ / name;
  EXPECT_TRUE(gguf::synthesize(spec, &*vocab, path).ok());
  return path;
}

std::vector<std::string> UpFaultsTest::args(const fs::path& model, std::vector<std::string> extra) {
  const std::vector<std::pair<std::string, std::string>> base = {
      {"--listen", fmt::format("127.0.0.1:{}", port_)},
      {"--ctx", "4096"},
      {"--threads", engine_threads()},
      {"--health-interval", "500ms"},
      {"--probe-timeout", "2s"},
      {"--zombie-after", "2"},
      {"--backoff", "200ms"},
      {"--stop-grace", "2s"},
      {"--keepalive", "300ms"},
      {"--log-dir", (dir_ / "logs").string()},
      {"--state-dir", (dir_ / "state").string()}};
  std::vector<std::string> a{model.string()};
  for (const auto& [k, v] : base) {
    if (std::find(extra.begin(), extra.end(), k) == extra.end()) a.insert(a.end(), {k, v});
  }
  a.insert(a.end(), extra.begin(), extra.end());
  a.insert(a.end(), server_args_.begin(), server_args_.end());
  return a;
}

void UpFaultsTest::start(std::vector<std::string> a, std::vector<std::string> prefix) {
  up_ = std::make_unique<UpProcess>(std::move(a), std::move(prefix));
  ASSERT_TRUE(up_->wait_ready()) << up_->output();
  learn_bias();
}

void UpFaultsTest::learn_bias() {
  httplib::Client c("127.0.0.1", port_);
  auto res =
      c.Post("/tokenize", R"({"content":" the of and to a in is it that for on with as was he by at"})",
             "application/json");
  ASSERT_TRUE(res && res->status == 200);
  bias_ = json::array();
  // (Parsed into a variable: a range-for over a member of a temporary reads freed memory.)
  const json reply = json::parse(res->body, nullptr, false);
  if (reply.is_object()) {
    for (const auto& id : reply.value("tokens", json::array())) bias_.push_back({id, 100});
  }
}

json UpFaultsTest::body(const json& messages, int max_tokens) {
  return {{"messages", messages}, {"max_tokens", max_tokens}, {"logit_bias", bias_}};
}

JsonAnswer UpFaultsTest::chat(const json& messages, int max_tokens) {
  httplib::Client c("127.0.0.1", port_);
  c.set_read_timeout(120s);
  return post_json(c, "/v1/chat/completions", body(messages, max_tokens));
}

json UpFaultsTest::health() {
  httplib::Client c("127.0.0.1", port_);
  auto res = c.Get("/health");
  return res ? json::parse(res->body, nullptr, false) : json();
}

json UpFaultsTest::status() {
  httplib::Client c("127.0.0.1", port_);
  auto res = c.Get("/kvgate/v1/status");
  return res && res->status == 200 ? json::parse(res->body, nullptr, false) : json();
}

size_t UpFaultsTest::wait_events(size_t n) {
  eventually([&] { return up_->events("request").size() >= n; });
  return up_->events("request").size();
}

json UpFaultsTest::next_request_event(size_t before, std::optional<size_t> messages) {
  json found;
  eventually([&] {
    auto ev = up_->events("request");
    for (size_t k = before; k < ev.size(); ++k) {
      if (!messages || ev[k].value("messages", size_t{0}) == *messages) {
        found = ev[k];
        return true;
      }
    }
    return false;
  });
  return found;
}

std::vector<std::string> UpFaultsTest::private_state_mount(const std::string& size) {
  const fs::path image = dir_ / "state.img";
  if (!fs::exists(image)) {
    if (run(fmt::format("truncate -s {} {} && mkfs.ext4 -q -F {}", size, image.string(), image.string())) !=
        0) {
      return {};
    }
  }
  fs::create_directories(dir_ / "state");
  const std::string probe =
      fmt::format("unshare -m --propagation private sh -c 'mount -o loop,errors=remount-ro {} {}'",
                  image.string(), (dir_ / "state").string());
  if (run(probe) != 0) return {};
  mounted_image_ = image.string();
  return {"/usr/bin/unshare",  // the prefix is executed as is (no PATH search); util-linux puts it here
          "-m",
          "--propagation",
          "private",
          "sh",
          "-c",
          fmt::format("mount -o loop,errors=remount-ro {} {} && exec \"$0\" \"$@\"", image.string(),
                      (dir_ / "state").string())};
}
bool UpFaultsTest::wait_image_released() {
  return eventually([&] { return run("losetup -j " + mounted_image_ + " | grep -q .") != 0; }, 60s);
}

int UpFaultsTest::in_namespace(const std::string& command) {
  return run(fmt::format("nsenter -t {} -m -- sh -c '{}'", up_->pid(), command));
}

StoreCheck check_store(const fs::path& db, const std::vector<std::string>& tags) {
  StoreCheck out;
  auto store = session::SessionStore::open(db);
  if (!store.ok()) return out;
  sqlite3* raw = nullptr;
  sqlite3_open_v2(db.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* q = nullptr;
  sqlite3_prepare_v2(raw, "SELECT id FROM sessions", -1, &q, nullptr);
  std::vector<std::string> ids;
  while (sqlite3_step(q) == SQLITE_ROW)
    ids.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(q, 0)));
  sqlite3_finalize(q);
  sqlite3_close(raw);
  out.sessions = ids.size();
  for (const auto& id : ids) {
    auto s = (*store)->load(id);
    if (!s.ok() || !s->has_value()) continue;
    const std::string text = (**s).state.dump();
    std::string owner;
    for (const auto& t : tags) {
      if (text.find("[" + t + "]") == std::string::npos) continue;
      if (!owner.empty()) ++out.mixed;
      owner = t;
    }
    out.messages_by_tag[owner] = (**s).state.value("length", size_t{0});
  }
  return out;
}

}  // namespace kvgate::testing
