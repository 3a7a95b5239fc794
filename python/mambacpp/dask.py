# SPDX-License-Identifier: MIT
"""Embedding large collections of pages on a Dask cluster (Debian: python3-distributed).

Each worker loads the model once, through a worker plugin, and embeds groups of pages with
Model.forward_batch (one pass over the weights per group). Because every page's output is the
same bit for bit whatever group, batch, thread count or machine computes it, a distributed run
returns exactly what a single process returns::

    from distributed import Client, LocalCluster
    import mambacpp.dask

    with Client(LocalCluster(n_workers=2, threads_per_worker=1)) as client:
        vectors = mambacpp.dask.embed(client, "models/pages", pages, output="mean").compute()

Scaling: pages are independent, so throughput grows with the workers' cores until the
scheduler's per-task overhead (a few milliseconds) dominates; `pages_per_task` amortizes it.
"""

from __future__ import annotations

from typing import List, Optional, Sequence

import numpy as np

from distributed import Client, WorkerPlugin, get_worker

from . import Model


class ModelPlugin(WorkerPlugin):
    """Loads a mambacpp.Model on every worker of the cluster (and on workers that join later)."""

    def __init__(self, path: str, device: str = "cpu", dtype: Optional[str] = None, threads: int = 1):
        self.path, self.device, self.dtype, self.threads = str(path), device, dtype, threads
        self.name = f"mambacpp:{self.path}:{device}:{dtype}:{threads}"
        self.model: Optional[Model] = None

    def setup(self, worker=None):
        """Loads the model (Dask calls it on each worker)."""
        self.model = Model(self.path, device=self.device, dtype=self.dtype, threads=self.threads)

    def teardown(self, worker=None):
        """Drops the model (Dask calls it when the plugin or the worker goes)."""
        self.model = None


def _worker_model(plugin_name: str) -> Model:
    plugin = get_worker().plugins[plugin_name]
    if plugin.model is None:
        plugin.setup()
    return plugin.model


def _embed_group(plugin_name: str, pages: List[np.ndarray], output: str):
    return _worker_model(plugin_name).forward_batch(list(pages), output=output)


def _width(plugin_name: str) -> int:
    return _worker_model(plugin_name).d_model


def embed(client: Client, model_path: str, pages: Sequence[np.ndarray], output: str = "last",
          pages_per_task: int = 64, device: str = "cpu", dtype: Optional[str] = None, threads: int = 1):
    """Embeds `pages` (feature arrays [T_i, input_dim], or token id lists for a language model)
    on the cluster behind `client`, with the model at `model_path` loaded once per worker.

    Returns a dask.array.Array [len(pages), d_model] of float32 for output="last" or "mean"
    (call .compute()), and for output="all" a list of dask arrays [T_i, d_model], one per page.
    `threads` is each worker's compute threads: with one Dask thread per core, 1 keeps the
    machine's cores busy without oversubscribing them.
    """
    import dask
    import dask.array as da

    if output not in ("all", "last", "mean"):
        raise ValueError(f"output must be 'all', 'last' or 'mean', got {output!r}")
    if pages_per_task < 1:
        raise ValueError(f"pages_per_task must be >= 1, got {pages_per_task}")
    plugin = ModelPlugin(model_path, device=device, dtype=dtype, threads=threads)
    client.register_worker_plugin(plugin, name=plugin.name)
    width = client.submit(_width, plugin.name, pure=False).result()
    pages = list(pages)
    groups = [pages[i:i + pages_per_task] for i in range(0, len(pages), pages_per_task)]
    embed_group = dask.delayed(_embed_group, pure=True)
    if output == "all":
        arrays = []
        for group in groups:
            rows = embed_group(plugin.name, group, output)
            arrays += [da.from_delayed(rows[i], shape=(len(page), width), dtype=np.float32)
                       for i, page in enumerate(group)]
        return arrays
    parts = [da.from_delayed(embed_group(plugin.name, group, output), shape=(len(group), width), dtype=np.float32)
             for group in groups]
    if not parts:
        return da.zeros((0, width), dtype=np.float32)
    return da.concatenate(parts)
