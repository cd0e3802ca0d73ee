# SPDX-License-Identifier: MIT
"""Puts the C library inside the Python package at `pip install`.

libreyolo.so comes from a CMake build of this tree: $LIBREYOLO_BUILD_DIR, else
build/ (what `make build` makes) when it holds one; otherwise it is configured
and built here into build-python/ (Release, with what this machine has
installed). It lands as libreyolo_c/libreyolo.so.0, with the hub lock the
library reads next to it (share/libreyolo/kernels.lock.json), so the installed
package needs no environment variable. Metadata: pyproject.toml.
"""
import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

ROOT = os.path.dirname(os.path.abspath(__file__))
LIBRARY = "libreyolo.so.0"


def _instrumented(build_dir):
    cache = os.path.join(build_dir, "CMakeCache.txt")
    if not os.path.exists(cache):
        return False
    with open(cache, encoding="utf-8", errors="replace") as f:
        return any(line.startswith(("LIBREYOLO_SANITIZE:BOOL=ON", "LIBREYOLO_TSAN:BOOL=ON"))
                   for line in f)


def _library_build():
    """The folder of a built, uninstrumented libreyolo.so.0."""
    named = os.environ.get("LIBREYOLO_BUILD_DIR")
    if named:
        if not os.path.exists(os.path.join(named, LIBRARY)):
            raise SystemExit(f"LIBREYOLO_BUILD_DIR={named}: no {LIBRARY} there "
                             "(build it first: cmake --build that folder)")
        if _instrumented(named):
            raise SystemExit(f"LIBREYOLO_BUILD_DIR={named}: a sanitizer build; its library "
                             "cannot load in Python (use a Release build)")
        return named
    default = os.path.join(ROOT, "build")
    if os.path.exists(os.path.join(default, LIBRARY)) and not _instrumented(default):
        return default
    own = os.path.join(ROOT, "build-python")
    if shutil.which("cmake") is None:
        raise SystemExit("libreyolo.so is not built and cmake is not installed: "
                         "apt-get install cmake (or run make build first)")
    subprocess.check_call(["cmake", "-S", ROOT, "-B", own, "-DCMAKE_BUILD_TYPE=Release",
                           "-DLIBREYOLO_BUILD_TESTS=OFF"])
    subprocess.check_call(["cmake", "--build", own, "--target", "libreyolo_shared", "-j",
                           str(os.cpu_count() or 1)])
    return own


class build_py_with_library(build_py):
    def run(self):
        super().run()
        package = os.path.join(self.build_lib, "libreyolo_c")
        built = os.path.realpath(os.path.join(_library_build(), LIBRARY))
        shutil.copyfile(built, os.path.join(package, LIBRARY))
        os.chmod(os.path.join(package, LIBRARY), 0o755)
        # video, where the build has it: the module the library loads on first use
        video = os.path.join(_library_build(), "plugins", "libreyolo_video.so")
        if os.path.exists(video):
            os.makedirs(os.path.join(package, "plugins"), exist_ok=True)
            shutil.copyfile(video, os.path.join(package, "plugins", "libreyolo_video.so"))
        share = os.path.join(package, "share", "libreyolo")
        os.makedirs(share, exist_ok=True)
        shutil.copyfile(os.path.join(ROOT, "src", "kernels", "hub", "kernels.lock.json"),
                        os.path.join(share, "kernels.lock.json"))


class BinaryDistribution(Distribution):
    """A wheel for this platform: the package carries a native library."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": build_py_with_library}, distclass=BinaryDistribution,
      options={"build": {"build_base": os.path.join("build-python", "setuptools")}})
