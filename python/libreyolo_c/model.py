# SPDX-License-Identifier: MIT
"""LibreYOLO's Python API (LibreYOLO(...).predict(...) -> Results) on libreyolo.so."""
import ctypes
import os
import threading

import numpy as np

from . import _native as n

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp")


class LibreYOLOError(RuntimeError):
    """A failure of the C library; the message is its ly_last_error()."""

    def __init__(self, message, status):
        super().__init__(message)
        self.status = status


class LibreYOLOFileNotFoundError(LibreYOLOError, FileNotFoundError):
    pass


class LibreYOLOValueError(LibreYOLOError, ValueError):
    pass


class LibreYOLONotImplementedError(LibreYOLOError, NotImplementedError):
    pass


_BY_STATUS = {
    n.LY_E_NOT_FOUND: LibreYOLOFileNotFoundError,
    n.LY_E_INVALID_ARGUMENT: LibreYOLOValueError,
    n.LY_E_SHAPE: LibreYOLOValueError,
    n.LY_E_DTYPE: LibreYOLOValueError,
    n.LY_E_FORMAT: LibreYOLOValueError,
    n.LY_E_UNSUPPORTED: LibreYOLONotImplementedError,
}


def _check(status):
    if status != n.LY_OK:
        # thread-local in the library, read on the thread that made the call
        message = (n.ly_last_error() or b"").decode("utf-8", "replace")
        raise _BY_STATUS.get(status, LibreYOLOError)(message, status)


_C_INT_MIN, _C_INT_MAX = -(2**31), 2**31 - 1


def _c_int(name, value):
    """An integer option as the C int it is passed as (ctypes would wrap one
    that does not fit without a word)."""
    v = int(value)
    if not _C_INT_MIN <= v <= _C_INT_MAX:
        raise LibreYOLOValueError(f"{name} {v}: does not fit a C int", n.LY_E_INVALID_ARGUMENT)
    return v


def _text(b):
    return b.decode("utf-8", "replace") if b else ""


class Boxes:
    """Detections as NumPy arrays: xyxy (N, 4) in original-image pixels, conf (N,), cls (N,)."""

    def __init__(self, xyxy, conf, cls):
        self.xyxy, self.conf, self.cls = xyxy, conf, cls

    @property
    def data(self):
        return np.concatenate([self.xyxy, self.conf[:, None], self.cls[:, None]], axis=1)

    def __len__(self):
        return len(self.conf)

    def __repr__(self):
        return f"Boxes({len(self)} detections)"


class Probs:
    """A classifier's probabilities: data (nc,), top1, top5, top1conf, top5conf."""

    def __init__(self, data, top):
        self.data = data
        self.top5 = [c for c, _ in top]
        self.top5conf = np.array([p for _, p in top], dtype=np.float32)
        self.top1 = self.top5[0] if top else None
        self.top1conf = float(self.top5conf[0]) if top else None


class RestoredImage:
    """A restoration model's output image, as LibreYOLO's RestoredImage: RGB
    uint8 (H, W, 3) in `data`."""

    def __init__(self, data):
        self.data = data
        self.shape = data.shape[:2]

    def numpy(self):
        return self.data

    def save(self, path):
        """Write the image, JPEG or PNG by the extension (atomically)."""
        img = n.Image(self.data.ctypes.data, self.data.shape[1], self.data.shape[0])
        _check(n.ly_image_save(os.fsencode(path), ctypes.byref(img), 95))
        return path


class Results:
    """One image's results, shaped as LibreYOLO's Results."""

    def __init__(self, boxes, probs, names, orig_shape, path, speed, restored=None,
                 restore_scale=None):
        self.boxes, self.probs, self.names = boxes, probs, names
        self.orig_shape, self.path, self.speed = orig_shape, path, speed
        self.restored, self.restore_scale = restored, restore_scale

    def __len__(self):
        return len(self.boxes) if self.boxes is not None else 0

    def __repr__(self):
        what = f"{len(self)} detections" if self.probs is None else f"top1 {self.probs.top1}"
        return f"Results({self.path or 'array'}: {what})"


def _sources(source):
    """Paths and arrays, in order: a path, a folder (its images, sorted), a list of either."""
    if isinstance(source, np.ndarray):
        return [source]
    if isinstance(source, (str, bytes, os.PathLike)):
        path = os.fsdecode(source)
        if os.path.isdir(path):
            return sorted(
                os.path.join(path, f)
                for f in os.listdir(path)
                if f.lower().endswith(IMAGE_SUFFIXES)
            )
        return [path]
    if isinstance(source, (list, tuple)):
        out = []
        for item in source:
            out.extend(_sources(item))
        return out
    raise TypeError(f"source must be a path, a folder, a NumPy HWC uint8 array or a list, "
                    f"not {type(source).__name__}")


class LibreYOLO:
    """A model loaded by the C library: a checkpoint (.pt, .safetensors), an
    ExecuTorch program (.pte), a TF.js graph (.json) or a name ("nanodet",
    "yolo9-t"). One model may be used by several threads at once."""

    def __init__(self, model="nanodet", threads=0):
        self.model_path = os.fspath(model)
        handle = ctypes.c_void_p()
        _check(n.ly_model_load(self.model_path.encode(), None, ctypes.byref(handle)))
        self._handle = handle
        self._lock = threading.Lock()
        info = n.ModelInfo()
        _check(n.ly_model_get_info(handle, ctypes.byref(info)))
        self.family, self.size, self.task = _text(info.family), _text(info.size), _text(info.task)
        self.nc, self.imgsz = int(info.nc), int(info.imgsz)
        self.names = {i: _text(info.names[i]) for i in range(self.nc)}
        self._info = {
            "family": self.family, "size": self.size, "task": self.task, "nc": self.nc,
            "imgsz": self.imgsz, "engine": _text(info.engine), "input": _text(info.input),
            "default_conf": float(info.default_conf), "default_iou": float(info.default_iou),
            "default_max_det": int(info.default_max_det),
            "quant": None if not info.quant_recipe else {
                "recipe": _text(info.quant_recipe), "state": _text(info.quant_state),
                "remainder": _text(info.quant_remainder) or None,
                "modules": int(info.quant_modules)},
        }

    def close(self):
        handle, self._handle = getattr(self, "_handle", None), None
        if handle:
            n.ly_model_free(handle)

    __del__ = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def info(self):
        return dict(self._info)

    def set_fused_attention(self, enabled=True):
        """LibreYOLO's set_fused_attention: the number of attention modules set."""
        count = ctypes.c_int(0)
        with self._lock:
            _check(n.ly_model_set_fused_attention(self._handle, bool(enabled), ctypes.byref(count)))
        return count.value

    def _options(self, conf, iou, max_det, classes, imgsz, tile=None, tile_pad=None):
        """The C options, each value the user gave marked as given: the library
        checks them (ly_predict_options_check), so they are refused as the C
        API and the command refuse them."""
        o = n.PredictOptions()
        _check(n.ly_predict_options_init(ctypes.byref(o)))
        if conf is not None:
            o.conf, o.given = float(conf), o.given | n.LY_PREDICT_CONF
        if iou is not None:
            o.iou, o.given = float(iou), o.given | n.LY_PREDICT_IOU
        if max_det is not None:
            o.max_det, o.given = _c_int("max_det", max_det), o.given | n.LY_PREDICT_MAX_DET
        if imgsz is not None:
            sizes = [imgsz] if np.isscalar(imgsz) else list(imgsz)
            if len(sizes) not in (1, 2) or len(set(sizes)) != 1:
                raise LibreYOLOValueError(f"imgsz {imgsz!r}: expected one size (predict's input "
                                          f"is square)", n.LY_E_INVALID_ARGUMENT)
            o.imgsz, o.given = _c_int("imgsz", sizes[0]), o.given | n.LY_PREDICT_IMGSZ
        if tile is not None:
            o.tile, o.given = _c_int("tile", tile), o.given | n.LY_PREDICT_TILE
        if tile_pad is not None:
            o.tile_pad, o.given = _c_int("tile_pad", tile_pad), o.given | n.LY_PREDICT_TILE_PAD
        keep = None
        if classes is not None:
            ids = [_c_int("classes", c) for c in (classes if np.iterable(classes) else [classes])]
            keep = (ctypes.c_int * max(1, len(ids)))(*ids)
            o.classes = ctypes.cast(keep, ctypes.POINTER(ctypes.c_int))
            o.n_classes = len(ids)
        _check(n.ly_predict_options_check(self._handle, ctypes.byref(o)))
        return o, keep

    def _results(self, handle, path):
        try:
            count = ctypes.c_size_t()
            _check(n.ly_results_count(handle, ctypes.byref(count)))
            h, w = ctypes.c_int(), ctypes.c_int()
            _check(n.ly_results_orig_shape(handle, ctypes.byref(h), ctypes.byref(w)))
            t = [ctypes.c_double() for _ in range(3)]
            _check(n.ly_results_speed(handle, *[ctypes.byref(x) for x in t]))
            speed = dict(zip(("preprocess", "inference", "postprocess"), (x.value for x in t)))
            task = ctypes.c_char_p()
            _check(n.ly_results_task(handle, ctypes.byref(task)))
            xyxy = np.zeros((count.value, 4), dtype=np.float32)
            conf = np.zeros(count.value, dtype=np.float32)
            cls = np.zeros(count.value, dtype=np.float32)
            d = n.Detection()
            for i in range(count.value):
                _check(n.ly_results_get(handle, i, ctypes.byref(d)))
                xyxy[i] = d.xyxy[:]
                conf[i], cls[i] = d.conf, d.cls
            probs = None
            if _text(task.value) == "classify":
                top = (n.ClassProb * 5)()
                got = ctypes.c_size_t()
                _check(n.ly_results_top(handle, 5, top, ctypes.byref(got)))
                vec, m = ctypes.POINTER(ctypes.c_float)(), ctypes.c_size_t()
                _check(n.ly_results_probs(handle, ctypes.byref(vec), ctypes.byref(m)))
                data = np.ctypeslib.as_array(vec, shape=(m.value,)).copy()
                probs = Probs(data, [(top[i].cls, top[i].conf) for i in range(got.value)])
            restored, scale = None, None
            if _text(task.value) == "restore":
                view, k = n.ImageView(), ctypes.c_int()
                _check(n.ly_results_restored(handle, ctypes.byref(view), ctypes.byref(k)))
                pixels = ctypes.cast(view.pixels, ctypes.POINTER(ctypes.c_uint8))
                data = np.ctypeslib.as_array(pixels, shape=(view.height, view.width, 3)).copy()
                restored, scale = RestoredImage(data), k.value
                return Results(None, None, self.names, (h.value, w.value), path, speed, restored,
                               scale)
            return Results(Boxes(xyxy, conf, cls), probs, self.names, (h.value, w.value), path,
                           speed)
        finally:
            n.ly_results_free(handle)

    def predict(self, source, conf=None, iou=None, max_det=None, classes=None, imgsz=None,
                bgr=False, tile=None, tile_pad=None, **unused):
        """Results for each image of `source`: a path, a folder, a NumPy HWC uint8
        array (RGB; bgr=True for OpenCV's order), or a list of these.

        conf, iou, max_det, imgsz and classes (None: the model's default) are
        checked by the library before any image is read, so bad values raise
        LibreYOLOValueError with the C API's and the command's message. classes
        filters after NMS and max_det, as LibreYOLO; classifiers ignore it.
        tile and tile_pad: a restoration model's tiling (SwinIR), whose results
        carry `restored` (RestoredImage) and `restore_scale`."""
        if self._handle is None:
            raise ValueError("the model is closed")
        options, keep = self._options(conf, iou, max_det, classes, imgsz, tile, tile_pad)
        out = []
        for item in _sources(source):
            handle = ctypes.c_void_p()
            if isinstance(item, np.ndarray):
                if item.ndim != 3 or item.shape[2] != 3 or item.dtype != np.uint8:
                    raise ValueError(f"an image array must be HWC uint8 with 3 channels, got "
                                     f"{item.dtype} {item.shape}")
                if item.strides[2] != 1 or item.strides[1] != 3:
                    item = np.ascontiguousarray(item)
                view = n.ImageView(item.ctypes.data, item.shape[1], item.shape[0],
                                   item.strides[0], 1 if bgr else 0)
                _check(n.ly_model_predict_image(self._handle, ctypes.byref(view),
                                                ctypes.byref(options), ctypes.byref(handle)))
                out.append(self._results(handle, None))
            else:
                if not os.path.exists(item):
                    raise FileNotFoundError(f"source {item!r} does not exist")
                _check(n.ly_model_predict_file(self._handle, item.encode(),
                                               ctypes.byref(options), ctypes.byref(handle)))
                out.append(self._results(handle, item))
        del keep
        return out

    __call__ = predict

    def export(self, format="executorch", imgsz=None, output_path=None, **unused):
        """LibreYOLO's export: the written program's path."""
        o = n.ExportOptions()
        _check(n.ly_export_options_init(ctypes.byref(o)))
        o.format = format.encode()
        o.model_path = self.model_path.encode()
        sizes = None
        if imgsz is not None:
            values = [int(imgsz)] if np.isscalar(imgsz) else [int(v) for v in imgsz]
            sizes = (ctypes.c_int64 * len(values))(*values)
            o.imgsz = ctypes.cast(sizes, ctypes.POINTER(ctypes.c_int64))
            o.imgsz_len = len(values)
        if output_path is not None:
            o.output_path = os.fsencode(output_path)
        written = ctypes.create_string_buffer(4096)
        _check(n.ly_model_export(self._handle, ctypes.byref(o), written, len(written)))
        return written.value.decode()
