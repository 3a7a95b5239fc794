# SPDX-License-Identifier: MIT
"""The Python package's model calls: logits, forward, forward_batch, states, tokenizing, and
their errors. Exactness claims are checked bit for bit (tobytes), as the C++ tests memcmp."""

import os
import subprocess

import numpy as np
import pytest

import mambacpp
from conftest import cli


def bits(array):
    return np.ascontiguousarray(array).tobytes()


def cli_logits(model_path, ids, tmp_path, all_positions):
    out = tmp_path / "logits.npy"
    arguments = ["logits", "-m", model_path, "--tokens", ",".join(map(str, ids)), "--out", str(out), "-t", "1"]
    if all_positions:
        arguments.append("--all-positions")
    subprocess.run(cli() + arguments, check=True, stdout=subprocess.DEVNULL)
    return np.load(out)


@pytest.mark.parametrize("name", ["lm", "mamba2", "gguf"])
def test_logits_equal_the_cli_bit_for_bit(models, tmp_path, name):
    model = mambacpp.Model(models[name], threads=2)
    ids = [5, 17, 3, 250, 99, 42, 7]
    every = model.logits(ids, all_positions=True)
    assert every.shape == (len(ids), model.vocab_size) and every.dtype == np.float32
    assert bits(every) == bits(cli_logits(models[name], ids, tmp_path, True))
    last = model.logits(np.array(ids, dtype=np.int64))
    assert last.shape == (model.vocab_size,)
    assert bits(last) == bits(cli_logits(models[name], ids, tmp_path, False)[0])
    assert every.flags.owndata and last.flags.owndata


def test_a_carried_state_continues_exactly(lm):
    ids = list(range(1, 40))
    whole = lm.logits(ids, all_positions=True)
    state = lm.new_state()
    first = lm.logits(ids[:13], all_positions=True, state=state)
    assert state.position == 13
    fork = state.copy()
    second = lm.logits(ids[13:], all_positions=True, state=state)
    assert bits(np.concatenate([first, second])) == bits(whole)
    # The fork continues as the original did; a saved and loaded state too.
    assert bits(lm.logits(ids[13:], all_positions=True, state=fork)) == bits(second)
    assert state.position == 39 and fork.position == 39


def test_states_save_and_load(lm, models, tmp_path):
    ids = [3, 1, 4, 1, 5, 9, 2, 6]
    state = lm.new_state()
    lm.logits(ids[:5], state=state)
    path = str(tmp_path / "s.state")
    state.save(path)
    loaded = mambacpp.State.load(path, lm)
    assert loaded.position == 5 and loaded.nbytes == state.nbytes > 0
    assert bits(lm.logits(ids[5:], state=loaded)) == bits(lm.logits(ids[5:], state=state))
    other = mambacpp.Model(models["other"])
    with pytest.raises(mambacpp.Error, match="model"):
        mambacpp.State.load(path, other)
    with pytest.raises(mambacpp.Error, match="another model"):
        other.logits(ids, state=lm.new_state())


def test_forward_batch_equals_each_page_alone(features_model):
    rng = np.random.default_rng(1)
    pages = [rng.standard_normal((length, 7), dtype=np.float32) for length in (1, 9, 33, 4, 70)]
    alone = [features_model.forward(page, output="all") for page in pages]
    batch = features_model.forward_batch(pages, output="all")
    assert len(batch) == len(pages)
    for one, together, page in zip(alone, batch, pages):
        assert one.shape == (page.shape[0], features_model.d_model)
        assert bits(one) == bits(together)
    for output in ("last", "mean"):
        stacked = features_model.forward_batch(pages, output=output)
        assert stacked.shape == (len(pages), features_model.d_model)
        for i, page in enumerate(pages):
            assert bits(stacked[i]) == bits(features_model.forward(page, output=output))
    assert bits(features_model.forward(pages[2], output="last")) == bits(alone[2][-1])


def test_features_in_two_calls_equal_one(features_model):
    rows = np.random.default_rng(2).standard_normal((40, 7), dtype=np.float32)
    state = features_model.new_state()
    head = features_model.forward(rows[:15], state=state)
    tail = features_model.forward(rows[15:], state=state)
    assert bits(np.concatenate([head, tail])) == bits(features_model.forward(rows))


def test_feature_inputs_are_converted_or_refused(features_model):
    rows = np.random.default_rng(3).standard_normal((6, 7))  # float64, as numpy makes it
    as_f32 = features_model.forward(rows.astype(np.float32))
    assert bits(features_model.forward(rows)) == bits(as_f32)
    assert bits(features_model.forward(np.asfortranarray(rows.astype(np.float32)))) == bits(as_f32)
    assert bits(features_model.forward(rows.astype(np.float32).tolist())) == bits(as_f32)
    with pytest.raises(mambacpp.Error, match=r"shape \[T, 7\].*got shape \[6, 8\]"):
        features_model.forward(np.zeros((6, 8), dtype=np.float32))
    with pytest.raises(mambacpp.Error, match="got shape"):
        features_model.forward(np.zeros(7, dtype=np.float32))
    with pytest.raises(mambacpp.Error, match="got shape"):
        features_model.forward(np.zeros((0, 7), dtype=np.float32))
    with pytest.raises(mambacpp.Error, match="dtype"):
        features_model.forward(np.array([["a"] * 7]))
    with pytest.raises(mambacpp.Error, match="dtype"):
        features_model.forward(np.zeros((2, 7), dtype=np.complex64))
    with pytest.raises(mambacpp.Error, match="output must be"):
        features_model.forward(rows, output="first")
    with pytest.raises(mambacpp.Error, match="states must hold one state per page"):
        features_model.forward_batch([rows, rows], states=[features_model.new_state()])


def test_token_inputs_are_checked(lm):
    with pytest.raises(mambacpp.Error, match="outside the vocabulary"):
        lm.logits([1, 2, 100000])
    with pytest.raises(mambacpp.Error, match="outside the vocabulary"):
        lm.logits([-1])
    with pytest.raises(mambacpp.Error, match="outside the vocabulary"):
        lm.logits([2**40])
    with pytest.raises(mambacpp.Error, match="integer token ids"):
        lm.logits(np.array([1.5, 2.0]))
    with pytest.raises(mambacpp.Error, match="integer token ids"):
        lm.logits("hello")
    with pytest.raises(mambacpp.Error):
        lm.logits([])
    assert issubclass(mambacpp.Error, ValueError)
    # The model is still usable after every refusal.
    assert lm.logits([1, 2, 3]).shape == (lm.vocab_size,)


def test_loading_errors_name_the_problem(tmp_path):
    with pytest.raises(mambacpp.Error, match="nonexistent"):
        mambacpp.Model(str(tmp_path / "nonexistent"))
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF\x03\x00\x00\x00garbage")
    with pytest.raises(mambacpp.Error):
        mambacpp.Model(str(broken))
    with pytest.raises(mambacpp.Error, match="threads"):
        mambacpp.Model(str(tmp_path), threads=-1)
    with pytest.raises(mambacpp.Error):
        mambacpp.Model(str(tmp_path), dtype="q3_z")


def test_tokenize_round_trip_and_properties(lm, models):
    text = "The state space model"
    ids = lm.tokenize(text)
    assert ids and all(isinstance(i, int) for i in ids)
    assert lm.detokenize(ids) == text
    assert lm.detokenize(np.array(ids)) == text
    assert mambacpp.Model(models["gguf"]).tokenize(text) == ids
    assert (lm.vocab_size, lm.d_model, lm.n_layer, lm.input_dim) == (301, 32, 2, 0)
    assert lm.has_tokenizer and lm.device == "cpu" and lm.threads == 2
    assert "Model(" in repr(lm)
    with pytest.raises(mambacpp.Error, match="vocabulary|no token"):
        lm.detokenize([100000])


def test_threads_do_not_change_a_bit(models):
    ids = list(range(2, 60, 3))
    one = mambacpp.Model(models["mamba2"], threads=1).logits(ids, all_positions=True)
    two = mambacpp.Model(models["mamba2"], threads=2).logits(ids, all_positions=True)
    assert bits(one) == bits(two)


def test_the_model_outlives_its_python_handle(models):
    state = mambacpp.Model(models["lm"]).new_state()  # the model object is dropped here
    assert state.position == 0 and state.nbytes > 0


@pytest.mark.skipif(os.cpu_count() is None, reason="needs a CPU count")
def test_compute_releases_the_gil(features_model):
    import threading
    rows = np.random.default_rng(4).standard_normal((256, 7), dtype=np.float32)
    expected = bits(features_model.forward(rows))
    results = []

    def work():
        results.append(bits(features_model.forward(rows)))

    threads = [threading.Thread(target=work) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [expected] * 3
