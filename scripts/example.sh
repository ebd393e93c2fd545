#!/usr/bin/env bash
# The main job on the bundled example: compile examples/tinycnn/model.onnx to a standalone
# C++ ggml program, build it, run it and print its max error against PyTorch's output.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build="$here/build"; setup=1
while [ $# -gt 0 ]; do
  case "$1" in
    --no-setup) setup=0 ;;
    --build-dir) build="$2"; shift ;;
    *) echo "usage: example.sh [--no-setup] [--build-dir DIR]" >&2; exit 2 ;;
  esac; shift
done
# quiet: each step prints one line; a step's full output goes to a log file, printed only when it fails
log="$build/example.log"
step() {  # step "what it does" command...
  local what=$1; shift
  echo "example: $what"
  if ! "$@" >>"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "example: FAILED: $what (full log: $log)" >&2
    exit 1
  fi
}
mkdir -p "$build" && : >"$log"
[ $setup = 1 ] && step "setting up (Debian packages, the pinned ggml)" "$here/scripts/setup.sh"
[ -x "$build/onnx2ggml" ] || step "building onnx2ggml in $build (the first time takes a few minutes)" "$here/scripts/build.sh" "$build"
ex="$here/examples/tinycnn"
gen="$build/example/gen"
rm -rf "$build/example" && mkdir -p "$build/example/out"
step "compiling examples/tinycnn/model.onnx to a C++ ggml program in $gen" "$build/onnx2ggml" compile "$ex/model.onnx" -o "$gen"
step "configuring the generated program" cmake -S "$gen" -B "$gen/build" -DCMAKE_BUILD_TYPE=Release
step "building the generated program" cmake --build "$gen/build" -j "$(nproc)"
step "running $gen/build/model" "$gen/build/model" --input "input=$ex/input.npy" --output-dir "$build/example/out"
/usr/bin/python3 - "$ex/expected.npy" "$build/example/out/output_0.npy" <<'PY'
import sys, numpy as np
ref, got = np.load(sys.argv[1]), np.load(sys.argv[2])
err = float(np.abs(got - ref).max())
rel = err / float(np.abs(ref).max())
print(f"example tinycnn: compiled ggml program vs PyTorch: max abs error {err:.3g}, relative to max |ref| {rel:.3g}")
sys.exit(0 if rel <= 1e-4 else 1)
PY
