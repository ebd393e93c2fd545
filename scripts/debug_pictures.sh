#!/usr/bin/env bash
# The pictures of docs/debugging.md: the bundled example (examples/tinycnn) by backend, the same with an
# error planted in /c2/Conv colored by `compare` (ONNX Runtime as the reference: scripts/setup.sh --bench),
# and, when `ctest -L sd` has exported it, the Stable Diffusion VAE decoder's first block (conv_in and
# mid_block.resnets.0, cut out of the exported decoder with onnx.utils.extract_model).
# usage: scripts/debug_pictures.sh [BUILD_DIR]   -> docs/pictures/*.svg
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$here/build}" && pwd)
sd="${SD_MODELS:-$build/sd-models}"
bin="$build/onnx2ggml"
out="$here/docs/pictures"
mkdir -p "$out"
ex="$here/examples/tinycnn"
"$bin" inspect "$ex/model.onnx" --svg "$out/tinycnn.svg" >/dev/null
echo "wrote $out/tinycnn.svg"
ONNX2GGML_TEST_PERTURB_NODE=/c2/Conv "$bin" compare "$ex/model.onnx" --input "input=$ex/input.npy" --reference ort --no-inplace \
  --svg "$out/tinycnn_compare.svg" >/dev/null || [ $? = 1 ]  # exit 1: the planted divergence
echo "wrote $out/tinycnn_compare.svg"
vae="$sd/vae_decoder/model.onnx"
if [ -f "$vae" ]; then
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  /usr/bin/python3 - "$vae" "$tmp/block0.onnx" <<'PY'
import sys, onnx, onnx.utils
m = onnx.utils.Extractor(onnx.load(sys.argv[1])).extract_model(["latent"], ["/decoder/mid_block/resnets.0/Div_output_0"])
onnx.save(m, sys.argv[2])
PY
  "$bin" inspect "$tmp/block0.onnx" --input-shape latent=1x4x32x32 --svg "$out/vae_decoder_block0.svg" >/dev/null
  echo "wrote $out/vae_decoder_block0.svg"
else
  echo "skipped the VAE decoder picture: $vae not exported (ctest -L sd)"
fi
