# SPDX-License-Identifier: MIT
"""LibreYOLO's result containers (libreyolo/utils/results.py at c41461e) on NumPy.

Where LibreYOLO hands out torch tensors these are NumPy arrays of the subclass
Array, which also answers the tensor calls user code makes on them
(.cpu(), .numpy(), .detach(), .to(...), .tolist(), .item()): so
`r.boxes.xyxy.cpu().numpy()` works unchanged. Field names, shapes, dtypes and
the summary()/to_json() rows are LibreYOLO's.
"""
import ctypes
import json

import numpy as np

from . import _images
from . import _native as n
from .errors import check


class Array(np.ndarray):
    """A NumPy array that also takes the torch.Tensor calls LibreYOLO code makes."""

    def cpu(self):
        return self

    def detach(self):
        return self

    def numpy(self):
        return np.asarray(self)

    def to(self, *args, **kwargs):
        device = kwargs.get("device", args[0] if args else "cpu")
        if isinstance(device, str) and device.split(":")[0] not in ("cpu", "auto"):
            raise NotImplementedError(f"to({device!r}): libreyolo-c runs on the CPU only")
        return self

    def cuda(self):
        raise NotImplementedError("cuda(): libreyolo-c runs on the CPU only")


def _array(values, dtype=None):
    return None if values is None else np.asarray(values, dtype=dtype).view(Array)


def _first_rows(data, idx):
    """data[idx] keeping the leading axis, as LibreYOLO's _slice_first."""
    if data is None:
        return None
    picked = data[idx]
    if isinstance(picked, np.ndarray):
        if picked.ndim == data.ndim - 1:
            picked = np.expand_dims(picked, axis=0)
    else:
        picked = np.asarray([picked])
    return picked.view(Array)


class Boxes:
    """Detections of one image: xyxy (N, 4) in original-image pixels, conf (N,),
    cls (N,) as float32, id (N,) when tracked; xywh, xyxyn, xywhn, data."""

    def __init__(self, boxes, conf, cls, id=None, orig_shape=None):
        self._boxes = _array(boxes, np.float32).reshape(-1, 4).view(Array)
        self._conf = _array(conf, np.float32).reshape(-1).view(Array)
        self._cls = _array(cls, np.float32).reshape(-1).view(Array)
        self._id = _array(id)
        self.orig_shape = orig_shape

    @property
    def xyxy(self):
        return self._boxes

    @property
    def conf(self):
        return self._conf

    @property
    def cls(self):
        return self._cls

    @property
    def id(self):
        return self._id

    @property
    def is_track(self):
        return self._id is not None

    @property
    def xywh(self):
        b = self._boxes
        x1, y1, x2, y2 = b[:, 0], b[:, 1], b[:, 2], b[:, 3]
        return np.stack([(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1], axis=1).view(Array)

    @property
    def xyxyn(self):
        return self._normalized(self.xyxy)

    @property
    def xywhn(self):
        return self._normalized(self.xywh)

    def _normalized(self, boxes):
        if self.orig_shape is None:
            raise ValueError("orig_shape is required for normalized box coordinates")
        h, w = self.orig_shape
        return (boxes / np.array([w, h, w, h], dtype=boxes.dtype)).view(Array)

    @property
    def data(self):
        parts = [self._boxes]
        if self._id is not None:
            parts.append(self._id.reshape(-1, 1))
        parts.extend([self._conf.reshape(-1, 1), self._cls.reshape(-1, 1)])
        return np.concatenate(parts, axis=1).view(Array)

    def cpu(self):
        return self

    def numpy(self):
        return self

    def to(self, *args, **kwargs):
        self._boxes.to(*args, **kwargs)
        return self

    def cuda(self):
        return self._boxes.cuda()

    def __getitem__(self, idx):
        return Boxes(_first_rows(self._boxes, idx), _first_rows(self._conf, idx),
                     _first_rows(self._cls, idx), _first_rows(self._id, idx), self.orig_shape)

    def __len__(self):
        return int(self._boxes.shape[0])

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __repr__(self):
        return (f"Boxes(n={len(self)}, xyxy={tuple(self._boxes.shape)}, "
                f"conf={tuple(self._conf.shape)}, cls={tuple(self._cls.shape)}, "
                f"is_track={self.is_track})")


class Probs:
    """A classifier's probabilities over its classes (data, (nc,) float32);
    top1 / top5 by LibreYOLO's argmax and argsort, and their confidences."""

    def __init__(self, data, orig_shape=None):
        self.data = _array(data, np.float32)
        self.orig_shape = orig_shape

    @property
    def top1(self):
        return int(np.argmax(np.asarray(self.data)))

    @property
    def top5(self):
        return np.argsort(np.asarray(self.data))[-5:][::-1].astype(int).tolist()

    @property
    def top1conf(self):
        return np.asarray(self.data[self.top1]).view(Array)

    @property
    def top5conf(self):
        return self.data[self.top5]

    def cpu(self):
        return self

    def numpy(self):
        return self

    def to(self, *args, **kwargs):
        self.data.to(*args, **kwargs)
        return self

    def __getitem__(self, idx):
        return Probs(_first_rows(self.data, idx), self.orig_shape)

    def __len__(self):
        return int(self.data.shape[0])

    def __repr__(self):
        return f"Probs(nc={len(self)}, top1={self.top1})"


class RestoredImage:
    """A restoration model's output image: RGB uint8 (H, W, 3) in `data`."""

    def __init__(self, data):
        self.data = data
        self.shape = data.shape[:2]

    def numpy(self):
        return self.data

    def save(self, path):
        """Write the image, JPEG or PNG by the extension (atomically)."""
        return _images.save_rgb(self.data, path)


class Results:
    """One image's results, as LibreYOLO's Results: boxes (detectors), probs
    (classifiers), names, orig_shape (h, w), path, speed (ms), len, indexing
    (a Results of the chosen boxes), summary() and to_json(); restored and
    restore_scale for restoration models (SwinIR)."""

    def __init__(self, boxes, orig_shape, path=None, names=None, masks=None, keypoints=None,
                 probs=None, obb=None, gaze=None, points=None, semantic_mask=None, speed=None,
                 track_id=None, frame_idx=None, *, restored=None, restore_scale=None):
        """LibreYOLO's signature; masks, keypoints, obb, gaze, points and
        semantic_mask belong to tasks this library does not run yet."""
        for slot, value in (("masks", masks), ("keypoints", keypoints), ("obb", obb),
                            ("gaze", gaze), ("points", points), ("semantic_mask", semantic_mask)):
            if value is not None:
                raise NotImplementedError(f"Results({slot}=...): the {slot} task is not available "
                                          "in libreyolo-c yet")
        if boxes is not None and track_id is not None:
            boxes = Boxes(boxes.xyxy, boxes.conf, boxes.cls, track_id, boxes.orig_shape)
        if boxes is not None and boxes.orig_shape is None:
            boxes = Boxes(boxes.xyxy, boxes.conf, boxes.cls, boxes.id, orig_shape)
        self.boxes = boxes
        self.probs = probs
        self.masks = self.keypoints = self.obb = self.gaze = self.points = None
        self.semantic_mask = None
        self.orig_shape = orig_shape
        self.path = path
        self.names = names or {}
        self.speed = speed or {}
        self.track_id = track_id if track_id is not None else (
            boxes.id if boxes is not None else None)
        self.frame_idx = frame_idx
        self.restored = restored
        self.restore_scale = restore_scale
        self.orig_img = None
        self.saved_path = None

    def _new(self, boxes, probs):
        r = Results(boxes, self.orig_shape, self.path, self.names, probs=probs,
                    speed=dict(self.speed), restored=self.restored,
                    restore_scale=self.restore_scale)
        r.orig_img = self.orig_img
        return r

    def cpu(self):
        return self

    def numpy(self):
        return self

    def to(self, *args, **kwargs):
        Array.to(np.empty(0).view(Array), *args, **kwargs)
        return self

    def cuda(self):
        raise NotImplementedError("cuda(): libreyolo-c runs on the CPU only")

    def __getitem__(self, idx):
        return self._new(self.boxes[idx] if self.boxes is not None else None,
                         self.probs[idx] if self.probs is not None else None)

    def __len__(self):
        if self.boxes is not None:
            return len(self.boxes)
        if self.probs is not None:
            return 1
        return 0

    def summary(self, normalize=False, decimals=5):
        """LibreYOLO's rows: name, class, confidence and box (x1, y1, x2, y2;
        normalized by the original size with normalize=True); a classifier's
        top 5 as name, class, confidence."""
        if self.boxes is None:
            if self.probs is None:
                return []
            data = np.asarray(self.probs.data)
            return [{"name": self.names.get(c, str(c)), "class": int(c),
                     "confidence": round(float(data[c]), decimals)} for c in self.probs.top5]
        rows = []
        xyxy = np.asarray(self.boxes.xyxyn if normalize else self.boxes.xyxy)
        ids = None if self.track_id is None else np.asarray(self.track_id)
        for i in range(len(self.boxes)):
            c = int(self.boxes.cls[i])
            row = {"name": self.names.get(c, str(c)), "class": c,
                   "confidence": round(float(self.boxes.conf[i]), decimals),
                   "box": {k: round(float(v), decimals)
                           for k, v in zip(("x1", "y1", "x2", "y2"), xyxy[i])}}
            if ids is not None:
                row["track_id"] = int(ids[i])
            rows.append(row)
        return rows

    def to_json(self, **kwargs):
        return json.dumps(self.summary(**kwargs))

    def _pixels(self):
        """A fresh RGB copy of the source image: orig_img when kept, else read
        again from path by the library's loader."""
        if self.orig_img is not None:
            return np.array(self.orig_img, dtype=np.uint8, order="C", copy=True)
        if not self.path:
            raise ValueError("plot(): this result keeps no image and has no path to read it from")
        return _images.load_rgb(self.path)

    def plot(self):
        """The image with this result drawn by the library as the command saves
        it (boxes with "name 0.87" labels, or a classifier's top 5), as an RGB
        HWC uint8 array; a restoration model's restored image."""
        if self.restored is not None:
            return np.array(self.restored.data, copy=True)
        rgb = self._pixels()
        img = _images.as_c_image(rgb)
        if self.probs is not None:
            top = self.probs.top5
            names = [self.names.get(c, "").encode() for c in top]
            rows = (n.ClassProb * max(1, len(top)))()
            for i, c in enumerate(top):
                rows[i].cls, rows[i].conf, rows[i].name = c, float(self.probs.data[c]), names[i]
            check(n.ly_image_annotate_classes(ctypes.byref(img), rows, len(top)))
        elif self.boxes is not None:
            count = len(self.boxes)
            ids = None if self.boxes.id is None else np.asarray(self.boxes.id, dtype=np.int64)
            xyxy, conf = np.asarray(self.boxes.xyxy), np.asarray(self.boxes.conf)
            cls = np.asarray(self.boxes.cls).astype(int)
            names = [self.names.get(int(c), "").encode() for c in cls]
            rows = (n.Detection * max(1, count))()
            for i in range(count):
                rows[i].xyxy[:] = [float(v) for v in xyxy[i]]
                rows[i].conf, rows[i].cls, rows[i].name = float(conf[i]), int(cls[i]), names[i]
            if ids is not None:  # tracked: a colour per id, "#<id> 0.87" (LibreYOLO's)
                c_ids = (ctypes.c_int64 * max(1, count))(*ids.tolist())
                check(n.ly_image_annotate_tracks(ctypes.byref(img), rows, c_ids, count))
            else:
                check(n.ly_image_annotate_detections(ctypes.byref(img), rows, count))
        return rgb

    def save(self, filename=None):
        """Write plot() to filename (JPEG or PNG by its extension, atomically;
        default results_<source name>.jpg) and return the path."""
        if filename is None:
            filename = f"results_{_images.stem(self.path or 'inference')}.jpg"
        return _images.save_rgb(self.plot(), filename)

    def __repr__(self):
        return f"Results(path='{self.path}', orig_shape={self.orig_shape}, boxes={self.boxes})"
