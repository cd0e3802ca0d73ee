# SPDX-License-Identifier: MIT
"""Batch inference on Dask distributed: a scheduler and two worker processes on
127.0.0.1 (closed by the test), 200+ image paths, rows equal to the single-process
rows exactly, one model load per worker, failing images as error rows, and no
row lost or duplicated when a worker is killed mid-run."""
import os
import signal
import time

import pytest

distributed = pytest.importorskip("distributed", reason="python3-distributed is not installed")
pytest.importorskip("dask.dataframe", reason="python3-dask / python3-pandas are not installed")

from distributed import Client, LocalCluster  # noqa: E402
import pandas as pd  # noqa: E402

import libreyolo_c.dask as lyd  # noqa: E402

OPTIONS = dict(imgsz=320, conf=0.5)


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None, env={"LIBREYOLO_THREADS": "1", "OMP_NUM_THREADS": "1"},
                      silence_logs=40) as c, Client(c, timeout="60s") as client:
        yield c, client


def paths_for(images, tmp_path):
    junk = tmp_path / "junk.jpg"
    junk.write_bytes(b"not an image")
    return images * 67 + [str(tmp_path / "missing.jpg"), str(junk)]


def test_rows_equal_single_process(cluster, detector_path, images, tmp_path):
    _, client = cluster
    paths = paths_for(images, tmp_path)
    assert len(paths) >= 200
    want = lyd.rows_for_paths(paths, detector_path, 1, **OPTIONS)
    got = lyd.predict_paths(client, paths, model=detector_path, partition_size=10,
                            **OPTIONS).compute().reset_index(drop=True)
    assert got.equals(want), "distributed rows differ from the single-process rows"
    errors = got[got.error.notna()]
    assert list(errors.path) == paths[-2:]
    assert errors.error.iloc[0].split(":")[0].endswith("FileNotFoundError")
    loads = client.run(lambda: __import__("libreyolo_c.dask").dask.loads)
    assert all(v == 1 for v in loads.values()), loads  # once per worker, not per task


def distinct_paths(images, tmp_path, count):
    """`count` paths, each its own file name (a link to one of the images): no two
    partitions have the same contents, so no two tasks share a key."""
    folder = tmp_path / "distinct"
    folder.mkdir()
    paths = []
    for i in range(count):
        link = folder / f"{i:04d}{os.path.splitext(images[i % len(images)])[1]}"
        link.symlink_to(images[i % len(images)])
        paths.append(str(link))
    return paths


def test_worker_killed_mid_run(cluster, detector_path, images, tmp_path):
    _, client = cluster
    paths = distinct_paths(images, tmp_path, 150)
    # A path's rows depend on its image only (the first test compares whole runs):
    # the expected rows are each image's rows under the path's own name.
    per_image = {image: lyd.rows_for_paths([image], detector_path, 1, **OPTIONS)
                 for image in images}
    want = pd.concat([per_image[os.path.realpath(p)].assign(path=p) for p in paths],
                     ignore_index=True)
    df = lyd.predict_paths(client, paths, model=detector_path, partition_size=5, **OPTIONS)
    future = client.compute(df)
    deadline = time.time() + 120
    while time.time() < deadline and not future.done():  # some partitions done, not all
        if client.run_on_scheduler(lambda dask_scheduler: sum(
                t.state == "memory" for t in dask_scheduler.tasks.values())) >= 4:
            break
        time.sleep(0.02)
    assert not future.done(), "the job finished before a worker could be killed"
    # SIGKILL from outside, as the OOM killer or a lost machine would: the worker
    # neither answers nor says goodbye; its nanny starts another.
    pids = client.run(os.getpid)
    victim = sorted(pids)[0]
    os.kill(pids[victim], signal.SIGKILL)
    got = future.result(timeout=240).reset_index(drop=True)
    assert len(got) == len(want)
    assert got.equals(want), "rows lost or duplicated after a worker died"
