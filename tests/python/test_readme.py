"""The README's Python examples run as written, on the test checkpoints (the paths in the text
are replaced by the fixtures' paths)."""

import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))


def readme_blocks(section):
    with open(os.path.join(HERE, "..", "..", "README.md"), encoding="utf-8") as readme:
        text = readme.read()
    start = text.index("\n## " + section + "\n")
    end = text.find("\n## ", start + 1)
    return re.findall(r"```python\n(.*?)```", text[start:end if end >= 0 else None], re.S)


def test_the_python_section_runs(models, tmp_path, monkeypatch, capsys):
    blocks = readme_blocks("Python") + readme_blocks("Scaling out")
    assert len(blocks) == 2  # the package tour and the Dask example
    monkeypatch.chdir(tmp_path)
    namespace = {}
    for block in blocks:
        code = block.replace("models/demo-tiny", models["lm"]).replace("models/pages", models["features"])
        exec(compile(code, "README.md", "exec"), namespace)
    assert namespace["vectors"].shape == (3, 32)
    assert os.path.exists(tmp_path / "hello.state")
    assert capsys.readouterr().out
