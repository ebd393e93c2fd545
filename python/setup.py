"""pip install --no-build-isolation ./python: the onnx2ggml package, its native module built by CMake.

The module (_onnx2ggml) is the repository's CMake target of that name (CMakeLists.txt at the
repository's root, one folder up); nothing is downloaded: the pinned ggml comes from
scripts/fetch-ggml.sh's cache as for any build, everything else from Debian's packages
(scripts/setup.sh). ONNX2GGML_BUILD_DIR reuses a configured build folder (e.g. build/ of
scripts/build.sh); by default the build goes to build-python/ at the repository's root.
"""
import glob
import os
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def project_version():
    text = open(os.path.join(ROOT, "CMakeLists.txt")).read()
    return re.search(r"project\(onnx2ggml VERSION ([0-9.]+)", text).group(1)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = os.environ.get("ONNX2GGML_BUILD_DIR")
        if build:
            if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
                subprocess.check_call(["cmake", "-S", ROOT, "-B", build])
        else:
            build = os.path.join(ROOT, "build-python")
            subprocess.check_call(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                                   "-DONNX2GGML_TESTS=OFF", "-DONNX2GGML_PYTHON=" + sys.executable])
        subprocess.check_call(["cmake", "--build", build, "--target", "_onnx2ggml", "-j", str(os.cpu_count() or 2)])
        built = glob.glob(os.path.join(build, "python", "onnx2ggml", "_onnx2ggml*.so"))
        if not built:
            sys.exit("setup.py: CMake built no _onnx2ggml module (is pybind11-dev installed? scripts/setup.sh)")
        dest = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copy(built[0], dest)


setup(
    name="onnx2ggml",
    version=project_version(),
    description="ONNX models on ggml backends, with ONNX Runtime's InferenceSession interface",
    packages=["onnx2ggml"],
    ext_modules=[Extension("onnx2ggml._onnx2ggml", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.9",
    install_requires=["numpy"],
    zip_safe=False,
)
