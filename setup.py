"""Builds the vkattn Python package: python/vkattn/ and the extension module vkattn._vkattn, which
CMake builds (VKATTN_BUILD_PYTHON=ON: the library and the module only, no tests or tools) for the
interpreter running this script.

    pip install --no-build-isolation .

CMake, a C++20 compiler, the Vulkan headers and loader, glslc and pybind11 must be installed
(scripts/install-deps.sh). CMAKE_BUILD_PARALLEL_LEVEL limits the build's parallel jobs, as for any
CMake build.
"""

import pathlib
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent


def project_version():
    """The version in CMakeLists.txt's project(... VERSION x.y.z ...): the one place it is written."""
    text = (ROOT / "CMakeLists.txt").read_text()
    match = re.search(r"project\(\s*vkattn\s+VERSION\s+([0-9]+\.[0-9]+\.[0-9]+)", text)
    if not match:
        raise RuntimeError("setup.py: no project(vkattn VERSION x.y.z) in CMakeLists.txt")
    return match.group(1)


class CMakeBuild(build_ext):
    """Configures and builds the CMake target vkattn_python, then copies the module where setuptools
    packs it."""

    def build_extension(self, ext):
        build_dir = pathlib.Path(self.build_temp).resolve() / "cmake"
        build_dir.mkdir(parents=True, exist_ok=True)
        configure = [
            "cmake",
            "-S",
            str(ROOT),
            "-B",
            str(build_dir),
            "-DCMAKE_BUILD_TYPE=Release",
            "-DVKATTN_BUILD_PYTHON=ON",
            "-DVKATTN_BUILD_TESTS=OFF",
            "-DVKATTN_BUILD_TOOLS=OFF",
            "-DVKATTN_INSTALL=OFF",
            f"-DPython3_EXECUTABLE={sys.executable}",
        ]
        if shutil.which("ninja") and not (build_dir / "CMakeCache.txt").exists():
            configure += ["-G", "Ninja"]
        subprocess.run(configure, check=True)
        subprocess.run(["cmake", "--build", str(build_dir), "--target", "vkattn_python"], check=True)
        built = sorted((build_dir / "python" / "vkattn").glob("_vkattn*.so"))
        if not built:
            raise RuntimeError(f"setup.py: CMake built no _vkattn module in {build_dir / 'python' / 'vkattn'}")
        destination = pathlib.Path(self.get_ext_fullpath(ext.name))
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built[-1], destination)


setup(
    version=project_version(),
    package_dir={"": "python"},
    packages=["vkattn"],
    package_data={"vkattn": ["py.typed", "*.pyi"]},
    ext_modules=[Extension("vkattn._vkattn", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
)
