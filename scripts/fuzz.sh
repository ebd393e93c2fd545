#!/usr/bin/env bash
# Builds the libFuzzer targets (CMake preset `fuzz`: clang, ASan+UBSan) and fuzzes each for
# SECONDS (default 60, side by side): fuzz_model (load + shapes + folding + lowering), fuzz_npy, fuzz_gguf.
# usage: fuzz.sh [SECONDS] [TARGETS]   (TARGETS: a comma-separated subset of model,npy,gguf; default all)
# Seeds: the ONNX backend test models, the example, .npy and GGUF files made here.
# Prints per target: executions, executions per second, corpus size, and the crash count;
# exits 1 if any target found a crash (the reproducer is left in build-fuzz/crashes/).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
secs="${1:-60}"
targets="${2:-model,npy,gguf}"
targets="${targets//,/ }"
cd "$here"
command -v clang++ >/dev/null || { echo "fuzz: clang++ is required (apt-get install clang libclang-rt-dev)"; exit 1; }
cmake --preset fuzz >build-fuzz.configure.log 2>&1 || { cat build-fuzz.configure.log; exit 1; }
cmake --build build-fuzz -j "$(nproc)" --target fuzz_model fuzz_npy fuzz_gguf onnx2ggml >build-fuzz.build.log 2>&1 || { tail -50 build-fuzz.build.log; exit 1; }
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:suppressions=$here/tests/sanitizers/ubsan.supp
c=build-fuzz/corpus
mkdir -p $c/model $c/npy $c/gguf build-fuzz/crashes
if [ -z "$(ls -A $c/model)" ]; then
  i=0
  for m in /usr/share/libonnx-testdata/data/node/*/model.onnx /usr/share/libonnx-testdata/data/simple/*/model.onnx; do
    cp "$m" "$c/model/seed$((i++)).onnx"
  done
  cp examples/tinycnn/model.onnx "$c/model/tinycnn.onnx"
  cp examples/tinycnn/*.npy "$c/npy/"
  /usr/bin/python3 -c "
import numpy as np
for i, (d, s) in enumerate([('<f4', (2, 3)), ('<i8', (4,)), ('|b1', (2, 2)), ('<f2', (1, 1, 3)), ('<i4', ())]):
    np.save('$c/npy/seed%d.npy' % i, np.zeros(s, np.dtype(d)))"
  ASAN_OPTIONS=detect_leaks=0 ./build-fuzz/onnx2ggml compile examples/tinycnn/model.onnx -o build-fuzz/seed-gen >/dev/null
  cp build-fuzz/seed-gen/model.gguf "$c/gguf/tinycnn.gguf"
  /usr/bin/python3 -c "
import onnx
from onnx import TensorProto, helper
g = helper.make_graph([helper.make_node('TopK', ['x', 'k'], ['v', 'i'], axis=1), helper.make_node('Add', ['a', 'a'], ['s'])], 'h',
                      [helper.make_tensor_value_info('x', TensorProto.FLOAT, [2, 5]), helper.make_tensor_value_info('a', TensorProto.INT32, [3])],
                      [helper.make_tensor_value_info(n, TensorProto.UNDEFINED, None) for n in 'vis'],
                      [helper.make_tensor('k', TensorProto.INT64, [1], [2])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 17)]), 'build-fuzz/host.onnx')"
  ASAN_OPTIONS=detect_leaks=0 ./build-fuzz/onnx2ggml compile build-fuzz/host.onnx -o build-fuzz/seed-host >/dev/null
  cp build-fuzz/seed-host/model.gguf "$c/gguf/host_kernels.gguf"  # with host kernel records
fi
# the three targets run side by side, each for SECONDS of wall time
for t in $targets; do
  ASAN_OPTIONS=detect_leaks=0 nice ./build-fuzz/fuzz_$t $c/$t -max_total_time="$secs" -rss_limit_mb=2048 -timeout=30 \
    -artifact_prefix=build-fuzz/crashes/$t- -print_final_stats=1 >build-fuzz/fuzz_$t.log 2>&1 &
done
status=0
wait || true
for t in $targets; do
  log=build-fuzz/fuzz_$t.log
  execs=$(grep -ao 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -ao '[0-9]*$' || echo 0)
  eps=$(grep -ao 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -ao '[0-9]*$' || echo 0)
  corpus=$(ls $c/$t | wc -l)
  # crash-, leak-, oom- and timeout- artifacts fail the run; slow-unit- ones are reported only
  crashes=$(ls build-fuzz/crashes | grep -cE "^$t-(crash|leak|oom|timeout)-" || true)
  slow=$(ls build-fuzz/crashes | grep -c "^$t-slow-unit-" || true)
  [ "$crashes" = 0 ] || status=1
  echo "fuzz_$t: ${secs}s, $execs executions, $eps exec/s, corpus $corpus files, crashes $crashes, slow units $slow"
done
exit $status
