#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Detect objects in a folder of images on a Dask cluster and write one CSV row per detection.

    python3 examples/dask_batch.py photos/ out.csv                       # a local cluster
    python3 examples/dask_batch.py photos/ out.csv --scheduler tcp://host:8786 --model LibreYOLO9t.pt

On a real cluster: start `dask-scheduler` on one machine and `OMP_NUM_THREADS=1
LIBREYOLO_THREADS=1 dask-worker tcp://host:8786 --nthreads 1` on each (one inference thread per
worker process; OpenMP's team would otherwise claim every core in each) (with this library installed and the model file at the same path, or a
named model such as nanodet), then pass --scheduler. Each worker loads the model once.
"""
import argparse
import os

from distributed import Client, LocalCluster

from libreyolo_c.dask import predict_paths


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder")
    p.add_argument("csv")
    p.add_argument("--model", default="nanodet")
    p.add_argument("--scheduler", help="address of a running scheduler (default: a local cluster)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="local cluster size")
    p.add_argument("--conf", type=float, default=None)
    a = p.parse_args()
    paths = sorted(os.path.join(a.folder, f) for f in os.listdir(a.folder)
                   if f.lower().endswith((".jpg", ".jpeg", ".png", ".bmp")))
    if a.scheduler:
        client = Client(a.scheduler)
    else:
        cluster = LocalCluster(n_workers=a.workers, threads_per_worker=1, host="127.0.0.1",
                               dashboard_address=None,
                               env={"LIBREYOLO_THREADS": "1", "OMP_NUM_THREADS": "1"})
        client = Client(cluster)
    with client:
        df = predict_paths(client, paths, model=a.model, conf=a.conf)
        df.to_csv(a.csv, single_file=True, index=False)
    print(f"{len(paths)} images -> {a.csv}")


if __name__ == "__main__":
    main()
