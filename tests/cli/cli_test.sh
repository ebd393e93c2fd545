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

# 4. scripts/example.sh: a few plain lines, the generated build's output (compiler warnings) kept in a
# log; its generated program is the one the checks below use. A build dir of its own (onnx2ggml linked).
fake="$work/fakebuild"; mkdir -p "$fake" && ln -s "$bin" "$fake/onnx2ggml"
bash "$here/scripts/example.sh" --no-setup --build-dir "$fake" >"$work/ex.out" 2>&1; rc=$?
lines=$(wc -l <"$work/ex.out")
if [ $rc = 0 ] && [ "$lines" -le 8 ] && ! grep -qi "warning" "$work/ex.out" && grep -q "^example tinycnn: .*relative to max |ref|" "$work/ex.out"
then ok "example.sh: $lines lines, no build noise"
else cat "$work/ex.out"; fail "example.sh: exit $rc, $lines lines (want 0, at most 8, no warnings)"; fi
# a failing step: its log is printed, then one line naming the step
mkdir -p "$work/badbuild" && printf '#!/bin/sh\necho "some diagnostic from the compiler" >&2\nexit 3\n' >"$work/badbuild/onnx2ggml" && chmod +x "$work/badbuild/onnx2ggml"
bash "$here/scripts/example.sh" --no-setup --build-dir "$work/badbuild" >"$work/ex.out" 2>&1; rc=$?
if [ $rc = 1 ] && grep -q "some diagnostic from the compiler" "$work/ex.out" && tail -n 1 "$work/ex.out" | grep -q "example: FAILED: compiling"
then ok "example.sh: a failing step shows its log and names the step"
else cat "$work/ex.out"; fail "example.sh failing step: exit $rc"; fi
prog="$fake/example/gen/build/model"
[ -x "$prog" ] || fail "example.sh left no compiled program"

# 2. without --output-dir: a summary line per output on stdout, no file written
for who in run prog; do
  rm -rf "$work/cwd" && mkdir -p "$work/cwd" && cd "$work/cwd"
  if [ $who = run ]; then cmd=("$bin" run "$ex/model.onnx" --input "input=$ex/input.npy"); else cmd=("$prog" --input "input=$ex/input.npy"); fi
  "${cmd[@]}" >"$work/out" 2>"$work/err"; rc=$?
  # the line must carry PyTorch's min and max (6 significant digits)
  want=$("$py" -c "import numpy as np; r=np.load('$ex/expected.npy'); print('output: float32 [1,10] min=%.6g max=%.6g' % (r.min(), r.max()))")
  if [ $rc = 0 ] && [ -z "$(ls -A "$work/cwd")" ] && grep -qF "$want" "$work/out" && grep -q "values: " "$work/out"; then ok "$who: summary, no files"
  else cat "$work/out" "$work/err"; ls "$work/cwd"; fail "$who without --output-dir: exit $rc (want 0, '$want ...' on stdout, nothing written)"; fi
done

# 3. --version: onnx2ggml's version and commit, ggml's, oneDNN's, the backends and their devices
for who in run prog; do
  if [ $who = run ]; then "$bin" --version >"$work/out" 2>&1; else "$prog" --version >"$work/out" 2>&1; fi; rc=$?
  if [ $rc = 0 ] && grep -Eq "onnx2ggml [0-9]+\.[0-9]+\.[0-9]+ \(commit ([0-9a-f]+(-dirty)?|unknown)\)" "$work/out" &&
     grep -Eq "^ggml [0-9]+\.[0-9]+\.[0-9]+ \(commit " "$work/out" && grep -q "^oneDNN" "$work/out" && grep -Eq "^  CPU: CPU" "$work/out"
  then ok "$who --version"
  else cat "$work/out"; fail "$who --version: exit $rc"; fi
done

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

# progress bars (issue 21 item 3): drawn on a terminal (here `script`'s pseudo-terminal; the delay set to 0
# for the test), never into a pipe or a file, never with --quiet
gen2="$work/gen2"
if ! script -qec true /dev/null >/dev/null 2>&1; then echo "note: no pseudo-terminal here (script failed): the terminal case is checked as a pipe only"; fi
ONNX2GGML_PROGRESS_DELAY_MS=0 script -qec "'$bin' compile '$ex/model.onnx' -o '$gen2'" /dev/null >"$work/tty.out" 2>&1
ONNX2GGML_PROGRESS_DELAY_MS=0 "$bin" compile "$ex/model.onnx" -o "$gen2" >"$work/pipe.out" 2>&1
ONNX2GGML_PROGRESS_DELAY_MS=0 script -qec "'$bin' compile '$ex/model.onnx' -o '$gen2' --quiet" /dev/null >"$work/quiet.out" 2>&1
if { ! script -qec true /dev/null >/dev/null 2>&1 || grep -q "writing .*model.gguf \[#*\] 100%" "$work/tty.out"; } && ! grep -q "\[#" "$work/pipe.out" && ! grep -q "\[#" "$work/quiet.out" &&
   grep -q "^wrote" "$work/pipe.out"; then ok "progress bars on a terminal only, not with --quiet"
else cat -v "$work/tty.out" "$work/pipe.out" "$work/quiet.out"; fail "progress bars"; fi

# inspect --backend (issue 15 item 3): where the nodes run. On the CPU backend everything is on it (one split, no
# fallback); on every backend the nodes outside it are the fallback list; an unknown backend exits 2
"$bin" inspect "$ex/model.onnx" --backend cpu --json >"$work/pl_cpu.json" 2>"$work/err"; rc1=$?
"$bin" inspect "$ex/model.onnx" --backend auto --json >"$work/pl_auto.json" 2>>"$work/err"; rc2=$?
"$bin" inspect "$ex/model.onnx" --backend nosuch >/dev/null 2>"$work/err2"; rc3=$?
if [ $rc1 = 0 ] && [ $rc2 = 0 ] && [ $rc3 = 2 ] && grep -q "nosuch" "$work/err2" && "$py" - "$work/pl_cpu.json" "$work/pl_auto.json" <<'PY'
import json, sys
cpu, auto = (json.load(open(f))["placement"] for f in sys.argv[1:3])
assert cpu["backend"] == "CPU" and cpu["fallback"] == [] and cpu["splits"] == 1, cpu
assert cpu["ops"].get("CPU/CONV_2D_DW") == 1 and all(k.startswith("CPU/") for k in cpu["ops"]), cpu["ops"]
off = sum(n for k, n in auto["ops"].items() if not k.startswith(auto["backend"] + "/"))
assert off == len(auto["fallback"]), auto
assert sum(auto["ops"].values()) == sum(cpu["ops"].values()), (auto["ops"], cpu["ops"])
PY
then ok "inspect --backend: placement per backend and op, fallback list, unknown backend exit 2"
else cat "$work/err" "$work/err2"; fail "inspect --backend: exits $rc1 $rc2 $rc3"; fi

if [ $fails = 0 ]; then echo "cli_test: all passed"; else echo "cli_test: $fails failed"; exit 1; fi
