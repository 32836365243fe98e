// Where this build's sources and outputs are, for tests: fixtures under source_dir()/tests,
// the kvgate binary under binary_dir(). Only paths.cc is compiled with the paths, so no other
// test object depends on where the checkout lies and ccache reuses them in any clone.
#pragma once

namespace kvgate::testing {

const char* source_dir();     // the checkout's root
const char* binary_dir();     // the build folder
const char* test_emulator();  // what runs a target binary when cross-compiled (qemu), else ""
const char* kvgate_path();    // this build's kvgate binary (kvgate.exe on Windows)

}  // namespace kvgate::testing
