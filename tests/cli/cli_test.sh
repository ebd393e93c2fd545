#!/usr/bin/env bash
# CLI behaviour a new user meets first (issue 22), for `onnx2ggml run` and the compiled program, on
# examples/tinycnn. Usage: cli_test.sh BUILD_DIR   (PYTHON: the interpreter with numpy)
set -uo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-/usr/bin/python3}
bin="$build/onnx2ggml"
ex="$here/examples/tinycnn"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }
# the output in DIR matches PyTorch's within 1e-4 of max|ref|
matches() {
  "$py" - "$ex/expected.npy" "$1/output_0.npy" <<'PY'
import sys, numpy as np
ref, got = np.load(sys.argv[1]), np.load(sys.argv[2])
sys.exit(0 if got.shape == ref.shape and float(np.abs(got - ref).max()) <= 1e-4 * float(np.abs(ref).max()) else 1)
PY
}

# the compiled program, built once
gen="$work/gen"
"$bin" compile "$ex/model.onnx" -o "$gen" >/dev/null || fail "compile"
(cmake -S "$gen" -B "$gen/build" -DCMAKE_BUILD_TYPE=Release && cmake --build "$gen/build" -j "$(nproc)") >"$work/gen.log" 2>&1 ||
  { cat "$work/gen.log"; fail "building the compiled program"; }
prog="$gen/build/model"

# 1. --output-dir creates the folder with its parents; a folder that cannot be made: exit 2 naming it
for who in run prog; do
  cd "$work" && rm -rf out
  if [ $who = run ]; then cmd=("$bin" run "$ex/model.onnx" --input "input=$ex/input.npy"); else cmd=("$prog" --input "input=$ex/input.npy"); fi
  if "${cmd[@]}" --output-dir out/new/deeper >/dev/null 2>"$work/err" && matches out/new/deeper; then ok "$who: --output-dir out/new/deeper created"
  else cat "$work/err"; fail "$who: --output-dir out/new/deeper"; fi
  touch "$work/afile"
  "${cmd[@]}" --output-dir "$work/afile/sub" >/dev/null 2>"$work/err"; rc=$?
  if [ $rc = 2 ] && grep -q "afile/sub" "$work/err"; then ok "$who: uncreatable folder: exit 2 naming it"
  else cat "$work/err"; fail "$who: uncreatable folder: exit $rc (want 2, naming the path)"; fi
done
# run --then: set K goes to DIR/K, DIR made with its parents
cd "$work" && rm -rf out
if "$bin" run "$ex/model.onnx" --input "input=$ex/input.npy" --then --input "input=$ex/input.npy" --output-dir out/a/b >/dev/null 2>"$work/err" &&
   matches out/a/b/0 && matches out/a/b/1; then ok "run --then: out/a/b/0 and out/a/b/1"
else cat "$work/err"; fail "run --then --output-dir out/a/b"; fi

if [ $fails = 0 ]; then echo "cli_test: all passed"; else echo "cli_test: $fails failed"; exit 1; fi
