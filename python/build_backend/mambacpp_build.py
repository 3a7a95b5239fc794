"""The PEP 517 build backend of `pip install .`: CMake builds the extension module, and the
wheel is the package folder CMake lays out in the build tree, zipped with its metadata.

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
import os
import re
import shlex
import subprocess
import sys
import sysconfig
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


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    package = _build_package()
    info = f"{NAME}-{_version()}.dist-info"
    wheel_name = f"{NAME}-{_version()}-{_tag()}.whl"
    files = {}
    for entry in sorted(os.listdir(package)):
        path = os.path.join(package, entry)
        if os.path.isfile(path) and not entry.endswith(".pyc"):
            with open(path, "rb") as source:
                files[f"{NAME}/{entry}"] = source.read()
    files[f"{info}/METADATA"] = _metadata().encode()
    files[f"{info}/WHEEL"] = (f"Wheel-Version: 1.0\nGenerator: mambacpp_build\nRoot-Is-Purelib: false\n"
                              f"Tag: {_tag()}\n").encode()
    record = "".join(_record_line(name, data) for name, data in files.items()) + f"{info}/RECORD,,\n"
    os.makedirs(wheel_directory, exist_ok=True)
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, data in files.items():
            wheel.writestr(name, data)
        wheel.writestr(f"{info}/RECORD", record)
    return wheel_name
