# SPDX-License-Identifier: MIT
"""Model.embed: every input shape, a batch bit-identical to each input alone, mean and last
pooling against a float64 reference over forward()'s hidden states, unit norm, the same floats
as Llama.embed and create_embedding, and the errors."""

import math

import numpy as np
import pytest

import mambacpp
from mambacpp import Llama


def embed_bits(array):
    return np.ascontiguousarray(array).tobytes()


def reference_unit(vector):
    """vector / its L2 norm in float64, each value rounded to float32 once."""
    values = vector.astype(np.float64)
    return (values / math.sqrt(float(np.dot(values, values)))).astype(np.float32)


TEXTS = ["The state space model", "Hello", "a b c d e f g h i j k l"]


@pytest.mark.parametrize("name", ["lm", "mamba2"])
@pytest.mark.parametrize("pooling", ["mean", "last"])
def test_embed_equals_the_pooled_hidden_states_and_each_alone(models, name, pooling):
    model = mambacpp.Model(models[name], threads=2)
    batch = model.embed(TEXTS, pooling=pooling)
    assert batch.shape == (3, model.d_model) and batch.dtype == np.float32
    for i, text in enumerate(TEXTS):
        ids = model.tokenize(text)
        hidden = model.forward(ids, output="all").astype(np.float64)
        pooled = hidden.mean(axis=0) if pooling == "mean" else hidden[-1]
        np.testing.assert_allclose(batch[i], pooled / np.linalg.norm(pooled), rtol=0, atol=2e-7)
        assert embed_bits(batch[i]) == embed_bits(reference_unit(model.forward(ids, output=pooling)))
        assert math.isclose(float(np.dot(batch[i].astype(np.float64), batch[i])), 1.0, rel_tol=1e-6)
        alone = model.embed(text, pooling=pooling)
        assert alone.shape == (model.d_model,) and embed_bits(alone) == embed_bits(batch[i])
        assert embed_bits(model.embed(ids, pooling=pooling)) == embed_bits(batch[i])
        assert embed_bits(model.embed(np.array(ids, dtype=np.int32), pooling=pooling)) == embed_bits(batch[i])
    as_ids = model.embed([model.tokenize(t) for t in TEXTS], pooling=pooling)
    assert embed_bits(as_ids) == embed_bits(batch)
    raw = model.embed(TEXTS[0], pooling=pooling, normalize=False)
    assert embed_bits(raw) == embed_bits(model.forward(model.tokenize(TEXTS[0]), output=pooling))


def test_llama_embed_gives_the_model_floats(models, lm):
    vectors = lm.embed(TEXTS)
    with Llama(models["lm"], verbose=False) as llm:
        assert llm.embed(TEXTS) == vectors.tolist()
        response = llm.create_embedding(TEXTS[:2])
        assert [d["embedding"] for d in response["data"]] == vectors[:2].tolist()
    with Llama(models["lm"], verbose=False, pooling_type=3) as llm:
        assert llm.embed(TEXTS[1]) == lm.embed(TEXTS[1], pooling="last").tolist()
    with pytest.raises(mambacpp.Error, match="pooling_type"):
        Llama(models["lm"], verbose=False, pooling_type=2)


@pytest.mark.parametrize("call, words", [
    (lambda m: m.embed(""), "input 0 is an empty string"),
    (lambda m: m.embed(["a", ""]), "input 1 is an empty string"),
    (lambda m: m.embed([]), "empty list"),
    (lambda m: m.embed([[1, 2], []]), "input 1 is empty"),
    (lambda m: m.embed([5, 301]), "301 is outside the vocabulary"),
    (lambda m: m.embed("a", pooling="max"), "pooling must be 'mean' or 'last'"),
    (lambda m: m.embed(3.5), "input must be"),
])
def test_embed_errors_name_the_problem(lm, call, words):
    with pytest.raises(mambacpp.Error, match=words.replace("(", r"\(").replace(")", r"\)")):
        call(lm)


def test_a_feature_model_has_no_text_embeddings(features_model):
    with pytest.raises(mambacpp.Error, match="feature rows"):
        features_model.embed([[1, 2]])
