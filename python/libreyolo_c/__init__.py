# SPDX-License-Identifier: MIT
"""libreyolo_c: LibreYOLO's Python API on the C library (no PyTorch).

    from libreyolo_c import LibreYOLO
    model = LibreYOLO("LibreYOLO9t.pt")          # or "nanodet", a .pte, ...
    r = model("photo.jpg")                       # one Results; a list for a list or a folder
    r.boxes.xyxy, r.boxes.conf, r.boxes.cls, r.names, r.orig_shape, r.speed
    r.summary(), r.to_json(), r.plot(), r.save("out.jpg")

Tracking: for r in model.track("clip.mp4"): r.track_id (ByteTrack, as LibreYOLO's).
Batch inference on Dask: libreyolo_c.dask.predict_paths(client, paths, model=...).
"""
import os as _os

from ._native import LIBRARY_PATH
from .errors import (LibreYOLOError, LibreYOLOFileNotFoundError, LibreYOLONotImplementedError,
                     LibreYOLOValueError)
from .model import LibreYOLO
from .results import Array, Boxes, Probs, RestoredImage, Results
from .tracking import ByteTracker, TrackConfig

# LibreYOLO's quickstart image: model(SAMPLE_IMAGE, save=True). A 640x480
# picture drawn by tools/make_sample_image.py (no third-party photo).
SAMPLE_IMAGE = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "assets", "sample.png")

__all__ = ["SAMPLE_IMAGE", "LibreYOLO", "Results", "Boxes", "Probs", "RestoredImage", "Array",
           "ByteTracker", "TrackConfig",
           "LibreYOLOError", "LibreYOLOFileNotFoundError", "LibreYOLOValueError",
           "LibreYOLONotImplementedError", "LIBRARY_PATH"]
