# SPDX-License-Identifier: MIT
"""The PEP 517 build backend of `pip install .`: CMake builds the extension module, and the
wheel is the package folder CMake lays out in the build tree, zipped with its metadata.
`pip install -e .` (PEP 660) installs a finder that imports the package's Python files from
python/mambacpp/ in the repository, where edits take effect at once, and the extension module
from the build folder (rebuilt by running the install again, or `cmake --build` of that folder).
build_sdist (`python -m build --sdist`) packs the files the build needs (the git-tracked ones
when the tree is a git checkout), without the tests, benchmarks and fuzzers.

It is in the repository (pyproject.toml's backend-path) and needs nothing but the standard
library, so pip installs offline with no build-time download: the compilers, CMake, pybind11
and the engine's libraries come from Debian packages (see the README). Environment:
MAMBACPP_BUILD_DIR picks the CMake build folder (default: build-python/ in the repository, kept
between installs so a reinstall rebuilds only what changed; a folder that is already configured,
such as the README's build/, is built as it is configured, not reconfigured); MAMBACPP_CMAKE_ARGS adds
configure arguments (e.g. "-DMB_VULKAN=OFF"); MAMBACPP_JOBS sets the build's parallelism.
"""

import base64
import hashlib
import io
import os
import re
import shlex
import subprocess
import sys
import sysconfig
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAME = "mambacpp"


def _version():
    with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as cmake:
        match = re.search(r"project\(mambacpp VERSION ([0-9.]+)", cmake.read())
    if not match:
        raise RuntimeError("CMakeLists.txt declares no project version")
    return match.group(1)


def _metadata():
    return ("Metadata-Version: 2.1\n"
            f"Name: {NAME}\n"
            f"Version: {_version()}\n"
            "Summary: Mamba-family language and sequence models in C++ (CPU, Vulkan), exact and fast\n"
            "License: MIT\n"
            "Classifier: License :: OSI Approved :: MIT License\n"
            "Requires-Python: >=3.9\n"
            "Requires-Dist: numpy\n")


def _tag():
    interpreter = f"cp{sys.version_info.major}{sys.version_info.minor}"
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"{interpreter}-{interpreter}-{platform}"


def _build_package():
    """Configures and builds the module; returns the folder holding the package."""
    given = os.environ.get("MAMBACPP_BUILD_DIR")
    build = given or os.path.join(ROOT, "build-python")
    configure = ["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release", "-DMB_PYTHON=ON",
                 f"-DPython3_EXECUTABLE={sys.executable}", "-DMB_BUILD_TESTS=OFF", "-DMB_BUILD_BENCH=OFF"]
    configure += shlex.split(os.environ.get("MAMBACPP_CMAKE_ARGS", ""))
    jobs = os.environ.get("MAMBACPP_JOBS") or str(os.cpu_count() or 2)
    if not (given and os.path.exists(os.path.join(build, "CMakeCache.txt"))):
        subprocess.run(configure, check=True, stdout=sys.stderr)
    subprocess.run(["cmake", "--build", build, "--target", "_mambacpp", "-j", jobs], check=True,
                   stdout=sys.stderr)
    return os.path.join(build, "python", NAME)


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}\n"


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    info = f"{NAME}-{_version()}.dist-info"
    os.makedirs(os.path.join(metadata_directory, info), exist_ok=True)
    with open(os.path.join(metadata_directory, info, "METADATA"), "w", encoding="utf-8") as out:
        out.write(_metadata())
    return info


def _write_wheel(wheel_directory, tag, files):
    """Zips `files` ({name in the wheel: bytes}) with the metadata; returns the wheel's name."""
    info = f"{NAME}-{_version()}.dist-info"
    wheel_name = f"{NAME}-{_version()}-{tag}.whl"
    files = dict(files)
    with open(os.path.join(ROOT, "LICENSE"), "rb") as licence:
        files[f"{info}/LICENSE"] = licence.read()
    files[f"{info}/METADATA"] = _metadata().encode()
    files[f"{info}/WHEEL"] = (f"Wheel-Version: 1.0\nGenerator: mambacpp_build\nRoot-Is-Purelib: false\n"
                              f"Tag: {tag}\n").encode()
    record = "".join(_record_line(name, data) for name, data in files.items()) + f"{info}/RECORD,,\n"
    os.makedirs(wheel_directory, exist_ok=True)
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, data in files.items():
            wheel.writestr(name, data)
        wheel.writestr(f"{info}/RECORD", record)
    return wheel_name


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    package = _build_package()
    files = {}
    for entry in sorted(os.listdir(package)):
        path = os.path.join(package, entry)
        if os.path.isfile(path) and not entry.endswith(".pyc"):
            with open(path, "rb") as source:
                files[f"{NAME}/{entry}"] = source.read()
    return _write_wheel(wheel_directory, _tag(), files)


# The editable install's finder: `mambacpp` is the repository's python/mambacpp/ (its Python
# files as they are edited), with the build folder's copy second on the package's path, where
# `from . import _mambacpp` finds the extension module. It is appended to sys.meta_path, so a
# mambacpp found on sys.path (PYTHONPATH=build/python, say) still wins, as it would anyway.
_FINDER = """import importlib.machinery
import os
import sys

SOURCE = {source!r}
MODULE = {module!r}


class MambacppEditableFinder:
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname != "mambacpp":
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, [os.path.dirname(SOURCE)])
        if spec is not None:
            spec.submodule_search_locations = [SOURCE, MODULE]
        return spec


def install():
    if MambacppEditableFinder not in sys.meta_path:
        sys.meta_path.append(MambacppEditableFinder)
"""


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    return prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    module = _build_package()
    finder = "__editable___mambacpp_finder"
    source = os.path.join(ROOT, "python", NAME)
    files = {f"{finder}.py": _FINDER.format(source=source, module=os.path.abspath(module)).encode(),
             f"__editable__.{NAME}.pth": f"import {finder}; {finder}.install()\n".encode()}
    return _write_wheel(wheel_directory, _tag(), files)


# What an sdist holds: what CMake reads to build the module and the CLI (tests, benchmarks and
# fuzzers are configured off by the backend), and the package's documents.
_SDIST_ROOTS = ("CMakeLists.txt", "cmake/", "src/", "include/", "apps/", "capi/", "python/", "pyproject.toml",
                "LICENSE", "README.md", "DEVELOPERS.md")


def _sdist_files():
    """The files of the source tree an sdist holds, relative to ROOT, sorted."""
    try:
        # Tracked files and new ones not yet committed, without what .gitignore leaves out.
        listed = subprocess.run(["git", "-C", ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                                check=True, capture_output=True).stdout
        names = [name for name in listed.decode().split("\0") if name]
    except (OSError, subprocess.CalledProcessError):  # not a checkout (an unpacked sdist, say)
        names = []
        for folder, subfolders, entries in os.walk(ROOT):
            subfolders[:] = [d for d in subfolders if d != "__pycache__" and not d.startswith(".")]
            names += [os.path.relpath(os.path.join(folder, e), ROOT) for e in entries if not e.endswith(".pyc")]
    return sorted(n for n in names if n.startswith(_SDIST_ROOTS) and os.path.isfile(os.path.join(ROOT, n)))


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_sdist(sdist_directory, config_settings=None):
    base = f"{NAME}-{_version()}"
    os.makedirs(sdist_directory, exist_ok=True)
    path = os.path.join(sdist_directory, f"{base}.tar.gz")
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as sdist:
        for name in _sdist_files():
            sdist.add(os.path.join(ROOT, name), f"{base}/{name}", recursive=False)
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        data = _metadata().encode()
        info.size = len(data)
        info.mode = 0o644
        sdist.addfile(info, io.BytesIO(data))
    return os.path.basename(path)
