// Test support: waiting for what another thread or process does, without betting on how long
// it takes. eventually(done) polls `done` every few milliseconds until it holds or the deadline
// passes, and says whether it held. The deadline is for failures only (30 s unless given): on a
// loaded machine, and more so under sanitizers, threads and processes run late; the tests judge
// what happens, not how fast. Header-only, so that tests which do not link kvgate_testing can
// use it too.
#pragma once

#include <chrono>
#include <thread>

namespace kvgate::testing {

template <typename F>
bool eventually(F done, std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace kvgate::testing
