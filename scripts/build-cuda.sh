#!/usr/bin/env bash
# The CUDA build, checked on a machine without a GPU (issue 15): onnx2ggml with ggml's CUDA backend
# (-DGGML_CUDA=ON) in build-cuda/ (or BUILD_DIR), then one generated project (examples/tinycnn) with it. Both must
# compile and link, and the CUDA build must still run on the CPU (`run --backend cpu` against the example's
# expected output) when no GPU is there. nvcc: CUDACXX, else nvcc on PATH, else /usr/local/cuda/bin/nvcc. One
# architecture (CUDA_ARCH, default 90: H100/H200) bounds the build time; ccache, when installed, lets the generated
# project reuse onnx2ggml's ggml objects. Not part of scripts/test.sh (about 30-40 minutes on 2 cores).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build="${BUILD_DIR:-$here/build-cuda}"
arch="${CUDA_ARCH:-90}"
nvcc="${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
[ -x "$nvcc" ] || { echo "build-cuda: no nvcc (set CUDACXX)" >&2; exit 1; }
"$here/scripts/setup.sh"
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  export CCACHE_NOHASHDIR=1 CCACHE_DIR="${CCACHE_DIR:-$build/ccache}"
fi
cuda=(-DGGML_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="$arch")
t0=$(date +%s)
cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release -DONNX2GGML_TESTS=OFF "${cuda[@]}" "${launcher[@]}" \
  >"$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
cmake --build "$build" --target onnx2ggml -j "$(nproc)"
t1=$(date +%s)
# ggml-cuda links the driver library (libcuda.so.1), which only a machine with an NVIDIA driver has: elsewhere the
# toolkit's stub stands in for it (every driver call then fails: no device, the CPU backends work)
if ! ldconfig -p | grep -q 'libcuda\.so\.1 '; then
  stub="$(dirname "$(dirname "$nvcc")")/lib64/stubs/libcuda.so"
  [ -f "$stub" ] || { echo "build-cuda: no libcuda.so.1 and no stub at $stub" >&2; exit 1; }
  mkdir -p "$build/driver-stub" && ln -sf "$stub" "$build/driver-stub/libcuda.so.1"
  export LD_LIBRARY_PATH="$build/driver-stub${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
"$build/onnx2ggml" --version
ex="$here/examples/tinycnn"
"$build/onnx2ggml" check "$ex/model.onnx" --input "input=$ex/input.npy" --expect "output=$ex/expected.npy" \
  --atol 1e-5 --backend cpu
gen="$build/gen-tinycnn"
rm -rf "$gen"
"$build/onnx2ggml" compile "$ex/model.onnx" -o "$gen" >/dev/null
# (position-independent code as onnx2ggml's own build compiles ggml: the same flags, so ccache has the objects)
cmake -S "$gen" -B "$gen/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_POSITION_INDEPENDENT_CODE=ON "${cuda[@]}" "${launcher[@]}" >"$gen.configure.log" 2>&1 ||
  { cat "$gen.configure.log"; exit 1; }
cmake --build "$gen/build" -j "$(nproc)"
t2=$(date +%s)
"$gen/build/model" --input "input=$ex/input.npy" --backend cpu --output-dir "$gen/out" >/dev/null
"$build/onnx2ggml" run "$ex/model.onnx" --input "input=$ex/input.npy" --backend cpu --output-dir "$gen/run" >/dev/null
cmp "$gen/out/output_0.npy" "$gen/run/output_0.npy" || { echo "build-cuda: the compiled program and run differ" >&2; exit 1; }
echo "build-cuda: onnx2ggml built in $((t1 - t0)) s, the generated project in $((t2 - t1)) s (CUDA arch $arch); both run on the CPU, bit-identical"

