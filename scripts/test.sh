#!/usr/bin/env bash
# The whole test suite: setup, build, ctest (unit, models, conformance, robustness, example),
# then the Vulkan backend's tests (a second build, run on Mesa's llvmpipe), the ASan+UBSan run and a
# short fuzz run.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build="${BUILD_DIR:-$here/build}"
"$here/scripts/setup.sh" --bench  # --bench: ONNX Runtime for the compare_ort and conformance reference tests
df -h "$here" | tail -1 | awk '{print "disk free before the tests: " $4 " (a fresh run peaks at about 10 GB)"}'
"$here/scripts/build.sh" "$build"
(cd "$build" && ctest --output-on-failure -j "$(nproc)" "$@")
# the Vulkan backend on a Vulkan device implemented on the CPU (scripts/test-vulkan.sh: build-vulkan/, ctest -L vulkan)
[ "${ONNX2GGML_SKIP_VULKAN:-0}" = 1 ] || BUILD_DIR="$here/build-vulkan" "$here/scripts/test-vulkan.sh"
# ASan+UBSan over the unit tests, the robustness corpus and a conformance subset
[ "${ONNX2GGML_SKIP_ASAN:-0}" = 1 ] || "$here/scripts/test-asan.sh"
# a short fuzz run of every libFuzzer target (the long runs: scripts/fuzz.sh 1800, docs/robustness.md)
# A crash found here is printed with its reproducer (build-fuzz/crashes/) but does not fail the run:
# a minute of random search is not a regression test; every crash found becomes a robustness case.
[ "${ONNX2GGML_SKIP_FUZZ:-0}" = 1 ] || "$here/scripts/fuzz.sh" 60 || echo "fuzz: CRASH FOUND (see build-fuzz/crashes and build-fuzz/fuzz_*.log)"
