#!/usr/bin/env bash
# The test suite's first tier: what decides whether a change is good. It sets up
# (scripts/setup.sh: packages, the first tier's targets, the pinned engine, the npm clients),
# then runs
#   1. every unit test and the first tier's end-to-end tests, which run the real pinned
#      llama-server (and an ik_llama.cpp build named by KVGATE_IK_SERVER) on synthesized models;
#   2. the formatting check (scripts/lint.sh);
#   3. the unit tests of the parsers and servers again under AddressSanitizer +
#      UndefinedBehaviorSanitizer (CMake preset "asan", clang), skipped with KVGATE_SKIP_ASAN=1.
# The second tier (scripts/test-long.sh) runs the rest: docs/TESTING.md lists what is where.
# Each phase's wall time is printed at the end. Extra arguments are passed to ctest (e.g. -R Gguf).
set -euo pipefail
cd "$(dirname "$0")/.."
PHASE_TAG=test
source scripts/phases.sh

phase "setup: packages, build, engine, test clients"
scripts/setup.sh
source scripts/build-env.sh

jobs=$(nproc)
phase "unit and end-to-end tests (ctest -L 'unit|e2e|faults')"
ctest --test-dir build --output-on-failure -j "$jobs" -L '^(unit|e2e|faults)$' "$@"

phase "formatting (scripts/lint.sh)"
scripts/lint.sh

if [[ "${KVGATE_SKIP_ASAN:-0}" != 1 ]]; then
  phase "asan build: the parsers' and servers' unit tests"
  cmake --preset asan >/dev/null
  cmake --build build-asan -j "$jobs" --target sanitized_tests
  phase "asan tests: AddressSanitizer + UndefinedBehaviorSanitizer"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j "$jobs" -L '^unit$' "$@"
fi
phase "done"
printf '[test] first tier passed\n' >&2
