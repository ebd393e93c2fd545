#!/usr/bin/env bash
# Configures and builds onnx2ggml (and its tests) in BUILD_DIR (default: build/).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build="${1:-$here/build}"
cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release >"$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
grep "onnx2ggml:" "$build.configure.log" || true
cmake --build "$build" -j "$(nproc)"
