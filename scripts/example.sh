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
[ $setup = 1 ] && "$here/scripts/setup.sh"
[ -x "$build/onnx2ggml" ] || "$here/scripts/build.sh" "$build"
ex="$here/examples/tinycnn"
gen="$build/example/gen"
rm -rf "$build/example" && mkdir -p "$build/example/out"
"$build/onnx2ggml" compile "$ex/model.onnx" -o "$gen"
cmake -S "$gen" -B "$gen/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$gen/build" -j "$(nproc)" >/dev/null
"$gen/build/model" --input "input=$ex/input.npy" --output-dir "$build/example/out"
/usr/bin/python3 - "$ex/expected.npy" "$build/example/out/output_0.npy" <<'PY'
import sys, numpy as np
ref, got = np.load(sys.argv[1]), np.load(sys.argv[2])
err = float(np.abs(got - ref).max())
rel = err / float(np.abs(ref).max())
print(f"example tinycnn: compiled ggml program vs PyTorch: max abs error {err:.3g}, relative to max |ref| {rel:.3g}")
sys.exit(0 if rel <= 1e-4 else 1)
PY
