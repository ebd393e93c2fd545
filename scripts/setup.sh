#!/usr/bin/env bash
# Installs what the build and the tests need (Debian packages), idempotently, and fetches
# the pinned ggml sources. With --bench also installs ONNX Runtime (npm onnxruntime-node)
# into bench/node_modules for the benchmarks and the conformance report's reference column.
# With --vulkan also what a -DGGML_VULKAN=ON build needs (scripts/test-vulkan.sh): glslc, the Vulkan
# loader, Mesa's Vulkan drivers (llvmpipe: a Vulkan device on the CPU) and newer Vulkan headers
# (scripts/fetch-vulkan-headers.sh). The flags combine.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bench=0; vulkan=0
for a in "$@"; do
  case "$a" in
    --bench) bench=1 ;;
    --vulkan) vulkan=1 ;;
    *) echo "setup: unknown option $a (--bench, --vulkan)" >&2; exit 2 ;;
  esac
done
pkgs=(cmake g++ make git ccache clang libclang-rt-14-dev libonnx-dev libprotobuf-dev protobuf-compiler libgtest-dev
      python3-torch python3-torchvision python3-onnx python3-numpy libonnx-testdata libdnnl-dev graphviz librsvg2-bin
      pybind11-dev python3-dev python3-pytest pkgconf python3-pip python3-venv python3-setuptools
      libpng-dev python3-pil)
[ $vulkan = 1 ] && pkgs+=(glslc spirv-headers libvulkan1 mesa-vulkan-drivers)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
"$here/scripts/fetch-ggml.sh" >/dev/null
[ $vulkan = 1 ] && "$here/scripts/fetch-vulkan-headers.sh" >/dev/null
if [ $bench = 1 ] && [ ! -d "$here/bench/node_modules/onnxruntime-node" ]; then
  # --ignore-scripts: the package's install script downloads from a host that is not reachable;
  # the CPU library ships inside the package.
  (cd "$here/bench" && npm install --silent --no-audit --no-fund --no-save --no-package-lock --ignore-scripts onnxruntime-node@1.30.0 >/dev/null)
fi
# ONNX Runtime's StringNormalizer opens the en_US.UTF-8 locale (tests/conformance/ort_reference.py)
if [ $bench = 1 ] && ! locale -a 2>/dev/null | grep -qi '^en_US\.utf-\?8$'; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  if ! command -v localedef >/dev/null; then
    $SUDO apt-get install -y -qq --no-install-recommends locales >/dev/null
  fi
  $SUDO localedef -i en_US -f UTF-8 en_US.UTF-8
fi
echo "setup: ok"
