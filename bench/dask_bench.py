#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Pages per second of mambacpp.dask.embed on a LocalCluster of 1 and 2 worker processes, against
one process's forward_batch, on a random feature backbone made with `make-model --input-dim`.

    PYTHONPATH=build/python python3 bench/dask_bench.py --cli build/mambacpp --pages 512 --length 128

Each figure is the median of --repeats timed runs after a warm-up; the distributed results are
checked to equal the single-process ones bit for bit."""

import argparse
import os
import statistics
import subprocess
import tempfile
import time

import numpy as np

import mambacpp
import mambacpp.dask
from distributed import Client, LocalCluster


def median_seconds(run, repeats):
    run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cli", default="build/mambacpp")
    parser.add_argument("--pages", type=int, default=512)
    parser.add_argument("--length", type=int, default=128, help="positions per page")
    parser.add_argument("--input-dim", type=int, default=64)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--n-layer", type=int, default=4)
    parser.add_argument("--pages-per-task", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    folder = tempfile.mkdtemp(prefix="mambacpp_dask_bench_")
    model_path = os.path.join(folder, "pages")
    subprocess.run([args.cli, "make-model", "--out", model_path, "--d-model", str(args.d_model), "--n-layer",
                    str(args.n_layer), "--input-dim", str(args.input_dim), "--seed", "1"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rng = np.random.default_rng(0)
    pages = [rng.standard_normal((args.length, args.input_dim), dtype=np.float32) for _ in range(args.pages)]
    print(f"{args.pages} pages of {args.length} x {args.input_dim} features, d_model {args.d_model}, "
          f"{args.n_layer} layers, output mean, {os.cpu_count()} cores")

    for threads in (1, 2):
        model = mambacpp.Model(model_path, threads=threads)
        expected = model.forward_batch(pages, output="mean")
        seconds = median_seconds(lambda: model.forward_batch(pages, output="mean"), args.repeats)
        print(f"one process, forward_batch, {threads} thread(s): {args.pages / seconds:9.1f} pages/s")
    for workers in (1, 2):
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                          dashboard_address=None, silence_logs=40) as cluster, Client(cluster) as client:
            def run():
                return mambacpp.dask.embed(client, model_path, pages, output="mean",
                                           pages_per_task=args.pages_per_task).compute()

            assert run().tobytes() == expected.tobytes(), "the distributed result differs"
            seconds = median_seconds(run, args.repeats)
            print(f"Dask LocalCluster, {workers} worker(s) x 1 thread: {args.pages / seconds:9.1f} pages/s")


if __name__ == "__main__":
    main()
