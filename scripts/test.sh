#!/usr/bin/env bash
# The whole test suite: setup, build, then ctest (unit, models, error paths, example).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build="${BUILD_DIR:-$here/build}"
"$here/scripts/setup.sh"
"$here/scripts/build.sh" "$build"
(cd "$build" && ctest --output-on-failure -j "$(nproc)" "$@")
# ASan+UBSan over the unit tests, the robustness corpus and a conformance subset
[ "${ONNX2GGML_SKIP_ASAN:-0}" = 1 ] || "$here/scripts/test-asan.sh"
