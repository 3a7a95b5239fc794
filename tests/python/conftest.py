# SPDX-License-Identifier: MIT
"""Fixtures of the Python package's tests: small random checkpoints written by the CLI's
make-model (the real Hugging Face and GGUF layouts), once per test session.

ctest sets MB_CLI (the command that starts the CLI) and PYTHONPATH (the build folder's copy of
the package); run by hand, the default build folder's are used."""

import os
import shlex
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.join(HERE, "..", "..", "build")
if "MB_CLI" not in os.environ:
    sys.path.insert(0, os.path.join(BUILD, "python"))


def cli():
    return shlex.split(os.environ.get("MB_CLI") or os.path.join(BUILD, "mambacpp"))


def run_cli(*arguments):
    subprocess.run(cli() + [str(a) for a in arguments], check=True, stdout=subprocess.DEVNULL)


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    """Paths of the checkpoints: "lm" (Mamba-1 with a tokenizer), "mamba2", "gguf" (the lm's
    weights in a GGUF file), "features" (an input projection from 7 raw features), "other" (a
    different Mamba-1)."""
    root = tmp_path_factory.mktemp("models")
    paths = {name: str(root / name) for name in ("lm", "mamba2", "features", "other")}
    paths["gguf"] = str(root / "lm.gguf")
    tiny = ["--d-model", "32", "--n-layer", "2", "--vocab", "301"]
    run_cli("make-model", "--out", paths["lm"], *tiny, "--seed", "3")
    run_cli("make-model", "--out", paths["other"], *tiny, "--seed", "4")
    run_cli("make-model", "--out", paths["mamba2"], "--arch", "mamba2", "--d-model", "64", "--headdim", "16",
            "--n-layer", "2", "--vocab", "301", "--seed", "5")
    run_cli("make-model", "--out", paths["features"], "--d-model", "32", "--n-layer", "2", "--input-dim", "7",
            "--seed", "6")
    run_cli("make-model", "--out", paths["gguf"], *tiny, "--seed", "3", "--format", "gguf")
    return paths


@pytest.fixture(scope="session")
def lm(models):
    import mambacpp
    return mambacpp.Model(models["lm"], threads=2)


@pytest.fixture(scope="session")
def features_model(models):
    import mambacpp
    return mambacpp.Model(models["features"], threads=2)
