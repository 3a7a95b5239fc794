# SPDX-License-Identifier: MIT
"""mambacpp.dask on a LocalCluster of 2 worker processes on loopback: the distributed results
equal the single-process forward_batch bit for bit, with the model loaded once per worker."""

import numpy as np
import pytest

import mambacpp

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                       dashboard_address=None, silence_logs=40)
    with distributed.Client(cluster) as client:
        yield client
    cluster.close()


def test_distributed_embedding_equals_one_process(client, models, features_model):
    import mambacpp.dask

    rng = np.random.default_rng(5)
    pages = [rng.standard_normal((int(rng.integers(1, 40)), 7), dtype=np.float32) for _ in range(37)]
    for output in ("last", "mean"):
        distributed_rows = mambacpp.dask.embed(client, models["features"], pages, output=output, pages_per_task=5)
        assert distributed_rows.shape == (len(pages), features_model.d_model)
        got = distributed_rows.compute()
        assert got.dtype == np.float32
        assert got.tobytes() == features_model.forward_batch(pages, output=output).tobytes()
    every = mambacpp.dask.embed(client, models["features"], pages[:6], output="all", pages_per_task=4)
    for lazy, page in zip(every, pages[:6]):
        assert lazy.compute().tobytes() == features_model.forward(page, output="all").tobytes()
    # Each worker process holds the model once, through the plugin.
    loaded = client.run(lambda dask_worker: sorted(name for name in dask_worker.plugins if name.startswith("mambacpp:")))
    assert len(loaded) == 2 and all(len(names) == 1 for names in loaded.values())


def test_bad_arguments_are_refused(client, models):
    import mambacpp.dask

    with pytest.raises(ValueError, match="output"):
        mambacpp.dask.embed(client, models["features"], [], output="first")
    with pytest.raises(ValueError, match="pages_per_task"):
        mambacpp.dask.embed(client, models["features"], [], pages_per_task=0)
    with pytest.raises(mambacpp.Error):
        mambacpp.dask.embed(client, models["features"], [np.zeros((3, 5), dtype=np.float32)]).compute()
