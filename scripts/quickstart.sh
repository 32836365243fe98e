#!/usr/bin/env bash
# Quick start: set up what serving needs (the kvgate binary and the pinned engine; no test
# targets), then serve the gateway in front of the engine on the built-in default model
# (http://127.0.0.1:8787/v1). Extra arguments go to `kvgate up`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --serve
exec build/src/cli/kvgate up "$@"
