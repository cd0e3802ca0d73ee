#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`libreyolo bench track`'s peer: LibreYOLO's own ByteTracker on the scene the
bench wrote (frames x detections x [x1, y1, x2, y2, conf, cls], float32).
Prints the mean milliseconds per update; writes the ids it reports per frame
(count, then the ids, padded) to OUT for the bench to compare.

usage: libreyolo_track.py SCENE.npy OUT.npy   (LibreYOLO importable: PYTHONPATH)
"""
import os
import sys
import time
import types

import numpy as np
import torch


def _import_libreyolo_tracking():
    """LibreYOLO's tracking and Results modules without its package __init__
    (which needs a newer PyTorch than Debian's for its compile settings)."""
    for entry in sys.path:
        root = os.path.join(entry or ".", "libreyolo")
        if os.path.isfile(os.path.join(root, "tracking", "tracker.py")):
            package = types.ModuleType("libreyolo")
            package.__path__ = [root]
            sys.modules["libreyolo"] = package
            break
    else:
        sys.exit("LibreYOLO is not on PYTHONPATH (a checkout's folder holding libreyolo/)")
    from libreyolo.tracking import ByteTracker
    from libreyolo.utils.results import Boxes, Results
    return ByteTracker, Boxes, Results


def main():
    ByteTracker, Boxes, Results = _import_libreyolo_tracking()
    scene = np.load(sys.argv[1])
    frames, d, _ = scene.shape
    tracker = ByteTracker()
    out = np.zeros((frames, 1 + d), dtype=np.int64)
    total = 0.0
    for f in range(frames):
        rows = torch.from_numpy(scene[f])
        r = Results(Boxes(rows[:, :4], rows[:, 4], rows[:, 5]), (720, 1280))
        t0 = time.perf_counter()
        tracked = tracker.update(r)
        total += time.perf_counter() - t0
        ids = np.asarray(tracked.track_id).astype(np.int64)
        out[f, 0] = len(ids)
        out[f, 1:1 + len(ids)] = ids
    np.save(sys.argv[2], out)
    print(f"{total * 1e3 / frames:.5f}")


if __name__ == "__main__":
    main()
