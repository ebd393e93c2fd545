#!/usr/bin/env bash
# Builds the benchmark peer of onnx2ggml-sd: stable-diffusion.cpp at the commit issue 17 names, with the
# ggml commit it pins as its submodule, from local git clones, into bench/sdcpp/build (ignored).
#
# usage: bench/sdcpp/build.sh [SDCPP_GIT_DIR GGML_GIT_DIR]
#   SDCPP_GIT_DIR: a clone of leejet/stable-diffusion.cpp holding commit 97d2990
#   GGML_GIT_DIR:  a clone of ggml-org/ggml holding commit 8e800ce (the submodule's commit)
# Defaults: $SDCPP_GIT_DIR / $GGML_GIT_DIR, else the snapshots the workplace's fetch tool leaves
# under /work/.mirror. CPU build (2 threads in the benchmark), as onnx2ggml's: -O3, native.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
SD_COMMIT=97d29908
GGML_COMMIT=8e800cef2948046cc47f9db6090491c6128ca42c
sd_git=${1:-${SDCPP_GIT_DIR:-/work/.mirror/leejet+stable-diffusion.cpp/repo}}
ggml_git=${2:-${GGML_GIT_DIR:-/work/.mirror/ggml-org+ggml/repo}}
src=$here/src
out=$here/build
for d in "$sd_git" "$ggml_git"; do
  [ -d "$d" ] || { echo "sdcpp: $d: no such git directory (give the clones as arguments)" >&2; exit 2; }
done
if [ ! -f "$src/.done-$SD_COMMIT" ]; then
  rm -rf "$src" && mkdir -p "$src"
  # the snapshot lacks its largest blobs: the vocabularies of other models' tokenizers (gemma, qwen,
  # mistral, t5...) and the optional submodules. SD 1.5 uses CLIP's merges only (present): the others
  # become empty arrays so that vocab.cpp compiles; WebP/WebM and the server's frontend are off.
  files=$(git -C "$sd_git" ls-tree -r --format='%(objectname) %(path)' "$SD_COMMIT" CMakeLists.txt cmake include src examples/CMakeLists.txt examples/cli examples/common thirdparty \
          | while read -r h p; do git -C "$sd_git" cat-file -e "$h" 2>/dev/null && echo "$p"; done)
  git -C "$sd_git" archive "$SD_COMMIT" $files | tar -x -C "$src"
  vocab=$src/src/tokenizers/vocab
  for f in $(git -C "$sd_git" ls-tree --name-only "$SD_COMMIT" src/tokenizers/vocab/); do
    [ -f "$src/$f" ] || : > "$src/$f"
  done
  grep -o 'reinterpret_cast<const char\*>([a-z0-9_]*)' "$vocab/vocab.cpp" | sed 's/.*(\(.*\))/\1/' | sort -u \
    | while read -r arr; do grep -q "$arr" "$vocab"/*.hpp || echo "static const unsigned char $arr[] = {0};"; done > "$vocab/stubs.inc"
  sed -i '1i #include "stubs.inc"' "$vocab/vocab.cpp"
  # the examples folder without the server (its web frontend is a submodule the snapshot lacks)
  sed -i '/server/d' "$src/examples/CMakeLists.txt"
  rm -rf "$src/ggml" && mkdir -p "$src/ggml"
  git -C "$ggml_git" archive "$GGML_COMMIT" | tar -x -C "$src/ggml"
  touch "$src/.done-$SD_COMMIT"
fi
cmake -S "$src" -B "$out" -DCMAKE_BUILD_TYPE=Release -DSD_WEBP=OFF -DSD_WEBM=OFF -DGGML_NATIVE=ON \
  -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >"$out.log" 2>&1 \
  || { tail -30 "$out.log"; exit 1; }
cmake --build "$out" -j"$(nproc)" --target sd-cli >>"$out.log" 2>&1 || cmake --build "$out" -j"$(nproc)" >>"$out.log" 2>&1 \
  || { tail -30 "$out.log"; exit 1; }
bin=$(find "$out" -type f -perm -u+x \( -name sd-cli -o -name sd \) | head -1)
[ -n "$bin" ] || { echo "sdcpp: no sd binary under $out" >&2; exit 1; }
echo "$bin"
