#!/usr/bin/env bash
# The GPU check of issue 15, prepared to run in one short lease of a machine with an NVIDIA GPU (the device tool:
# a bare machine with nvcc, CMake, ninja and a python3 with PyTorch, reaching nothing outside).
#
#   scripts/device-check.sh prepare      # here: .device/ (ignored) with what that machine lacks: ggml's pinned
#                                        # sources and Debian's ONNX and protobuf packages (about 7 MB); carry it
#   scripts/device-check.sh build        # there: onnx2ggml with -DGGML_CUDA=ON (CUDA_ARCH, default 90) in build-device/
#   scripts/device-check.sh test         # there: the models and SD parity tests with --backend cuda (f32 and f16)
#   scripts/device-check.sh bench        # there: resnet50 and the SD parts against PyTorch on the same GPU
#   scripts/device-check.sh all          # build, test, bench
#
# Results go to $OUT (the device tool's folder that comes back) or RESULTS_DIR: device-check.md (the tables for
# docs/performance.md and docs/backends.md) and one log per step. BACKEND=cpu runs the test and bench steps on a
# machine without a GPU (a dry run of the script, with ONNX2GGML_BIN pointing at a CPU build).
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
step=${1:-all}
out=${RESULTS_DIR:-${OUT:-$here/build-device/results}}
mkdir -p "$out"
backend=${BACKEND:-cuda}
torch_dev=$([ "$backend" = cuda ] && echo cuda || echo cpu)
build=$here/build-device
bin=${ONNX2GGML_BIN:-$build/onnx2ggml}
work=${WORK_DIR:-/tmp/o2g-device}
deps=/tmp/o2g-deps
py=${PYTHON:-python3}
report=$out/device-check.md
log() { echo "device-check: $*" | tee -a "$report"; }

prepare() {
  mkdir -p .device/debs
  ggml=$(bash scripts/fetch-ggml.sh)
  tar czf .device/ggml.tgz -C "$(dirname "$ggml")" "$(basename "$ggml")"
  (cd .device/debs && apt-get download libonnx-dev libonnx1 libonnxifi libprotobuf-dev libprotobuf32 libprotobuf-lite32)
  grep -qx '/.device/' .git/info/exclude 2>/dev/null || echo '/.device/' >>.git/info/exclude
  du -sh .device
}

unpack_deps() {
  mkdir -p "$deps" /tmp/o2g-ggml
  for f in .device/debs/*.deb; do dpkg -x "$f" "$deps"; done
  [ -d /tmp/o2g-ggml/ggml ] || tar xzf .device/ggml.tgz -C /tmp/o2g-ggml
  export LD_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

build_step() {
  [ -f .device/ggml.tgz ] || { echo "device-check: run 'scripts/device-check.sh prepare' first (and carry .device)"; exit 1; }
  unpack_deps
  local lib=$deps/usr/lib/x86_64-linux-gnu t0
  t0=$(date +%s)
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DONNX2GGML_TESTS=OFF -DONNX2GGML_ONEDNN=OFF \
    -DONNX2GGML_PYTHON_MODULE=OFF -DGGML_SOURCE_DIR=/tmp/o2g-ggml/ggml -DGGML_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" -DONNX_DIR="$lib/cmake/ONNX" -DProtobuf_INCLUDE_DIR="$deps/usr/include" \
    -DProtobuf_LIBRARY="$lib/libprotobuf.so" >"$out/configure.log" 2>&1 || { tail -40 "$out/configure.log"; exit 1; }
  cmake --build "$build" --target onnx2ggml -j "$(nproc)" >"$out/build.log" 2>&1 || { tail -60 "$out/build.log"; exit 1; }
  log "built onnx2ggml with CUDA (arch ${CUDA_ARCH:-90}) in $(( $(date +%s) - t0 )) s"
  "$bin" --version | tee -a "$report"
}

export_models() {
  mkdir -p "$work"
  [ -f "$work/resnet50/model.onnx" ] ||
    "$py" tests/models/export_models.py "$work" tinycnn resnet18 resnet50 mobilenet_v2 mobilenet_v3_small squeezenet1_1 >"$out/export.log" 2>&1 ||
    { tail -30 "$out/export.log"; exit 1; }
  [ -f "$work/unet/model.onnx" ] ||
    "$py" tests/models/export_sd.py "$work" vae_decoder vae_encoder clip_text unet_small unet >>"$out/export.log" 2>&1 ||
    { tail -30 "$out/export.log"; exit 1; }
}

test_step() {
  [ -d "$deps" ] && export LD_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export_models
  local fails=0 m w
  echo "" >>"$report"; echo "| model | weights | --backend $backend vs PyTorch (max error / max ref) |" >>"$report"
  echo "|---|---|---|" >>"$report"
  for m in tinycnn resnet18 resnet50 mobilenet_v2 mobilenet_v3_small squeezenet1_1 vae_decoder vae_encoder clip_text unet_small unet; do
    for w in f32 f16; do
      case $m in vae*|clip*|unet*) ;; *) [ $w = f16 ] && continue ;; esac
      if "$py" tests/models/check_model.py "$bin" "$work/$m" "$work/run-$m-$w" --no-compile --backend "$backend" \
          --weights $w >"$out/test-$m-$w.log" 2>&1; then
        echo "| $m | $w | $(grep -o 'max error / max |ref| = [^ ]*' "$out/test-$m-$w.log" | head -1 | cut -d= -f2) |" >>"$report"
      else
        fails=$((fails + 1)); echo "| $m | $w | FAILED (test-$m-$w.log) |" >>"$report"; tail -5 "$out/test-$m-$w.log"
      fi
    done
  done
  log "parity: $fails failed"
  "$py" bench/placement.py "$bin" "$backend" "$work"/{resnet50,mobilenet_v3_small,squeezenet1_1,vae_decoder,clip_text,unet} \
    --no-write >"$out/placement.log" 2>&1 && cat "$out/placement.log" >>"$report"
  return $fails
}

bench_step() {
  [ -d "$deps" ] && export LD_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export_models
  "$py" bench/gpu.py "$bin" "$work"/{resnet50,clip_text,vae_decoder,vae_encoder,unet} --backend "$backend" \
    --torch-device "$torch_dev" --out "$out/bench.md" >"$out/bench.log" 2>&1 || { tail -20 "$out/bench.log"; return 1; }
  cat "$out/bench.md" >>"$report"
}

case $step in
  prepare) prepare ;;
  build) build_step ;;
  test) test_step ;;
  bench) bench_step ;;
  all) build_step && { test_step; bench_step; } ;;
  *) echo "usage: scripts/device-check.sh prepare|build|test|bench|all"; exit 2 ;;
esac
