# SPDX-License-Identifier: MIT
"""Batch inference on Dask distributed: one row per detection, one model per worker.

    from distributed import Client
    from libreyolo_c.dask import predict_paths
    client = Client("tcp://scheduler:8786")          # or Client() for a local cluster

Start workers with OMP_NUM_THREADS=1 LIBREYOLO_THREADS=1 and --nthreads 1 (or a
LocalCluster with env={...} and threads_per_worker=1): one inference thread per
process; without OMP_NUM_THREADS each process's OpenMP team claims every core.
    df = predict_paths(client, paths, model="LibreYOLO9t.pt", conf=0.25)
    df.to_csv("detections-*.csv", index=False)

Each worker process loads the model once (a per-process cache keyed by the
model and its settings), then maps its partitions of paths; an image that
fails gives one row with `error` set instead of failing the job. Tasks of a
worker that dies are rerun elsewhere by the scheduler, and the result holds
each partition's rows exactly once.
"""
import os
import threading

import pandas as pd

COLUMNS = ["path", "class_id", "name", "confidence", "x1", "y1", "x2", "y2", "error"]
_META = pd.DataFrame({
    "path": pd.Series(dtype=object), "class_id": pd.Series(dtype="int64"),
    "name": pd.Series(dtype=object), "confidence": pd.Series(dtype="float64"),
    "x1": pd.Series(dtype="float64"), "y1": pd.Series(dtype="float64"),
    "x2": pd.Series(dtype="float64"), "y2": pd.Series(dtype="float64"),
    "error": pd.Series(dtype=object)})

_models = {}
_models_lock = threading.Lock()
loads = 0  # models loaded in this process (tests read it)


def cached_model(model, threads):
    """The process's one LibreYOLO for (model, threads)."""
    global loads
    key = (os.fspath(model), int(threads))
    with _models_lock:
        m = _models.get(key)
        if m is None:
            if threads:
                os.environ["LIBREYOLO_THREADS"] = str(int(threads))
            from .model import LibreYOLO
            m = _models[key] = LibreYOLO(key[0])
            loads += 1
        return m


def rows_for_paths(paths, model, threads=1, **predict):
    """One row per detection of each path (a row with `error` for a path that fails)."""
    m = cached_model(model, threads)
    rows = []
    for path in paths:
        try:
            r = m.predict(path, **predict)
        except Exception as e:  # one image's failure is a row, not a lost job
            rows.append({"path": path, "class_id": -1, "name": "", "confidence": float("nan"),
                         "x1": float("nan"), "y1": float("nan"), "x2": float("nan"),
                         "y2": float("nan"), "error": f"{type(e).__name__}: {e}"})
            continue
        for box, conf, cls in zip(r.boxes.xyxy, r.boxes.conf, r.boxes.cls):
            rows.append({"path": path, "class_id": int(cls), "name": r.names.get(int(cls), ""),
                         "confidence": float(conf), "x1": float(box[0]), "y1": float(box[1]),
                         "x2": float(box[2]), "y2": float(box[3]), "error": None})
    return pd.DataFrame(rows, columns=COLUMNS).astype(_META.dtypes.to_dict())


def predict_paths(client, paths, model="nanodet", partition_size=16, threads=1, **predict):
    """A Dask DataFrame of detections of `paths` (strings), computed on `client`'s
    workers in partitions of `partition_size` paths, `threads` inference threads
    each (LIBREYOLO_THREADS in the worker)."""
    import dask.dataframe as dd
    from dask import delayed

    paths = [os.fspath(p) for p in paths]
    parts = [paths[i:i + partition_size] for i in range(0, len(paths), partition_size)]
    pieces = [delayed(rows_for_paths, pure=True)(part, model, threads, **predict)
              for part in parts]
    if not pieces:
        return dd.from_pandas(_META, npartitions=1)
    return dd.from_delayed(pieces, meta=_META, verify_meta=False)
