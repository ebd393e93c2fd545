#!/usr/bin/env bash
# `pip install --no-build-isolation ./python` into a fresh virtual environment (Debian's Python with its
# packages, no network: --no-index), reusing BUILD_DIR's build; then the installed package, imported from
# elsewhere, runs MODEL and gives the build tree's module's output bit for bit.
# usage: pip_test.sh BUILD_DIR WORK_DIR MODEL.onnx PYTHON
set -euo pipefail
build=$1 work=$2 model=$3 python=$4
root=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$work"
mkdir -p "$work"
"$python" -m venv --system-site-packages "$work/venv"
(cd "$root" && ONNX2GGML_BUILD_DIR=$build "$work/venv/bin/pip" install -q --no-build-isolation --no-deps --no-index \
   ./python >"$work/pip.log" 2>&1) || { cat "$work/pip.log"; exit 1; }
rm -rf "$root/python/build" "$root"/python/*.egg-info
cat >"$work/check.py" <<'PY'
import os, sys
import numpy as np
import onnx2ggml
where, model = sys.argv[1], sys.argv[2]
assert os.path.realpath(onnx2ggml.__file__).startswith(os.path.realpath(where)), onnx2ggml.__file__
s = onnx2ggml.InferenceSession(model, threads=2)
i = s.get_inputs()[0]
x = np.linspace(-1, 1, int(np.prod(i.shape)), dtype=np.float32).reshape(i.shape)
sys.stdout.buffer.write(s.run(None, {i.name: x})[0].tobytes())
PY
(cd "$work" && "$work/venv/bin/python" check.py "$work/venv" "$model" >"$work/pip.bin")
(cd "$work" && PYTHONPATH=$build/python "$python" check.py "$build/python" "$model" >"$work/tree.bin")
cmp "$work/pip.bin" "$work/tree.bin"
echo "pip_test: pip-installed onnx2ggml OK ($("$work/venv/bin/python" -c 'import onnx2ggml; print(onnx2ggml.version())'))"
