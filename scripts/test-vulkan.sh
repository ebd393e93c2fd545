#!/usr/bin/env bash
# The Vulkan backend, tested on the CPU: builds onnx2ggml with -DGGML_VULKAN=ON in build-vulkan/ (or
# BUILD_DIR) and runs ctest's `vulkan` label there: model parity with `--backend vulkan` on Mesa's
# llvmpipe, a Vulkan device implemented on the CPU (no GPU needed). Called by scripts/test.sh
# (ONNX2GGML_SKIP_VULKAN=1 skips it). Extra arguments go to ctest.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build="${BUILD_DIR:-$here/build-vulkan}"
"$here/scripts/setup.sh" --vulkan
inc=$("$here/scripts/fetch-vulkan-headers.sh")
# the loader (libvulkan1 ships no libvulkan.so link); awk reads all of ldconfig's list (an early exit
# would end ldconfig with SIGPIPE, a failure under pipefail)
loader=$(ldconfig -p | awk '/libvulkan\.so\.1 / && !f {f = $NF} END {print f}')
[ -n "$loader" ] || { echo "test-vulkan: no libvulkan.so.1 (scripts/setup.sh --vulkan installs libvulkan1)" >&2; exit 1; }
cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release -DGGML_VULKAN=ON -DVulkan_INCLUDE_DIR="$inc" \
  -DVulkan_LIBRARY="$loader" -DONNX2GGML_TESTS=ON >"$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
grep "onnx2ggml:" "$build.configure.log" || true
# the CLI is all the vulkan tests run (about 6 minutes on 2 cores, most of it ggml-vulkan's shaders)
cmake --build "$build" --target onnx2ggml -j "$(nproc)"
# ggml-vulkan lists CPU-type devices (llvmpipe) only when asked for them by index
export GGML_VK_VISIBLE_DEVICES="${GGML_VK_VISIBLE_DEVICES:-0}"
(cd "$build" && ctest --output-on-failure -j "$(nproc)" -L vulkan "$@")
