# SPDX-License-Identifier: MIT
"""LibreYOLO's Python API (LibreYOLO(...).predict(...) -> Results) on libreyolo.so."""
import ctypes
import difflib
import os
import threading
import warnings

import numpy as np

from . import _images
from . import _native as n
from . import sources
from .errors import LibreYOLOFileNotFoundError, LibreYOLONotImplementedError, LibreYOLOValueError
from .errors import check as _check
from .results import Boxes, Probs, RestoredImage, Results


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


_NOOP_KWARGS = {"agnostic_nms", "boxes", "dnn", "half", "line_width", "retina_masks", "show_conf",
                "show_labels", "stream_buffer", "verbose"}  # LibreYOLO's: warned, then ignored
_REJECTED_KWARGS = {"visualize", "embed"}  # LibreYOLO's: refused
_PREDICT_KEYWORDS = ("conf", "iou", "imgsz", "device", "classes", "max_det", "augment", "save",
                     "batch", "stream", "vid_stride", "show", "output_path", "color_format",
                     "tiling", "overlap_ratio", "output_file_format", "project", "name",
                     "exist_ok", "tile", "tile_pad", "bgr")


def _keywords(kwargs, known):
    """LibreYOLO's policy for keywords a call does not take: its no-ops warn,
    its refused ones raise NotImplementedError, anything else raises
    TypeError with the closest known name."""
    rejected = sorted(k for k in kwargs if k in _REJECTED_KWARGS)
    if rejected:
        raise LibreYOLONotImplementedError(
            f"LibreYOLO does not support these predict options: {', '.join(rejected)}.",
            n.LY_E_UNSUPPORTED)
    for key in sorted(kwargs):
        if key == "half":
            if kwargs[key]:
                warnings.warn("half=True: libreyolo-c runs float32 on the CPU (as LibreYOLO "
                              "does on a CPU); running in float32", stacklevel=3)
        elif key in _NOOP_KWARGS:
            warnings.warn(f"Predict option {key!r} is accepted for CLI compatibility but is "
                          "currently a no-op in LibreYOLO.", stacklevel=3)
    unknown = sorted(k for k in kwargs if k not in _NOOP_KWARGS)
    if unknown:
        hints = []
        for key in unknown:
            close = difflib.get_close_matches(key, list(known) + sorted(_NOOP_KWARGS), n=1)
            hints.append(f"{key} (did you mean {close[0]}?)" if close else key)
        raise TypeError(f"Unsupported predict option(s): {', '.join(hints)}. Supported options "
                        f"include {', '.join(known)}.")


def _check_device(device):
    if device is None:
        return
    if not isinstance(device, str) or device.lower().split(":")[0] not in ("cpu", "auto"):
        raise LibreYOLOValueError(
            f"device={device!r}: libreyolo-c runs whole models on the CPU; use device='cpu' "
            "(or 'auto')", n.LY_E_INVALID_ARGUMENT)


def _color_format(color_format, bgr):
    fmt = str(color_format).lower()
    if fmt not in ("auto", "rgb", "bgr"):
        raise LibreYOLOValueError(
            f"color_format must be 'auto', 'rgb', or 'bgr', got '{color_format}'",
            n.LY_E_INVALID_ARGUMENT)
    if bgr is not None:
        if fmt != "auto" and (fmt == "bgr") != bool(bgr):
            raise LibreYOLOValueError(f"bgr={bgr!r} contradicts color_format={color_format!r}",
                                      n.LY_E_INVALID_ARGUMENT)
        fmt = "bgr" if bgr else "rgb"
    return fmt


def _positive(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise LibreYOLOValueError(f"{name}={value!r}: expected an integer >= 1",
                                  n.LY_E_INVALID_ARGUMENT)


def _file_format(output_file_format):
    if output_file_format is None:
        return "jpg"
    fmt = str(output_file_format).lower().lstrip(".")
    if fmt not in ("jpg", "jpeg", "png", "webp"):
        raise LibreYOLOValueError(f"Invalid output_file_format: {fmt}. Must be one of: 'jpg', "
                                  "'png', 'webp'", n.LY_E_INVALID_ARGUMENT)
    if fmt == "webp":
        raise LibreYOLONotImplementedError("output_file_format='webp': libreyolo-c writes JPEG "
                                           "and PNG (jpg, png)", n.LY_E_UNSUPPORTED)
    return fmt


_LARGE_VIDEO_THRESHOLD = 500  # LibreYOLO's collect_video_results


def _collect_video(gen):
    """A video's Results as a list, warning as LibreYOLO does past 500 frames."""
    out = []
    for r in gen:
        out.append(r)
        if len(out) == _LARGE_VIDEO_THRESHOLD + 1:
            warnings.warn(f"Video has over {_LARGE_VIDEO_THRESHOLD} frames to process. Consider "
                          "using stream=True to avoid high memory usage.", stacklevel=3)
    return out


class _FileSaver:
    """A saver whose one path is given."""

    def __init__(self, path):
        self.file = os.fspath(path)

    def path(self, source_name):
        return self.file


class _Saver:
    """Where save=True writes, as LibreYOLO's resolve_save_path: output_path
    (a folder, or a file for one image), else one numbered folder per
    process and project/name (runs/<task>/predict, predict2, ... as the
    command numbers them, through ly_save_folder)."""

    _folders = {}
    _folders_lock = threading.Lock()  # threads sharing a model save into one folder

    def __init__(self, task, output_path, project, name, exist_ok, ext, count):
        self.ext, self.used, self.file = ext, set(), None
        if output_path is not None:
            path = os.fspath(output_path)
            if os.path.splitext(path)[1]:
                if count > 1:
                    raise LibreYOLOValueError(
                        f"output_path={path!r} names one file; give a folder for {count} images",
                        n.LY_E_INVALID_ARGUMENT)
                self.file = path
                path = os.path.dirname(path) or "."
            self.folder = self._make(path, None, True)
            return
        key = (os.getcwd(), project or f"runs/{task}", name or "predict")
        with self._folders_lock:
            folder = self._folders.get(key)
            if exist_ok or folder is None or not os.path.isdir(folder):
                folder = self._folders[key] = self._make(key[1], key[2], exist_ok)
        self.folder = folder

    @staticmethod
    def _make(project, name, exist_ok):
        out = ctypes.create_string_buffer(4096)
        _check(n.ly_save_folder(os.fsencode(project), None if name is None else os.fsencode(name),
                                bool(exist_ok), out, len(out)))
        return os.fsdecode(out.value)

    def path(self, source_name):
        if self.file:
            return self.file
        stem = _images.stem(source_name)
        name, k = f"{stem}.{self.ext}", 2
        while name in self.used:
            name, k = f"{stem}_{k}.{self.ext}", k + 1
        self.used.add(name)
        return os.path.join(self.folder, name)


# LibreYOLO's export parameters besides format, imgsz and output_path, at their defaults
_EXPORT_DEFAULTS = {
    "opset": None, "simplify": True, "dynamic": True, "half": False, "batch": 1, "device": None,
    "int8": False, "data": None, "fraction": 1.0, "allow_download_scripts": False,
    "workspace": 4.0, "min_batch": 1, "opt_batch": 1, "max_batch": 8,
    "hardware_compatibility": "none", "gpu_device": 0, "trt_config": None,
    "compute_units": "all", "nms": False, "iou": 0.45, "conf": 0.25, "verbose": False}


class LibreYOLO:
    """A model loaded by the C library: a checkpoint (.pt, .safetensors), an
    ExecuTorch program (.pte), a TF.js graph (.json) or a name ("nanodet",
    "yolo9-t"). One model may be used by several threads at once."""

    def __init__(self, model="nanodet", size=None, reg_max=16, nb_classes=None, device="auto",
                 task=None, compute_units="all", threads=0):
        """LibreYOLO's factory: size and nb_classes, when given, must be what the
        checkpoint holds (the library reads both from it); reg_max is YOLO9's 16;
        device 'cpu' or 'auto'; task, when given, the model's own."""
        _check_device(device)
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
        for given, have, what in ((size, self.size, "size"), (task, self.task, "task"),
                                  (nb_classes, self.nc, "nb_classes")):
            if given is not None and str(given) != str(have):
                self.close()
                raise LibreYOLOValueError(f"{self.model_path}: {what}={given!r}, but the model "
                                          f"is {what} {have!r}", n.LY_E_INVALID_ARGUMENT)
        if reg_max != 16:
            self.close()
            raise LibreYOLOValueError(f"reg_max={reg_max!r}: only 16 (LibreYOLO's default) is "
                                      "supported", n.LY_E_INVALID_ARGUMENT)
        self._info = {
            "family": self.family, "size": self.size, "task": self.task, "nc": self.nc,
            "imgsz": self.imgsz, "engine": _text(info.engine), "input": _text(info.input),
            "default_conf": float(info.default_conf), "default_iou": float(info.default_iou),
            "default_max_det": int(info.default_max_det), "batched": bool(info.batched),
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

    def _options(self, conf, iou, max_det, classes, imgsz, tile=None, tile_pad=None,
                 tiling=False, overlap_ratio=None):
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
            if len(sizes) not in (1, 2):
                raise LibreYOLOValueError(f"imgsz {imgsz!r}: expected a size or (height, width)",
                                          n.LY_E_INVALID_ARGUMENT)
            h, w = _c_int("imgsz", sizes[0]), _c_int("imgsz", sizes[-1])
            _check(n.ly_predict_options_set_imgsz(ctypes.byref(o), h, w))
        if tile is not None:
            o.tile, o.given = _c_int("tile", tile), o.given | n.LY_PREDICT_TILE
        if tile_pad is not None:
            o.tile_pad, o.given = _c_int("tile_pad", tile_pad), o.given | n.LY_PREDICT_TILE_PAD
        if tiling:
            o.tiling = True
            if overlap_ratio is not None:
                o.overlap_ratio = float(overlap_ratio)
                o.given |= n.LY_PREDICT_OVERLAP_RATIO
        keep = None
        if classes is not None:
            ids = [_c_int("classes", c) for c in (classes if np.iterable(classes) else [classes])]
            keep = (ctypes.c_int * max(1, len(ids)))(*ids)
            o.classes = ctypes.cast(keep, ctypes.POINTER(ctypes.c_int))
            o.n_classes = len(ids)
        _check(n.ly_predict_options_check(self._handle, ctypes.byref(o)))
        return o, keep

    def _results(self, handle, path, orig_img=None, tiled_save=None):
        """Results of a C handle (freed here). tiled_save: (folder, ext) where a
        prediction that tiled is saved in LibreYOLO's layout while the handle
        is alive (ly_results_save_tiled)."""
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
            task = _text(task.value)
            shape = (h.value, w.value)
            if task == "classify":
                vec, m = ctypes.POINTER(ctypes.c_float)(), ctypes.c_size_t()
                _check(n.ly_results_probs(handle, ctypes.byref(vec), ctypes.byref(m)))
                data = np.ctypeslib.as_array(vec, shape=(m.value,)).copy()
                r = Results(None, shape, path, self.names, probs=Probs(data, shape), speed=speed)
            elif task == "restore":
                view, k = n.ImageView(), ctypes.c_int()
                _check(n.ly_results_restored(handle, ctypes.byref(view), ctypes.byref(k)))
                pixels = ctypes.cast(view.pixels, ctypes.POINTER(ctypes.c_uint8))
                data = np.ctypeslib.as_array(pixels, shape=(view.height, view.width, 3)).copy()
                r = Results(None, shape, path, self.names, speed=speed,
                            restored=RestoredImage(data), restore_scale=k.value)
            else:
                xyxy = np.zeros((count.value, 4), dtype=np.float32)
                conf = np.zeros(count.value, dtype=np.float32)
                cls = np.zeros(count.value, dtype=np.float32)
                d = n.Detection()
                for i in range(count.value):
                    _check(n.ly_results_get(handle, i, ctypes.byref(d)))
                    xyxy[i] = d.xyxy[:]
                    conf[i], cls[i] = d.conf, d.cls
                r = Results(Boxes(xyxy, conf, cls), shape, path, self.names, speed=speed)
            tiles = ctypes.c_int()
            _check(n.ly_results_tiles(handle, ctypes.byref(tiles)))
            if tiles.value:  # LibreYOLO sets these only when it tiled
                r.tiled, r.num_tiles = True, tiles.value
                if tiled_save is not None:
                    self._save_tiled(handle, r, path, orig_img, *tiled_save)
            r.orig_img = orig_img
            return r
        finally:
            n.ly_results_free(handle)

    def _save_tiled(self, handle, r, path, orig_img, base, ext):
        """LibreYOLO's tiled save: base/<stem>_<family>_<size>_<timestamp>/ with
        tiles/, final_image, grid_visualization and metadata.json."""
        import datetime
        rgb = orig_img if orig_img is not None else _images.load_rgb(path)
        rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
        info = self.info()
        stem = _images.stem(path) if path else "inference"
        when = datetime.datetime.now().strftime("%Y%m%d_%H%M%S_%f")
        folder = os.path.join(base, f"{stem}_{info['family']}_{info['size']}_{when}")
        _check(n.ly_results_save_tiled(handle, ctypes.byref(_images.as_c_image(rgb)),
                                       self._handle, os.fsencode(path) if path else None,
                                       os.fsencode(folder), ext.encode()))
        r.saved_path = folder
        r.tiles_path = os.path.join(folder, "tiles")
        r.grid_path = os.path.join(folder, f"grid_visualization.{ext}")

    def _predict_chunk(self, chunk, options):
        """Results of several sources.Items in one network call
        (ly_model_predict_batch), each as _predict_item gives it."""
        pixels, paths, origs = [], [], []
        for item in chunk:
            if item.kind == "pixels":
                arr = item.value
                pixels.append((arr, item.bgr))
                paths.append(item.name)
                origs.append(arr[..., ::-1] if item.bgr else arr)
            else:
                rgb = _images.load_rgb(item.value)
                pixels.append((rgb, False))
                paths.append(item.value if item.kind == "file" else
                             item.name if item.kind == "url" else None)
                origs.append(None if item.kind == "file" else rgb)
        views = (n.ImageView * len(chunk))(*[
            n.ImageView(a.ctypes.data, a.shape[1], a.shape[0], a.strides[0], 1 if bgr else 0)
            for a, bgr in pixels])
        handles = (ctypes.c_void_p * len(chunk))()
        _check(n.ly_model_predict_batch(self._handle, views, len(chunk), ctypes.byref(options),
                                        handles))
        out = []
        try:
            for i in range(len(chunk)):
                h, handles[i] = ctypes.c_void_p(handles[i]), None
                out.append(self._results(h, paths[i], origs[i]))
        finally:
            for h in handles:
                if h:
                    n.ly_results_free(h)
        return out

    def _predict_item(self, item, options, tiled_save=None):
        """Results of one sources.Item; in-memory pixels are kept as orig_img
        (RGB) for plot()."""
        handle = ctypes.c_void_p()
        if item.kind == "file":
            _check(n.ly_model_predict_file(self._handle, os.fsencode(item.value),
                                           ctypes.byref(options), ctypes.byref(handle)))
            return self._results(handle, item.value, tiled_save=tiled_save)
        if item.kind == "pixels":
            arr = item.value
            view = n.ImageView(arr.ctypes.data, arr.shape[1], arr.shape[0], arr.strides[0],
                               1 if item.bgr else 0)
            _check(n.ly_model_predict_image(self._handle, ctypes.byref(view),
                                            ctypes.byref(options), ctypes.byref(handle)))
            return self._results(handle, item.name, arr[..., ::-1] if item.bgr else arr,
                                 tiled_save=tiled_save)
        rgb = _images.load_rgb(item.value)  # a URL's or encoded bytes
        view = n.ImageView(rgb.ctypes.data, rgb.shape[1], rgb.shape[0], rgb.strides[0], 0)
        _check(n.ly_model_predict_image(self._handle, ctypes.byref(view), ctypes.byref(options),
                                        ctypes.byref(handle)))
        return self._results(handle, item.name if item.kind == "url" else None, rgb,
                             tiled_save=tiled_save)

    def predict(self, source=None, *, conf=None, iou=None, imgsz=None, device=None, classes=None,
                max_det=None, augment=False, save=False, batch=1, stream=False, vid_stride=1,
                show=False, output_path=None, color_format="auto", tiling=False,
                overlap_ratio=0.2, output_file_format=None, project=None, name=None,
                exist_ok=False, tile=None, tile_pad=None, bgr=None, **kwargs):
        """LibreYOLO's predict: one Results for one image, a list for a list, a
        folder, a glob or a .txt list, a generator of Results with stream=True.

        source: a path, URL, folder (recursive), glob, .txt list, NumPy image
        (color_format 'rgb' or 'auto' reads it as RGB, 'bgr' as OpenCV's
        order), PIL image, bytes, BytesIO, or a list of these. conf, iou,
        max_det, imgsz and classes (None: the model's default) are checked by
        the library before any image is read, with the C API's and the
        command's words. save=True writes annotated images (a restoration
        model's restored ones) where the command would (runs/<task>/predict,
        predict2, ...; project, name, exist_ok, output_path,
        output_file_format). tile and tile_pad: a restoration model's tiling.
        A video source (file, stream, camera number, image sequence) gives one
        Results per frame (frame_idx set), lazily with stream=True; save=True
        writes <stem>.mp4. tiling=True cuts an image larger than imgsz into
        overlapping tiles (overlap_ratio) as LibreYOLO's _predict_tiled does
        (tiled and num_tiles set on such results). batch=N runs a list or folder
        N images per network call where the model's network takes a batch
        (info()["batched"]: YOLO9, the DETR families but RF-DETR, ViT), as LibreYOLO's batched
        predict; each result as alone. Keywords LibreYOLO warns
        about warn here; the ones it refuses and the ones this library cannot
        do (augment, show) raise; any other raises TypeError naming the
        closest known one."""
        _keywords(kwargs, _PREDICT_KEYWORDS)
        if self._handle is None:
            raise ValueError("the model is closed")
        if source is None:
            raise TypeError("predict() needs a source (an image path, folder, URL, array, ...)")
        _check_device(device)
        fmt = _color_format(color_format, bgr)
        _positive("batch", batch)
        if batch > 256:  # LY_PREDICT_MAX_BATCH, the command's bound too
            raise LibreYOLOValueError(f"batch={batch!r}: expected an integer in 1..256",
                                      n.LY_E_INVALID_ARGUMENT)
        _positive("vid_stride", vid_stride)
        ext = _file_format(output_file_format)
        if tiling and augment:
            raise LibreYOLOValueError("tiling and augment cannot be used together. Disable one "
                                      "of them.", n.LY_E_INVALID_ARGUMENT)
        for flag, why in ((augment, "augment=True (test-time augmentation)"),
                          (show, "show=True (a display window)")):
            if flag:
                raise LibreYOLONotImplementedError(f"{why} is not available in libreyolo-c",
                                                   n.LY_E_UNSUPPORTED)
        options, keep = self._options(conf, iou, max_det, classes, imgsz, tile, tile_pad,
                                      tiling, overlap_ratio)
        if tiling and sources.is_video(source):
            raise LibreYOLOValueError(f"tiling=True: tiled detection is for images; {source} is "
                                      "a video (LibreYOLO ignores tiling there)",
                                      n.LY_E_INVALID_ARGUMENT)
        if sources.is_video(source):
            if self.task == "restore":
                raise LibreYOLOValueError(f"{source}: a restoration model runs on "
                                          "images, not on video", n.LY_E_INVALID_ARGUMENT)
            video = str(source) if isinstance(source, int) else os.fspath(source)
            gen = self._predict_video(video, options, keep, vid_stride,
                                      _Saver(self.task, output_path, project, name, exist_ok,
                                             "mp4", 1) if save else None)
            if stream:
                return gen
            return _collect_video(gen)
        items, single = sources.expand(source, fmt)
        # a tiled prediction saves LibreYOLO's layout: under output_path, else
        # runs/tiled_detections
        tiled_save = (os.fspath(output_path) if output_path is not None else
                      os.path.join("runs", "tiled_detections"), ext) if save and tiling else None
        saver = _Saver(self.task, output_path, project, name, exist_ok, ext,
                       len(items)) if save else None

        # LibreYOLO's batch: chunks of `batch` images as one stacked forward
        # where the family has a batched network and tiling is off
        step = batch if batch > 1 and not tiling and self._info["batched"] else 1

        def run():
            held = keep  # the class ids' C array lives as long as the run
            for at in range(0, len(items), step):
                chunk = items[at:at + step]
                done = (self._predict_chunk(chunk, options) if step > 1 else
                        [self._predict_item(chunk[0], options, tiled_save)])
                for item, r in zip(chunk, done):
                    if saver and not getattr(r, "tiled", False):
                        r.saved_path = r.save(saver.path(item.name or "inference"))
                    yield r
            del held

        if stream:
            return run()
        out = list(run())
        return out[0] if single else out

    __call__ = predict

    def track(self, source, *, track_conf=0.25, iou=0.45, imgsz=None, classes=None, max_det=300,
              save=False, show=False, vid_stride=1, output_path=None, tracker_config=None,
              augment=False, **tracker_kwargs):
        """LibreYOLO's model.track: a generator of one Results per frame with
        track_id (and boxes.id) set. The detector runs at the tracker's
        track_low_thresh, as LibreYOLO's; track_conf changes nothing there
        either (a warning names track_high_thresh, which does). save=True
        writes runs/track/<stem>.mp4 (<stem>2.mp4, ... when it exists), or
        output_path, a colour per track and "#<id> 0.87" labels."""
        if augment:
            raise LibreYOLONotImplementedError("augment=True: test-time augmentation is not "
                                               "available for tracking", n.LY_E_UNSUPPORTED)
        if show:
            raise LibreYOLONotImplementedError("show=True (a display window) is not available in "
                                               "libreyolo-c", n.LY_E_UNSUPPORTED)
        if tracker_config is not None and tracker_kwargs:
            raise TypeError("give tracker_config or tracker keyword arguments "
                            f"({', '.join(sorted(tracker_kwargs))}), not both")
        task = self.task
        if task == "classify":
            raise NotImplementedError(
                "Tracking does not support classification models. Use predict().")
        if task != "detect":
            raise NotImplementedError(
                f"Tracking does not support {task} models. Use predict().")
        from .tracking import ByteTracker, TrackConfig
        config = tracker_config or TrackConfig.from_kwargs(**tracker_kwargs)
        if track_conf != 0.25:
            warnings.warn(f"track_conf={track_conf} changes nothing (as in LibreYOLO): the first "
                          f"association's threshold is track_high_thresh "
                          f"({config.track_high_thresh})", stacklevel=2)
        video = str(source) if isinstance(source, int) else os.fspath(source)
        if not sources.is_video(video) and not os.path.exists(video):
            raise LibreYOLOFileNotFoundError(f"Video file not found: {video}", n.LY_E_NOT_FOUND)
        options, keep = self._options(config.track_low_thresh, iou, max_det, classes, imgsz)
        tracker = ByteTracker(config=config)
        out = output_path
        if save and out is None:
            folder = _Saver._make("runs/track", None, True)
            stem = _images.stem(video) if "%" not in video else \
                os.path.basename(os.path.dirname(video)) or "sequence"
            out, k = os.path.join(folder, f"{stem}.mp4"), 2
            while os.path.exists(out):
                out, k = os.path.join(folder, f"{stem}{k}.mp4"), k + 1
        yield from self._predict_video(video, options, keep, vid_stride,
                                       _FileSaver(out) if (save or output_path) else None,
                                       tracker=tracker)

    def _predict_video(self, path, options, keep, vid_stride, saver, tracker=None):
        """Results per frame of a video source (file, stream, camera, image
        sequence), read by the library one frame at a time, as LibreYOLO's
        run_video_inference: frame_idx set, path the source, orig_img the
        frame (RGB); with a saver the annotated frames go to <stem>.mp4
        (MPEG-4 part 2, LibreYOLO's mp4v) at the source's rate / vid_stride."""
        vo = n.VideoOptions()
        _check(n.ly_video_options_init(ctypes.byref(vo)))
        vo.vid_stride = _c_int("vid_stride", vid_stride)
        reader = ctypes.c_void_p()
        _check(n.ly_video_open(os.fsencode(path), ctypes.byref(vo), ctypes.byref(reader)))
        writer, frame, ended = ctypes.c_void_p(), n.Image(), "failed"
        try:
            info = n.VideoInfo()
            _check(n.ly_video_get_info(reader, ctypes.byref(info)))
            if saver is not None:
                out = saver.path(path)
                _check(n.ly_video_writer_open(os.fsencode(out), info.width, info.height,
                                              info.fps / vid_stride, None, ctypes.byref(writer)))
            at, got = n.VideoFrame(), ctypes.c_bool()
            while True:
                _check(n.ly_video_read(reader, ctypes.byref(frame), ctypes.byref(at),
                                       ctypes.byref(got)))
                if not got.value:
                    break
                view = n.ImageView(frame.pixels, frame.width, frame.height, frame.width * 3, 0)
                handle = ctypes.c_void_p()
                _check(n.ly_model_predict_image(self._handle, ctypes.byref(view),
                                                ctypes.byref(options), ctypes.byref(handle)))
                pixels = ctypes.cast(frame.pixels, ctypes.POINTER(ctypes.c_uint8))
                rgb = np.ctypeslib.as_array(pixels, shape=(frame.height, frame.width, 3)).copy()
                r = self._results(handle, path, rgb)
                r.frame_idx = at.index
                if tracker is not None:
                    r = tracker.update(r)
                if writer:
                    drawn = np.ascontiguousarray(r.plot())
                    _check(n.ly_video_write(writer, ctypes.byref(_images.as_c_image(drawn))))
                    r.saved_path = out
                yield r
            ended = "done"
        except GeneratorExit:
            ended = "stopped"
            raise
        finally:
            del keep
            n.ly_video_close(reader)
            n.ly_image_free(ctypes.byref(frame))
            if writer:
                # a consumer that stops early keeps the frames done, as LibreYOLO's
                # writer.release() in its finally; an error leaves nothing
                if ended == "failed":
                    n.ly_video_writer_discard(writer)
                else:
                    _check(n.ly_video_writer_close(writer))

    def export(self, format="onnx", imgsz=None, output_path=None, msda=None, **kwargs):
        """LibreYOLO's export: the written program's path. format "executorch"
        is this library's (LibreYOLO's default "onnx" needs PyTorch and is
        refused with the formats this build writes). LibreYOLO's other
        parameters are taken at their defaults (device 'cpu'/'auto', batch 1,
        verbose anything); set otherwise (half, int8, opset, ...) they raise
        NotImplementedError, and an unknown one TypeError with the closest name.
        msda (ours): the DETR families' deformable attention as "portable"
        (the default: runs in a stock ExecuTorch) or "custom" (our operator)."""
        for key, value in kwargs.items():
            if key in _EXPORT_DEFAULTS:
                if key == "device":
                    _check_device(value)
                elif key != "verbose" and value != _EXPORT_DEFAULTS[key]:
                    raise LibreYOLONotImplementedError(
                        f"export {key}={value!r}: not available for {format} export in "
                        f"libreyolo-c (only {key}={_EXPORT_DEFAULTS[key]!r})", n.LY_E_UNSUPPORTED)
            else:
                close = difflib.get_close_matches(key, list(_EXPORT_DEFAULTS) +
                                                  ["format", "imgsz", "output_path", "msda"], n=1)
                raise TypeError(f"Unsupported export option: {key}" +
                                (f" (did you mean {close[0]}?)" if close else ""))
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
        if msda is not None:
            o.msda = str(msda).encode()
        written = ctypes.create_string_buffer(4096)
        _check(n.ly_model_export(self._handle, ctypes.byref(o), written, len(written)))
        return written.value.decode()
