#include "bench/progress.h"

#include <gtest/gtest.h>

namespace kvgate::bench {
namespace {

TEST(ProgressTest, Renders) {
  EXPECT_EQ(TerminalProgress::render(5, 10, "direct: turn 5/10", 3.2, 10),
            "[#####-----] 5/10 3s direct: turn 5/10");
  EXPECT_EQ(TerminalProgress::render(0, 0, "", 0, 4), "[----] 0/0 0s ");
  EXPECT_EQ(TerminalProgress::render(12, 10, "x", 1, 4), "[####] 12/10 1s x");
  // A silent reporter does nothing (and does not crash) when stderr is not a terminal.
  TerminalProgress quiet(false);
  quiet.update(1, 2, "x");
  quiet.clear();
}

}  // namespace
}  // namespace kvgate::bench
