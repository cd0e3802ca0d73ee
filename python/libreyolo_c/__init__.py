# SPDX-License-Identifier: MIT
"""libreyolo_c: LibreYOLO's Python API on the C library (no PyTorch).

    from libreyolo_c import LibreYOLO
    model = LibreYOLO("LibreYOLO9t.pt")          # or "nanodet", a .pte, ...
    r = model("photo.jpg")                       # one Results; a list for a list or a folder
    r.boxes.xyxy, r.boxes.conf, r.boxes.cls, r.names, r.orig_shape, r.speed
    r.summary(), r.to_json(), r.plot(), r.save("out.jpg")

Batch inference on Dask: libreyolo_c.dask.predict_paths(client, paths, model=...).
"""
from ._native import LIBRARY_PATH
from .model import (LibreYOLO, LibreYOLOError, LibreYOLOFileNotFoundError,
                    LibreYOLONotImplementedError, LibreYOLOValueError)
from .results import Array, Boxes, Probs, RestoredImage, Results

__all__ = ["LibreYOLO", "Results", "Boxes", "Probs", "RestoredImage", "Array", "LibreYOLOError",
           "LibreYOLOFileNotFoundError", "LibreYOLOValueError", "LibreYOLONotImplementedError",
           "LIBRARY_PATH"]
