#!/usr/bin/env bash
# `cmake --install` into a scratch prefix, then programs outside the tree built against it: the CMake
# package (C++ on libonnx2ggml.so, C++ on libonnx2ggml.a, C on the .so) and pkg-config (C). Each runs
# MODEL on an input of ones; their outputs must equal each other and the installed CLI's, bit for bit.
# usage: install_test.sh BUILD_DIR WORK_DIR MODEL.onnx PYTHON
set -euo pipefail
build=$1 work=$2 model=$3 python=$4
src=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >"$work/install.log"
libdir=$(dirname "$(find "$prefix" -name libonnx2ggml.so | head -1)")
for f in "$prefix/bin/onnx2ggml" "$libdir/libonnx2ggml.a" "$prefix/include/onnx2ggml/onnx2ggml.h" \
         "$prefix/include/onnx2ggml/onnx2ggml.hpp" "$libdir/cmake/onnx2ggml/onnx2ggmlConfig.cmake" \
         "$libdir/pkgconfig/onnx2ggml.pc"; do
  [ -e "$f" ] || { echo "install_test: $f was not installed"; exit 1; }
done
# the shared library exports the API and nothing of ggml, protobuf or the core
if nm -D --defined-only "$libdir/libonnx2ggml.so" | grep -E " (ggml_|_ZN9onnx2ggml4core|_ZN4onnx|_ZN6google)" | head -3 | grep .; then
  echo "install_test: libonnx2ggml.so exports internal symbols"; exit 1
fi
cmake -S "$src/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >"$work/consumer.log" 2>&1 \
  || { cat "$work/consumer.log"; exit 1; }
cmake --build "$work/consumer" -j2 >>"$work/consumer.log" 2>&1 || { cat "$work/consumer.log"; exit 1; }
PKG_CONFIG_PATH=$libdir/pkgconfig
export PKG_CONFIG_PATH
cc "$src/consumer/consumer.c" $(pkg-config --cflags onnx2ggml) -o "$work/consumer_c_pkgconfig" \
   $(pkg-config --libs onnx2ggml) -Wl,-rpath,"$libdir"
for p in consumer/consumer_cpp consumer/consumer_cpp_static consumer/consumer_c consumer_c_pkgconfig; do
  "$work/$p" "$model" "$work/$(basename $p).bin"
done
# the installed CLI on the same input
"$python" - "$model" "$work/ones.npy" <<'PY'
import sys, numpy as np, onnx
m = onnx.load(sys.argv[1], load_external_data=False)
dims = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
np.save(sys.argv[2], np.ones(dims, dtype=np.float32))

PY
name=$("$python" -c "import onnx,sys; print(onnx.load(sys.argv[1], load_external_data=False).graph.input[0].name)" "$model")
"$prefix/bin/onnx2ggml" run "$model" --input "$name=$work/ones.npy" --threads 2 --output-dir "$work/cli" 2>/dev/null
"$python" -c "import numpy as np,sys; open(sys.argv[2],'wb').write(np.load(sys.argv[1]).tobytes())" \
  "$work/cli/output_0.npy" "$work/cli.bin"
for b in consumer_cpp_static consumer_c consumer_c_pkgconfig cli; do
  cmp "$work/consumer_cpp.bin" "$work/$b.bin" || { echo "install_test: $b's output differs from consumer_cpp's"; exit 1; }
done
# the README's examples ("Use it from C++ / C / Python"), on MODEL, against the installed package
"$python" - "$src/../../README.md" "$work" "$model" <<'PY'
import re, sys
readme, work, model = sys.argv[1:]
text = open(readme).read().split("## Use it from C++ / C / Python", 1)[1].split("\n## ", 1)[0]
for lang, ext in [("cpp", "cpp"), ("c", "c"), ("python", "py")]:
    code = re.search(r"```%s\n(.*?)```" % lang, text, re.S).group(1)
    code = code.replace('"resnet18.onnx"', repr(model) if ext == "py" else '"%s"' % model)
    code = code.replace('"out/"', repr(work + "/readme_out"))
    open("%s/readme_example.%s" % (work, ext), "w").write(code)
PY
c++ -std=c++17 "$work/readme_example.cpp" $(pkg-config --cflags --libs onnx2ggml) -Wl,-rpath,"$libdir" -o "$work/readme_cpp"
cc "$work/readme_example.c" $(pkg-config --cflags --libs onnx2ggml) -Wl,-rpath,"$libdir" -o "$work/readme_c"
"$work/readme_cpp" && "$work/readme_c"
PYTHONPATH=$build/python "$python" "$work/readme_example.py"
[ -f "$work/readme_out/model.cpp" ] || { echo "install_test: the README's Python example wrote no program"; exit 1; }
echo "install_test: installed package OK (CMake shared/static, C, pkg-config; outputs equal the CLI's)"
