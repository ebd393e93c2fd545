#!/usr/bin/env bash
# The ThreadSanitizer run (issue 19): builds onnx2ggml, the unit tests and the API tests with
# -fsanitize=thread (CMake preset `tsan`, ggml included) and runs what uses threads under it:
#   - the API tests: two Sessions on two threads, one Session shared by two threads, a Session run
#     from other threads than the one that made it, the process-wide memory budget, the soak test
#     (one Session run many times while two more run on two threads);
#   - `run` with two threads on models whose weights are made by several threads at load, and on an
#     LSTM whose host kernel shares its directions with ggml's worker threads (host_parallel_for).
# Any report fails the run (halt_on_error).
#
# What it leaves out, and why: OpenMP (libgomp is not built with TSan, so its barriers are invisible to it
# and every parallel region would be reported as a race) and with it the oneDNN backend (Debian's libdnnl
# runs on libgomp): the preset builds ggml with its own thread pool (GGML_OPENMP=OFF), which TSan sees
# whole. The oneDNN backend's threading is checked by the API tests in the normal build (bit for bit
# across threads) and by the ASan run.
#
# Needs the models the main test run exports (build/test-models: `ctest -L models` or scripts/test.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
models=$here/build/test-models
if [ ! -f "$models/resnet18/model.onnx" ]; then
  echo "tsan: no $models (run the main test suite first)" >&2
  exit 1
fi
cmake --preset tsan >build-tsan.configure.log 2>&1 || { cat build-tsan.configure.log; exit 1; }
cmake --build build-tsan -j "$(nproc)" --target onnx2ggml api_tests
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 history_size=4"
work=$here/build-tsan/tsan-work
mkdir -p "$work"

O2G_CLI=$here/build-tsan/onnx2ggml O2G_MODELS=$models O2G_WORK=$work O2G_SOAK_RUNS=300 \
  ./build-tsan/tests/api_tests --gtest_brief=1

for m in resnet18 mobilenet_v2 squeezenet1_1; do
  ./build-tsan/onnx2ggml run "$models/$m/model.onnx" --input "input=$models/$m/input.npy" --threads 2 \
    --output-dir "$work/$m" >/dev/null
  echo "tsan: run $m ok"
done
# an LSTM in both directions (its host kernel runs the directions on ggml's worker threads)
/usr/bin/python3 - "$work/lstm.onnx" <<'EOF'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(0)
T, B, I, H = 12, 3, 8, 16
init = [numpy_helper.from_array(rng.standard_normal((2, 4 * H, I)).astype(np.float32) * 0.3, "W"),
        numpy_helper.from_array(rng.standard_normal((2, 4 * H, H)).astype(np.float32) * 0.3, "R")]
node = helper.make_node("LSTM", ["x", "W", "R"], ["y"], hidden_size=H, direction="bidirectional")
g = helper.make_graph([node], "lstm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [T, B, I])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [T, 2, B, H])], init)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
EOF
./build-tsan/onnx2ggml run "$work/lstm.onnx" --random-inputs 0 --threads 2 --output-dir "$work/lstm" >/dev/null
echo "tsan: run lstm ok"
echo "tsan: clean"
