# SPDX-License-Identifier: MIT
"""libreyolo_c: LibreYOLO's Python API on the C library (no PyTorch).

    from libreyolo_c import LibreYOLO
    model = LibreYOLO("LibreYOLO9t.pt")          # or "nanodet", a .pte, ...
    r = model.predict("photo.jpg")[0]
    r.boxes.xyxy, r.boxes.conf, r.boxes.cls, r.names, r.orig_shape, r.speed

Batch inference on Dask: libreyolo_c.dask.predict_paths(client, paths, model=...).
"""
from ._native import LIBRARY_PATH
from .model import (Boxes, LibreYOLO, LibreYOLOError, LibreYOLOFileNotFoundError,
                    LibreYOLONotImplementedError, LibreYOLOValueError, Probs, RestoredImage,
                    Results)

__all__ = ["LibreYOLO", "Results", "Boxes", "Probs", "RestoredImage", "LibreYOLOError",
           "LibreYOLOFileNotFoundError", "LibreYOLOValueError", "LibreYOLONotImplementedError",
           "LIBRARY_PATH"]
