#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Python's cost per image over the C API, and the scaling of threads and Dask
workers, measured in one run (no assertions: figures to read).

    PYTHONPATH=python python3 bench/python_overhead.py [MODEL] [IMAGE] [--dask]

C: `libreyolo bench model`'s end-to-end median (the library's own predict on
the file). Python: the median of LibreYOLO(MODEL).predict(IMAGE) over the same
number of runs. Threads: two Python threads on one model, LIBREYOLO_THREADS=1.
Dask: 2 workers x 1 thread against 1 worker x 1 thread, images/s.
"""
import os
import re
import statistics
import subprocess
import sys
import threading
import time

os.environ.setdefault("LIBREYOLO_THREADS", "1")
from libreyolo_c import LibreYOLO  # noqa: E402

def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    model_path = args[0] if args else "nanodet"
    image = args[1] if len(args) > 1 else "/usr/share/darknet/data/dog.jpg"
    RUNS = 30
    cli = os.environ.get("LIBREYOLO_CLI", "build/libreyolo")

    out = subprocess.run([cli, "bench", "model", "--model", model_path, "--image", image, "--runs",
                          str(RUNS), "--threads", "1", "--no-peers"], capture_output=True, text=True)
    m = re.search(r"end to end[^\n]*?median ([0-9.]+) ms", out.stdout)
    c_ms = float(m.group(1)) if m else float("nan")

    model = LibreYOLO(model_path)
    model.predict(image)
    times = []
    for _ in range(RUNS):
        t = time.perf_counter()
        model.predict(image)
        times.append((time.perf_counter() - t) * 1e3)
    py_ms = statistics.median(times)
    print(f"C API end to end      {c_ms:8.2f} ms/image (libreyolo bench model, median of {RUNS})")
    print(f"Python predict        {py_ms:8.2f} ms/image (median of {RUNS})")
    print(f"Python overhead       {100 * (py_ms / c_ms - 1):+8.1f} %")


    def rate(threads, n=24):
        def work():
            for _ in range(n):
                model.predict(image)
        ts = [threading.Thread(target=work) for _ in range(threads)]
        t = time.perf_counter()
        for x in ts:
            x.start()
        for x in ts:
            x.join()
        return threads * n / (time.perf_counter() - t)


    one, two = rate(1), rate(2)
    print(f"threads sharing a model: 1 -> {one:.1f} images/s, 2 -> {two:.1f} images/s ({two / one:.2f}x)")

    if "--dask" in sys.argv:
        from distributed import Client, LocalCluster

        from libreyolo_c.dask import predict_paths
        import tempfile
        tmp = tempfile.mkdtemp(prefix="ly_dask_bench")
        paths = []
        for i in range(200):  # distinct names: Dask would run identical partitions once
            paths.append(os.path.join(tmp, f"{i:03d}_" + os.path.basename(image)))
            os.symlink(os.path.abspath(image), paths[-1])
        rates = {}
        for workers in (1, 2):
            with LocalCluster(n_workers=workers, threads_per_worker=1, host="127.0.0.1",
                              dashboard_address=None, silence_logs=40,
                              env={"LIBREYOLO_THREADS": "1", "OMP_NUM_THREADS": "1"}) as c, Client(c) as client:
                predict_paths(client, paths[:8], model=model_path).compute()  # load the models
                t = time.perf_counter()
                predict_paths(client, paths, model=model_path, partition_size=10).compute()
                rates[workers] = len(paths) / (time.perf_counter() - t)
        print(f"dask: 1 worker x 1 thread {rates[1]:.1f} images/s, 2 workers x 1 thread "
              f"{rates[2]:.1f} images/s ({rates[2] / rates[1]:.2f}x)")


if __name__ == "__main__":
    main()
