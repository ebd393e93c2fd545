"""The onnx2ggml command is written on the public API only (issue 18: "the CLI is rebuilt on this API, no private
shortcuts"): every file of src/cli/ includes its own header or the public ones (onnx2ggml/...), and the CMake
targets that compile them see include/ and src/cli/ only, so an internal header cannot even be found."""
import glob
import os
import re
import sys

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
bad = []
for path in sorted(glob.glob(os.path.join(root, "src", "cli", "*"))):
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
        if m and not (m.group(1) == "cli.h" or m.group(1).startswith("onnx2ggml/")):
            bad.append("%s:%d: includes %s" % (os.path.relpath(path, root), n, m.group(1)))
cmake = open(os.path.join(root, "CMakeLists.txt"), encoding="utf-8").read()
dirs = re.findall(r"target_include_directories\(\$\{t\} PRIVATE ([^)]*)\)", cmake)
if dirs != ["include src/cli"]:
    bad.append("CMakeLists.txt: the command's targets include %r, not 'include src/cli' alone" % dirs)
if not re.search(r"foreach\(t o2g_cli o2g_cli_main\)", cmake):
    bad.append("CMakeLists.txt: the command's object libraries are not o2g_cli and o2g_cli_main")
print("\n".join(bad) if bad else "src/cli: public API only")
sys.exit(1 if bad else 0)
