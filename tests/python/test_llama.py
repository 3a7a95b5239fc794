# SPDX-License-Identifier: MIT
"""mambacpp.Llama, llama-cpp-python's interface: its response shapes, echo, n choices, seeds,
n_ctx, streaming, chat, tokens as bytes, embeddings, closing, argument type errors, and a
docstring on every public call of the package."""

import importlib
import inspect
import math
import re

import numpy as np
import pytest

import mambacpp
from mambacpp import Llama

COMPLETION_KEYS = {"id", "object", "created", "model", "choices", "usage"}
CHOICE_KEYS = {"text", "index", "logprobs", "finish_reason"}


@pytest.fixture(scope="module")
def llm(models):
    with Llama(model_path=models["lm"], n_ctx=256, n_threads=2, n_batch=64, verbose=False) as model:
        yield model


def test_completion_has_llama_cpp_pythons_shape(llm, lm):
    out = llm("Hello", max_tokens=5, temperature=0)
    assert set(out) == COMPLETION_KEYS and out["object"] == "text_completion"
    assert out["id"].startswith("cmpl-") and isinstance(out["created"], int)
    [choice] = out["choices"]
    assert set(choice) == CHOICE_KEYS and choice["index"] == 0 and choice["logprobs"] is None
    assert choice["finish_reason"] in ("stop", "length")
    assert choice["text"] == lm.generate("Hello", max_tokens=5, temperature=0)
    assert {"prompt_tokens", "completion_tokens", "total_tokens"} <= set(out["usage"])
    assert llm.create_completion("Hello", max_tokens=5, temperature=0)["choices"][0]["text"] == choice["text"]
    chunks = list(llm("Hello", max_tokens=5, temperature=0, stream=True))
    assert all(chunk["object"] == "text_completion" and set(chunk["choices"][0]) == CHOICE_KEYS
               for chunk in chunks if chunk["choices"])
    assert "".join(c["choices"][0]["text"] for c in chunks if c["choices"]) == choice["text"]


def test_echo_puts_the_prompt_first(llm):
    plain = llm("Once upon", max_tokens=6, temperature=0)["choices"][0]["text"]
    assert llm("Once upon", max_tokens=6, temperature=0, echo=True)["choices"][0]["text"] == "Once upon" + plain
    ids = llm.tokenize(b"Once upon")
    assert llm(ids, max_tokens=6, temperature=0, echo=True)["choices"][0]["text"] == "Once upon" + plain
    chunks = list(llm("Once upon", max_tokens=6, temperature=0, echo=True, stream=True))
    assert chunks[0]["choices"][0]["text"] == "Once upon"
    assert "".join(c["choices"][0]["text"] for c in chunks if c["choices"]) == "Once upon" + plain
    with pytest.raises(mambacpp.Error, match="echo and logprobs"):
        llm("x", echo=True, logprobs=2)


def test_n_choices_use_consecutive_seeds(llm):
    sampling = dict(max_tokens=8, temperature=1.0, top_k=0, min_p=0.0)
    out = llm("abc", n=3, seed=5, **sampling)
    assert [c["index"] for c in out["choices"]] == [0, 1, 2]
    for i, choice in enumerate(out["choices"]):
        assert choice["text"] == llm("abc", seed=5 + i, **sampling)["choices"][0]["text"]
    usage = out["usage"]
    assert usage["prompt_tokens"] == len(llm.tokenize(b"abc"))
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    streamed = {}
    for chunk in llm("abc", n=2, seed=5, stream=True, **sampling):
        for choice in chunk["choices"]:
            streamed[choice["index"]] = streamed.get(choice["index"], "") + choice["text"]
    assert streamed == {0: out["choices"][0]["text"], 1: out["choices"][1]["text"]}
    chat = llm.create_chat_completion([{"role": "user", "content": "Hi"}], n=2, seed=3, max_tokens=4)
    assert [c["index"] for c in chat["choices"]] == [0, 1]
    with pytest.raises(mambacpp.Error, match="n must be"):
        llm("abc", n=0)


def test_the_constructors_seed_makes_a_script_reproducible(models):
    def calls():
        with Llama(models["lm"], seed=42, verbose=False) as model:
            return [model("abc", max_tokens=8, top_k=0, min_p=0.0)["choices"][0]["text"] for _ in range(3)]

    assert calls() == calls()


def test_n_ctx_bounds_the_prompt_and_the_output(models):
    with Llama(models["lm"], n_ctx=12, verbose=False) as small:
        prompt = list(range(1, 8))  # 7 tokens: 5 left
        for max_tokens in (None, 0, 100):
            out = small(prompt, max_tokens=max_tokens, temperature=0)
            assert out["usage"]["completion_tokens"] <= 5
        with pytest.raises(mambacpp.Error, match="context"):
            small(list(range(1, 13)), max_tokens=1)
        assert small.n_ctx() == 12
    with pytest.raises(mambacpp.Error, match="n_ctx"):
        Llama(models["lm"], n_ctx=-1, verbose=False)


def test_chat_completion(llm, lm):
    messages = [{"role": "user", "content": "Hi there"}]
    reply = llm.create_chat_completion(messages=messages, max_tokens=6, temperature=0)
    assert reply["object"] == "chat.completion" and reply["choices"][0]["message"]["role"] == "assistant"
    expected = lm.create_chat_completion(messages, max_tokens=6, temperature=0)
    assert reply["choices"][0]["message"]["content"] == expected["choices"][0]["message"]["content"]
    chunks = list(llm.create_chat_completion(messages=messages, max_tokens=6, temperature=0, stream=True))
    assert all(chunk["object"] == "chat.completion.chunk" for chunk in chunks)
    with pytest.raises(mambacpp.Error, match="response_format"):
        llm.create_chat_completion(messages=messages, response_format={"type": "json_object"})


def test_tokens_are_bytes_as_in_llama_cpp_python(llm, lm):
    ids = llm.tokenize(b"Hello world")
    assert ids == lm.tokenize("Hello world") == llm.tokenize("Hello world")
    assert llm.detokenize(ids) == b"Hello world"
    assert llm.detokenize(ids[1:], prev_tokens=ids[:1]) == b"Hello world"[len(llm.detokenize(ids[:1])):]
    assert (llm.n_vocab(), llm.n_embd()) == (lm.vocab_size, lm.d_model)


def unit(vector):
    """vector / its L2 norm, computed as Llama.embed computes it (in float64, rounded to float32
    once)."""
    values = vector.astype(np.float64)
    return (values / math.sqrt(float(np.dot(values, values)))).astype(np.float32)


def test_embeddings_are_normalised_mean_hidden_states(llm, lm):
    texts = ["The state space model", "Hello", "a b c d e f"]
    vectors = llm.embed(texts)
    assert len(vectors) == 3 and all(len(v) == lm.d_model for v in vectors)
    for text, vector in zip(texts, vectors):
        assert math.isclose(math.fsum(x * x for x in vector), 1.0, rel_tol=1e-6)
        mean = lm.forward(lm.tokenize(text), output="mean")
        assert np.array_equal(np.asarray(vector, dtype=np.float32), unit(mean))
        assert llm.embed(text) == vector  # a str gives one list; alone equals in a batch
        assert llm.embed(text, normalize=False) == mean.tolist()
    vectors_again, count = llm.embed(texts, return_count=True)
    assert vectors_again == vectors and count == sum(len(lm.tokenize(t)) for t in texts)
    response = llm.create_embedding(texts[:2])
    assert [d["embedding"] for d in response["data"]] == vectors[:2] and response["object"] == "list"


def test_long_embedding_inputs_are_truncated_to_n_ctx(models, lm):
    with Llama(models["lm"], n_ctx=4, verbose=False) as short:
        text = "one two three four five six seven"
        ids = lm.tokenize(text)[:4]
        mean = lm.forward(ids, output="mean")
        assert np.array_equal(np.asarray(short.embed(text), dtype=np.float32), unit(mean))
        with pytest.raises(mambacpp.Error, match="n_ctx"):
            short.embed(text, truncate=False)


def test_closing(models, capsys):
    with Llama(models["lm"], verbose=True) as model:
        assert model("abc", max_tokens=2, temperature=0)["choices"]
    assert "mambacpp: loaded" in capsys.readouterr().err
    with pytest.raises(mambacpp.Error, match="closed"):
        model("abc")
    with pytest.raises(mambacpp.Error, match="closed"):
        model.tokenize(b"abc")
    model.close()  # twice is harmless


@pytest.mark.parametrize("call, name", [
    (lambda m: m("x", max_tokens="5"), "max_tokens"),
    (lambda m: m("x", temperature="hot"), "temperature"),
    (lambda m: m("x", top_k=1.5), "top_k"),
    (lambda m: m("x", stop=5), "stop"),
    (lambda m: m("x", echo="yes"), "echo"),
    (lambda m: m("x", stream=1), "stream"),
    (lambda m: m("x", seed="1"), "seed"),
    (lambda m: m("x", n=2.0), "n"),
    (lambda m: m({"prompt": "x"}), "prompt"),
    (lambda m: m.create_chat_completion("hi"), "messages"),
    (lambda m: m.create_chat_completion([{"role": "user", "content": "x"}], max_tokens="2"), "max_tokens"),
    (lambda m: m.tokenize(5), "text"),
    (lambda m: m.detokenize("abc"), "tokens"),
    (lambda m: m.embed(5), "input"),
    (lambda m: m.embed(["a", 3]), "input"),
])
def test_wrong_argument_types_raise_type_errors_naming_them(llm, call, name):
    with pytest.raises(TypeError, match=rf"^{name} must be"):
        call(llm)


def test_constructor_arguments_are_checked(models):
    for arguments, name in ((dict(model_path=3), "model_path"), (dict(n_ctx=1.5), "n_ctx"),
                            (dict(n_threads="2"), "n_threads"), (dict(verbose=None), "verbose"),
                            (dict(seed=0.5), "seed"), (dict(n_batch="512"), "n_batch")):
        with pytest.raises(TypeError, match=rf"^{name} must be"):
            Llama(**{"model_path": models["lm"], **arguments})
    with pytest.raises(mambacpp.Error, match="n_gpu_layers"):
        Llama(models["lm"], n_gpu_layers=-1, verbose=False)
    with pytest.raises(TypeError):
        Llama(models["lm"], no_such_option=1)


def documented(obj):
    """The docstring without pybind11's signature lines ("name(self: ..., x: int) -> str")."""
    lines = (inspect.getdoc(obj) or "").splitlines()
    return "\n".join(line for line in lines if not re.match(r"^\w+\(.*\)( -> .*)?$", line)).strip()


def ours(owner):
    return getattr(owner, "__module__", "").startswith("mambacpp")


def public_members(namespace):
    """The public callables and properties a module or class of the package defines itself
    (inherited ones, from object or distributed's WorkerPlugin, are their authors' business)."""
    for name in dir(namespace):
        if name.startswith("_"):
            continue
        if inspect.isclass(namespace):
            owner = next(c for c in namespace.__mro__ if name in c.__dict__)
            if not ours(owner):
                continue
        member = inspect.getattr_static(namespace, name)
        if isinstance(member, (staticmethod, classmethod)):
            member = member.__func__
        if not inspect.isclass(namespace) and not ours(member):
            continue
        if callable(member) or isinstance(member, property):
            yield name, member


def test_every_public_call_has_a_docstring():
    modules = [mambacpp]
    try:
        modules.append(importlib.import_module("mambacpp.dask"))
    except ImportError:  # Dask is optional
        pass
    checked, missing = [], []
    for module in modules:
        for name, obj in public_members(module):
            checked.append(f"{module.__name__}.{name}")
            if not documented(obj):
                missing.append(checked[-1])
            if inspect.isclass(obj):
                for member_name, member in public_members(obj):
                    checked.append(f"{module.__name__}.{name}.{member_name}")
                    if not documented(member):
                        missing.append(checked[-1])
    assert {"mambacpp.Llama.embed", "mambacpp.Model.logits", "mambacpp.State.save",
            "mambacpp.Model.vocab_size"} <= set(checked)
    assert not missing, missing
