#!/usr/bin/env bash
# Fetch the pinned ggml sources into .cache/ (ignored by git) and print the ggml folder.
# Route 1 (offline-friendly, the one that works where only Debian and the npm registry are
# reachable): the npm package node-llama-cpp@3.21.1 ships a git bundle of llama.cpp whose
# ggml/ folder is ggml 0.23.0. Route 2 (online): clone ggml's upstream repository at the
# pinned tag, when GGML_GIT_URL is set.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cache="${ONNX2GGML_CACHE:-$here/.cache}"
PIN_NPM="node-llama-cpp@3.21.1"
PIN_COMMIT="80fb11ac73e66d89eae2c6a91d8a77428fa733ed"   # commit of the bundle's llama.cpp
PIN_VERSION="0.23.0"
dest="$cache/llama.cpp"

check() {  # $1 = ggml folder
  [ -f "$1/CMakeLists.txt" ] && grep -q "set(GGML_VERSION_MINOR 23)" "$1/CMakeLists.txt"
}

if [ -d "$dest/.git" ] && [ "$(git -C "$dest" rev-parse HEAD 2>/dev/null)" = "$PIN_COMMIT" ] && check "$dest/ggml"; then
  echo "$dest/ggml"; exit 0
fi
mkdir -p "$cache"
rm -rf "$dest" "$cache/npm"
if [ -n "${GGML_GIT_URL:-}" ]; then
  git clone -q --depth 1 --branch "v$PIN_VERSION" "$GGML_GIT_URL" "$cache/ggml-upstream" >&2
  check "$cache/ggml-upstream" || { echo "fetch-ggml: $GGML_GIT_URL v$PIN_VERSION is not ggml $PIN_VERSION" >&2; exit 1; }
  echo "$cache/ggml-upstream"; exit 0
fi
mkdir -p "$cache/npm"
( cd "$cache/npm" && npm pack --silent "$PIN_NPM" >/dev/null )
tar -xzf "$cache/npm"/node-llama-cpp-*.tgz -C "$cache/npm" package/llama/gitRelease.bundle package/llama/llama.cpp.info.json
git clone -q "$cache/npm/package/llama/gitRelease.bundle" "$dest" 2>/dev/null
git -C "$dest" -c advice.detachedHead=false checkout -q "$PIN_COMMIT"
rm -rf "$cache/npm"
check "$dest/ggml" || { echo "fetch-ggml: bundle does not hold ggml $PIN_VERSION" >&2; exit 1; }
echo "$dest/ggml"
