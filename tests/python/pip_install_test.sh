#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The in-tree build backend, offline, reusing the test build's module (MAMBACPP_BUILD_DIR), in a
# fresh venv made with --system-site-packages (as the README says, for Debian's numpy):
#  1. `pip install .`: the installed copy is imported from outside the tree and generates;
#  2. `pip install -e .`: the package's Python files are the repository's (so edits show at
#     once), the extension module the build folder's;
#  3. an sdist (`python -m build --sdist` where python3-build is installed, else the backend's
#     build_sdist hook, which it calls): it holds what the build needs
#     and no tests, its CMake tree configures on its own, and `pip install` of it works.
# Each install's metadata must carry the licence (MIT).
# Usage: pip_install_test.sh PYTHON SOURCE_DIR BUILD_DIR CLI
set -euo pipefail
python=$1 source=$(cd "$2" && pwd) build=$3 cli=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" -m venv --system-site-packages "$work/venv"
pip() { MAMBACPP_BUILD_DIR="$build" PIP_NO_INDEX=1 "$work/venv/bin/pip" "$@"; }
"$cli" make-model --out "$work/m" --d-model 32 --n-layer 2 --vocab 301 --seed 3 >/dev/null
cd "$work"

# Imports the package, checks where it came from ($1: "installed" or "editable") and uses it.
check() {
  "$work/venv/bin/python" - "$work/m" "$1" "$source" <<'PY'
import importlib.metadata
import os
import sys
import mambacpp
path, kind, source = sys.argv[1:]
if kind == "editable":  # the repository's Python files, the build folder's extension module
    assert mambacpp.__file__ == os.path.join(source, "python", "mambacpp", "__init__.py"), mambacpp.__file__
    assert not mambacpp._mambacpp.__file__.startswith(source + "/python/"), mambacpp._mambacpp.__file__
else:
    assert mambacpp.__file__.startswith(sys.prefix), mambacpp.__file__  # the installed copy
assert importlib.metadata.metadata("mambacpp")["License"] == "MIT"
model = mambacpp.Model(path)
text = model.generate("Hello", max_tokens=4, temperature=0)
assert isinstance(text, str) and text
with mambacpp.Llama(path, verbose=False) as llm:
    assert llm("Hello", max_tokens=4, temperature=0)["choices"][0]["text"] == text
print(kind, mambacpp.__version__, "->", repr(text))
PY
}

pip install -q --no-deps "$source"
check installed
pip uninstall -q -y mambacpp

pip install -q --no-deps -e "$source"
check editable
pip uninstall -q -y mambacpp
"$work/venv/bin/python" -c "import mambacpp" 2>/dev/null && { echo "the editable install was not removed"; exit 1; }

if "$python" -c "import build" 2>/dev/null; then  # Debian: python3-build
  PIP_NO_INDEX=1 "$python" -m build --sdist --outdir "$work/dist" "$source" >/dev/null
else  # the hook `python -m build --sdist` calls
  "$work/venv/bin/python" - "$source" "$work/dist" <<'PY'
import sys
sys.path.insert(0, sys.argv[1] + "/python/build_backend")
import mambacpp_build
print(mambacpp_build.build_sdist(sys.argv[2]))
PY
fi
sdist=$(ls "$work"/dist/mambacpp-*.tar.gz)
listing=$(tar -tzf "$sdist")
for needed in PKG-INFO LICENSE pyproject.toml CMakeLists.txt python/build_backend/mambacpp_build.py \
              python/src/module.cc python/mambacpp/llama.py src/model/model.h capi/exports.map; do
  grep -qx "mambacpp-[0-9.]*/$needed" <<<"$listing" || { echo "the sdist lacks $needed"; exit 1; }
done
if grep -q "^mambacpp-[0-9.]*/tests/" <<<"$listing"; then echo "the sdist holds the tests"; exit 1; fi
grep -q "^License: MIT$" <(tar -xzOf "$sdist" --wildcards '*/PKG-INFO')
tar -xzf "$sdist" -C "$work"
cmake -S "$work"/mambacpp-*/ -B "$work/sdist-build" -DMB_PYTHON=ON -DMB_BUILD_TESTS=OFF -DMB_BUILD_BENCH=OFF \
      -DMB_VULKAN=OFF >/dev/null
pip install -q --no-deps "$sdist"
check installed
pip uninstall -q -y mambacpp
