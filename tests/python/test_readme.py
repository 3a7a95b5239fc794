# SPDX-License-Identifier: MIT
"""The README's Python examples run as written, on the test checkpoints (the paths in the text
are replaced by the fixtures' paths). The Dask example runs as the README says to run it: saved
as a script and started by the interpreter, whose worker processes import it again."""

import os
import re
import subprocess
import sys

import pytest

import mambacpp

HERE = os.path.dirname(os.path.abspath(__file__))


def readme_blocks(section):
    with open(os.path.join(HERE, "..", "..", "README.md"), encoding="utf-8") as readme:
        text = readme.read()
    start = text.index("\n## " + section + "\n")
    end = text.find("\n## ", start + 1)
    return re.findall(r"```python\n(.*?)```", text[start:end if end >= 0 else None], re.S)


def with_test_paths(code, models):
    return code.replace("data/demo-model", models["lm"]).replace("models/pages", models["features"])


def test_the_python_section_runs(models, tmp_path, monkeypatch, capsys):
    blocks = readme_blocks("Python")
    assert len(blocks) == 2  # the package tour and the llama-cpp-python example
    monkeypatch.chdir(tmp_path)
    namespace = {}
    for block in blocks:
        exec(compile(with_test_paths(block, models), "README.md", "exec"), namespace)
    assert namespace["vectors"].shape == (3, 32)
    assert namespace["embeddings"].shape == (2, 32) and namespace["one"].shape == (32,)
    assert os.path.exists(tmp_path / "hello.state")
    assert len(namespace["vector"]) == 32 and namespace["out"]["object"] == "text_completion"
    assert capsys.readouterr().out


def test_the_dask_example_runs_as_a_script(models, tmp_path):
    pytest.importorskip("distributed")
    [block] = readme_blocks("Scaling out")
    assert 'if __name__ == "__main__":' in block
    script = tmp_path / "embed_pages.py"
    script.write_text(with_test_paths(block, models), encoding="utf-8")
    # The package this test imports, for the script and its workers.
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(mambacpp.__file__)))
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join([package_root, os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=environment, capture_output=True,
                            text=True, timeout=240)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "(3, 32)"
