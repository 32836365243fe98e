#include "testing/paths.h"

namespace kvgate::testing {

const char* source_dir() { return KVGATE_SOURCE_DIR; }
const char* binary_dir() { return KVGATE_BINARY_DIR; }
const char* test_emulator() { return KVGATE_TEST_EMULATOR; }
const char* kvgate_path() { return KVGATE_BINARY_DIR "/src/cli/kvgate" KVGATE_EXECUTABLE_SUFFIX; }

}  // namespace kvgate::testing
