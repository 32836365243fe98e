#!/usr/bin/env bash
# The test suite's second tier: everything scripts/test.sh leaves out (docs/TESTING.md says
# what and why). It sets up what the first tier does plus the second tier's binaries and the
# pinned agent CLIs (scripts/setup.sh --long), then runs
#   1. the tests labelled tier2: the agent CLIs through kvgate, the long end-to-end runs, the
#      long fault, abuse and load cases (KVGATE_FAULTS=1);
#   2. every unit test under AddressSanitizer + UndefinedBehaviorSanitizer (the first tier
#      runs the parsers' and servers'), skipped with KVGATE_SKIP_ASAN=1;
#   3. on x86-64: the arm64 cross build with GCC 11 and its unit tests under qemu-user
#      (scripts/cross-arm64.sh), skipped with KVGATE_SKIP_ARM64=1;
#   4. on x86-64: the Windows cross build with mingw-w64, its unit tests and `kvgate.exe up`
#      under wine (scripts/cross-windows.sh), skipped with KVGATE_SKIP_WINDOWS=1.
# Run the first tier too before resolving a change that touches what this one covers. Each
# phase's wall time is printed at the end. Extra arguments are passed to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
PHASE_TAG=long
source scripts/phases.sh

phase "setup: packages, all targets, engine, test clients, agent CLIs"
scripts/setup.sh --long
source scripts/build-env.sh

jobs=$(nproc)
phase "second-tier tests (ctest -L tier2, KVGATE_FAULTS=1)"
KVGATE_FAULTS=1 ctest --test-dir build --output-on-failure -j "$jobs" -L '^tier2$' "$@"

if [[ "${KVGATE_SKIP_ASAN:-0}" != 1 ]]; then
  phase "asan build: every unit test"
  cmake --preset asan >/dev/null
  mapfile -t unit_targets < <(ninja -C build-asan -t targets all | sed -n 's/^\([A-Za-z0-9_]*_test\): .*/\1/p' |
                                grep -v '_e2e_test$' | sort -u)
  cmake --build build-asan -j "$jobs" --target "${unit_targets[@]}"
  phase "asan tests: every unit test"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j "$jobs" -L '^unit$' "$@"
fi
if [[ "${KVGATE_SKIP_ARM64:-0}" != 1 ]]; then
  phase "arm64 cross build (GCC 11): unit tests under qemu-aarch64"
  scripts/cross-arm64.sh
fi
if [[ "${KVGATE_SKIP_WINDOWS:-0}" != 1 ]]; then
  phase "windows cross build (mingw-w64): unit tests and kvgate.exe up under wine"
  scripts/cross-windows.sh
fi
phase "done"
printf '[long] second tier passed\n' >&2
