#!/usr/bin/env bash
# `pip install .` into a fresh venv (made with --system-site-packages, as the README says, for
# Debian's numpy), offline, through the in-tree build backend, reusing the test build's module
# (MAMBACPP_BUILD_DIR); then the installed package is imported and used from outside the tree.
# Usage: pip_install_test.sh PYTHON SOURCE_DIR BUILD_DIR CLI
set -euo pipefail
python=$1 source=$2 build=$3 cli=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" -m venv --system-site-packages "$work/venv"
MAMBACPP_BUILD_DIR="$build" PIP_NO_INDEX=1 "$work/venv/bin/pip" install -q --no-deps "$source"
"$cli" make-model --out "$work/m" --d-model 32 --n-layer 2 --vocab 301 --seed 3 >/dev/null
cd "$work"
"$work/venv/bin/python" - "$work/m" <<'PY'
import sys
import mambacpp
assert mambacpp.__file__.startswith(sys.prefix), mambacpp.__file__  # the installed copy
model = mambacpp.Model(sys.argv[1])
text = model.generate("Hello", max_tokens=4, temperature=0)
assert isinstance(text, str) and text
print("installed", mambacpp.__version__, "->", repr(text))
PY
"$work/venv/bin/pip" uninstall -q -y mambacpp
