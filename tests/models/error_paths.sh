#!/usr/bin/env bash
# Error paths of the CLI: unsupported ops (exit 3, every node named with op type and opset),
# dynamic dims bound by neither an input file nor --input-shape (exit 2), an input file against --input-shape
# naming the dim value the file implies (issue 22 item 5; also label cli), wrong input shape (exit 2), bad files (exit 2).
set -u
bin=$1; dir=$2
fails=0
expect() {  # expect CODE PATTERN -- command...
  local code=$1 pat=$2; shift 3
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" != "$code" ] || ! grep -qE "$pat" <<<"$out"; then
    echo "FAIL: '$*' -> exit $rc (want $code), output:"; echo "$out"; fails=$((fails+1))
  else echo "ok: exit $rc: $(head -c 160 <<<"$out" | tr '\n' ' ')"; fi
}
"${PYTHON:-/usr/bin/python3}" "$(dirname "$0")/make_bad_models.py" "$dir" >/dev/null
"${PYTHON:-/usr/bin/python3}" -c "import numpy as np; np.save('$dir/x14.npy', np.ones((1,4), np.float32)); np.save('$dir/x24.npy', np.ones((2,4), np.float32)); np.save('$dir/x14d.npy', np.ones((1,4), np.float64))"
expect 3 "fancy_node.*FancyOp, opset 1" -- "$bin" run "$dir/unsupported.onnx" --random-inputs 0 --output-dir "$dir"
expect 3 "unique_node.*Unique, opset 17" -- "$bin" run "$dir/unsupported.onnx" --random-inputs 0 --output-dir "$dir"
expect 3 "2 unsupported nodes" -- "$bin" compile "$dir/unsupported.onnx" -o "$dir/gen"
expect 3 "unsupported \(2\)" -- "$bin" inspect "$dir/unsupported.onnx"
expect 2 "input 'x' has a dynamic dim 0 \('batch'\)" -- "$bin" run "$dir/dynamic.onnx" --random-inputs 0 --output-dir "$dir"
expect 0 "" -- "$bin" run "$dir/dynamic.onnx" --input-shape x=2x4 --input "x=$dir/x24.npy" --output-dir "$dir"
expect 0 "" -- "$bin" run "$dir/dynamic.onnx" --input "x=$dir/x24.npy" --output-dir "$dir"
expect 2 "x14.npy: input 'x' has shape \[1,4\] \(batch=1\), but --input-shape gives x=2x4" -- "$bin" run "$dir/dynamic.onnx" --input-shape x=2x4 --input "x=$dir/x14.npy" --output-dir "$dir"
expect 2 "dtype float64, the model expects float32" -- "$bin" run "$dir/dynamic.onnx" --input-shape x=1x4 --input "x=$dir/x14d.npy" --output-dir "$dir"
head -c 60 "$dir/unsupported.onnx" > "$dir/truncated.onnx"
expect 2 "truncated.onnx: not a valid ONNX model" -- "$bin" inspect "$dir/truncated.onnx"
expect 2 "no such file" -- "$bin" inspect "$dir/missing.onnx"
expect 2 "bad magic" -- "$bin" run "$dir/dynamic.onnx" --input-shape x=1x4 --input "x=$dir/dynamic.onnx" --output-dir "$dir"
expect 2 "unknown option" -- "$bin" run "$dir/dynamic.onnx" --bogus
echo "$fails failed"
[ "$fails" = 0 ]
