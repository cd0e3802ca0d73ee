# SPDX-License-Identifier: MIT
"""LibreYOLO's tracking API (libreyolo.tracking) on the C library's ByteTrack:
TrackConfig (keyword-only, its defaults and checks), ByteTracker(config=None,
**kwargs) with update(results) -> Results of the tracked rows (track_id and
boxes.id set, in the tracker's order) and reset()."""
import ctypes
import dataclasses
import warnings

import numpy as np

from . import _native as n
from .errors import check
from .results import Boxes, Results


@dataclasses.dataclass(kw_only=True)
class TrackConfig:
    """LibreYOLO's TrackConfig: the same fields, defaults and ValueErrors (the
    library's ly_track_config_check says them)."""

    track_high_thresh: float = 0.25
    track_low_thresh: float = 0.1
    new_track_thresh: float = 0.25
    match_thresh: float = 0.8
    match_thresh_low: float = 0.5
    match_thresh_unconfirmed: float = 0.7
    track_buffer: int = 30
    frame_rate: int = 30
    fuse_score: bool = True
    minimum_consecutive_frames: int = 1

    def __post_init__(self):
        c = self._native()
        if n.ly_track_config_check(ctypes.byref(c)) != 0:
            raise ValueError((n.ly_last_error() or b"").decode("utf-8", "replace"))

    def _native(self):
        return n.TrackConfig(float(self.track_high_thresh), float(self.track_low_thresh),
                             float(self.new_track_thresh), float(self.match_thresh),
                             float(self.match_thresh_low), float(self.match_thresh_unconfirmed),
                             int(self.track_buffer), int(self.frame_rate), bool(self.fuse_score),
                             int(self.minimum_consecutive_frames))

    @classmethod
    def from_kwargs(cls, **kwargs):
        """Construct config, warning on unknown keys (LibreYOLO's words)."""
        valid = {f.name for f in dataclasses.fields(cls)}
        unknown = set(kwargs) - valid
        if unknown:
            warnings.warn(f"Unknown tracking config keys (ignored): {sorted(unknown)}",
                          stacklevel=2)
        return cls(**{k: v for k, v in kwargs.items() if k in valid})


class ByteTracker:
    """LibreYOLO's ByteTracker: one per stream, fed one frame's Results at a
    time; the ids it gives are LibreYOLO's, frame for frame."""

    def __init__(self, config=None, **kwargs):
        self.config = config or TrackConfig.from_kwargs(**kwargs)
        self._handle = ctypes.c_void_p()
        c = self.config._native()
        check(n.ly_tracker_create(ctypes.byref(c), ctypes.byref(self._handle)))

    def __del__(self):
        handle = getattr(self, "_handle", None)
        if handle:
            n.ly_tracker_free(handle)
            self._handle = None

    def reset(self):
        """Clear all tracks and reset the ID counter."""
        check(n.ly_tracker_reset(self._handle))

    def update(self, results):
        """One frame: the Results of its tracked detections, track_id set."""
        boxes = results.boxes
        count = 0 if boxes is None else len(boxes)
        d = (n.Detection * max(1, count))()
        if count:
            xyxy = np.asarray(boxes.xyxy, dtype=np.float32).reshape(-1, 4)
            conf = np.asarray(boxes.conf, dtype=np.float32).reshape(-1)
            cls = np.asarray(boxes.cls).reshape(-1)
            for i in range(count):
                d[i].xyxy[:] = [float(v) for v in xyxy[i]]
                d[i].conf, d[i].cls = float(conf[i]), int(cls[i])
        index = (ctypes.c_size_t * max(1, count))()
        ids = (ctypes.c_int64 * max(1, count))()
        got = ctypes.c_size_t()
        check(n.ly_tracker_update(self._handle, d, count, index, ids, ctypes.byref(got)))
        rows = np.array(index[:got.value], dtype=np.int64)
        track_id = np.array(ids[:got.value], dtype=np.int64)
        if boxes is None:
            picked = Boxes(np.zeros((0, 4), np.float32), np.zeros(0, np.float32),
                           np.zeros(0, np.float32))
        else:
            picked = boxes[rows]
        tracked = Results(Boxes(picked.xyxy, picked.conf, picked.cls, track_id,
                                results.orig_shape),
                          results.orig_shape, results.path, results.names,
                          speed=dict(results.speed), track_id=track_id,
                          frame_idx=results.frame_idx)
        tracked.orig_img = results.orig_img
        return tracked
