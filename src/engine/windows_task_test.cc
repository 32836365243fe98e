#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/service_unit.h"

namespace kvgate::engine {
namespace {

ServiceUnitOptions windows_sample() {
  ServiceUnitOptions o;
  o.name = "kvgate";
  o.kvgate_binary = "C:\\Program Files\\kvgate\\kvgate.exe";
  o.up_args = {"D:\\models\\Qwen 27B & co.gguf", "--listen", "127.0.0.1:8787", "--api-key", "a\"b<c"};
  o.log_file = "C:\\Users\\me\\AppData\\Local\\kvgate\\cache\\logs\\kvgate-task.log";
  o.restart_delay_s = 5;
  o.start_limit_burst = 5;
  return o;
}

// The text between <tag> and </tag>, XML entities decoded.
std::string element(const std::string& xml, const std::string& tag) {
  const size_t a = xml.find("<" + tag + ">");
  const size_t b = xml.find("</" + tag + ">");
  if (a == std::string::npos || b == std::string::npos) return "";
  std::string raw = xml.substr(a + tag.size() + 2, b - a - tag.size() - 2), out;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != '&') {
      out += raw[i];
      continue;
    }
    const size_t semi = raw.find(';', i);
    const std::string e = raw.substr(i + 1, semi - i - 1);
    out += e == "amp" ? '&' : e == "lt" ? '<' : e == "gt" ? '>' : e == "quot" ? '"' : '\'';
    i = semi;
  }
  return out;
}

// How the Windows C runtime splits a command line (the rules of CommandLineToArgvW for the
// arguments after the program), written from its documentation.
std::vector<std::string> split_windows(const std::string& line) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i >= line.size()) break;
    std::string arg;
    bool quoted = false;
    for (; i < line.size() && (quoted || (line[i] != ' ' && line[i] != '\t')); ++i) {
      size_t slashes = 0;
      while (i < line.size() && line[i] == '\\') ++slashes, ++i;
      if (i < line.size() && line[i] == '"') {
        arg.append(slashes / 2, '\\');
        if (slashes % 2 == 1) {
          arg += '"';
        } else {
          quoted = !quoted;
        }
      } else {
        arg.append(slashes, '\\');
        if (i < line.size()) arg += line[i];
        if (i >= line.size()) break;
      }
    }
    out.push_back(arg);
  }
  return out;
}

TEST(WindowsTaskTest, RunsUpThroughCmdWithTheLogAndRestartPolicy) {
  const auto task = windows_task(windows_sample());
  ASSERT_TRUE(task.ok()) << task.error().message();
  const std::string& x = *task;
  EXPECT_NE(x.find("encoding=\"UTF-16\""), std::string::npos);
  EXPECT_EQ(element(x, "Command"), "cmd.exe");
  EXPECT_NE(x.find("<LogonTrigger>"), std::string::npos);
  EXPECT_NE(x.find("<RestartOnFailure><Interval>PT1M</Interval><Count>5</Count></RestartOnFailure>"),
            std::string::npos);
  EXPECT_NE(x.find("<ExecutionTimeLimit>PT0S</ExecutionTimeLimit>"), std::string::npos) << "no time limit";
  EXPECT_NE(x.find("<MultipleInstancesPolicy>IgnoreNew</MultipleInstancesPolicy>"), std::string::npos);
  // Well-formed where a parser is strict: the root element first, no "--" inside a comment.
  EXPECT_LT(x.find("<Task "), x.find("<!--"));
  for (size_t at = x.find("<!--"); at != std::string::npos; at = x.find("<!--", at + 4)) {
    const size_t end = x.find("-->", at + 4);
    ASSERT_NE(end, std::string::npos);
    EXPECT_EQ(x.substr(at + 4, end - at - 4).find("--"), std::string::npos) << x.substr(at, end - at + 3);
  }
}

TEST(WindowsTaskTest, TheArgumentsSplitBackIntoKvgatesOwn) {
  const auto o = windows_sample();
  const auto task = windows_task(o);
  ASSERT_TRUE(task.ok());
  const std::string args = element(*task, "Arguments");
  ASSERT_EQ(args.rfind("/d /s /c \"", 0), 0u) << args;
  // cmd /s /c: the outer quotes go, the rest is the command line.
  std::string line = args.substr(std::string("/d /s /c \"").size());
  ASSERT_EQ(line.back(), '"');
  line.pop_back();
  const size_t redirect = line.rfind(" >> ");
  ASSERT_NE(redirect, std::string::npos) << line;
  EXPECT_EQ(split_windows(line.substr(redirect + 4)), (std::vector<std::string>{o.log_file, "2>&1"}));
  std::vector<std::string> expected{o.kvgate_binary, "up"};
  expected.insert(expected.end(), o.up_args.begin(), o.up_args.end());
  EXPECT_EQ(split_windows(line.substr(0, redirect)), expected);
}

TEST(WindowsTaskTest, APercentSignIsRefused) {
  auto o = windows_sample();
  o.up_args.push_back("--api-key=100%sure");
  const auto task = windows_task(o);
  ASSERT_FALSE(task.ok());
  EXPECT_NE(task.error().message().find("'%'"), std::string::npos);
}

}  // namespace
}  // namespace kvgate::engine
