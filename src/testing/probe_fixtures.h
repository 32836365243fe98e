// Test support: the probe records of the real builds in tests/fixtures/{mainline,ik}/ (the
// pinned llama-server; ik_llama.cpp 8337e4cd3, recorded by scripts/record-ik-fixtures.sh),
// read and analysed. Used by the plan tests.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "plan/server_caps.h"
#include "testing/paths.h"

namespace kvgate::testing {

using plan::ServerCaps;
using plan::analyze_probes;
using plan::parse_probe_record;

// The file tests/fixtures/NAME, whole.
inline std::string read_fixture(const std::string& name) {
  std::ifstream in(std::string(kvgate::testing::source_dir()) + "/tests/fixtures/" + name, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The caps of a recorded build: "mainline" or "ik".
inline ServerCaps fixture_caps(const std::string& fork) {
  auto rec = parse_probe_record(read_fixture(fork + "/probes.txt"));
  EXPECT_TRUE(rec.ok()) << rec.error().message();
  auto caps = analyze_probes(*rec);
  EXPECT_TRUE(caps.ok()) << caps.error().message();
  return *caps;
}

}  // namespace kvgate::testing
