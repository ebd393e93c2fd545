#!/usr/bin/env bash
# Makes docs/pictures/txt2img.png, the picture the README shows: onnx2ggml-sd txt2img from a seeded run
# on a tiny SD 1.5-architecture folder with random weights (scripts/export_sd_folder.py --config tiny),
# so it shows the pipeline running end to end, not what SD 1.5's trained weights draw.
# usage: scripts/readme_picture.sh [BUILD_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$here/build}" && pwd)
work=$build/readme-sd
py=/usr/bin/python3
[ -f "$work/vocab/vocab.json" ] || $py "$here/tests/sd_pipeline/make_vocab.py" "$work/vocab" >/dev/null
[ -f "$work/model/model_index.json" ] || $py "$here/scripts/export_sd_folder.py" "$work/model" --config tiny \
  --tokenizer "$work/vocab" --seed 3 >/dev/null 2>&1
cd "$work"  # the PNG records the model path: relative, not this machine's
"$build/onnx2ggml-sd" txt2img --model model --prompt "a lighthouse on a cliff at dusk, oil painting" \
  --negative-prompt "blurry" --steps 8 --cfg-scale 7.5 --seed 42 --width 192 --height 192 --sampler dpmpp_2m \
  --karras -o "$here/docs/pictures/txt2img.png"
ls -l "$here/docs/pictures/txt2img.png"
