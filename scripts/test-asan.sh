#!/usr/bin/env bash
# The sanitizer run: builds onnx2ggml and the unit tests with ASan+UBSan (CMake preset
# `asan`, ggml included) and runs the unit tests, the API tests, the robustness corpus, the whole conformance
# suite (host kernels included), the extra op tests and the example model under them. Any sanitizer report fails the run.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
cmake --preset asan >build-asan.configure.log 2>&1 || { cat build-asan.configure.log; exit 1; }
cmake --build build-asan -j "$(nproc)" --target onnx2ggml unit_tests api_tests
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:suppressions=$here/tests/sanitizers/ubsan.supp
./build-asan/tests/unit_tests
/usr/bin/python3 tests/robustness/robustness.py build-asan/onnx2ggml build-asan/robustness-work | grep -v '^ok  '
/usr/bin/python3 tests/conformance/run_conformance.py build-asan/onnx2ggml --expect tests/conformance/expected_pass.txt | grep -E 'REGRESSION|RUNNER FAILURE|passed, .* failed'
/usr/bin/python3 tests/ops/extra_ops.py build-asan/onnx2ggml build-asan/extra-ops-work | grep -v '^ok   '
# the public C++/C API through libonnx2ggml.so, on the models the main test run exported (tests/api/test_api.cpp)
if [ -f build/test-models/resnet18/model.onnx ]; then
  O2G_CLI=$here/build-asan/onnx2ggml O2G_MODELS=$here/build/test-models O2G_WORK=$here/build-asan/api-work \
    ./build-asan/tests/api_tests --gtest_brief=1
else
  echo "asan: api_tests skipped (no build/test-models: run the main test suite first)"
fi
ex=examples/tinycnn
./build-asan/onnx2ggml check "$ex/model.onnx" --input "input=$ex/input.npy" --expect "output=$ex/expected.npy" --atol 1e-5
echo "asan: clean"
