# SPDX-License-Identifier: MIT
"""What predict accepts, as LibreYOLO's ImageLoader and the command read it.

A source is a path, a URL (http, https), a folder (its images and its
subfolders', in path order), a glob, a .txt file listing sources, a NumPy
image (HWC or CHW, gray, RGB, BGR or RGBA, any dtype as LibreYOLO normalises
it), a torch tensor (CHW or NCHW, RGB), a PIL image, bytes or a BytesIO, or a
list or tuple of these. Path-like sources are read by the C library as the
command reads them (ly_source_list_expand), and files, URLs and bytes decoded
by it (one loader for the command, C and Python).
"""
import ctypes
import io
import os
import warnings

import numpy as np

from . import _native as n
from ._images import is_url
from .errors import check


class Item:
    """One image to predict on: a file path, a URL, encoded bytes, or pixels
    (RGB or BGR HWC uint8, as `bgr` says)."""

    def __init__(self, kind, value, name, bgr=False):
        self.kind, self.value, self.name, self.bgr = kind, value, name, bgr


def _path_items(text):
    """Items of one path-like source (the library's ly_source_list_expand: a file,
    URL, folder, glob or .txt list), and whether it names one image."""
    if text.startswith(("s3://", "gs://")):
        raise NotImplementedError(f"{text}: S3 and Google Cloud Storage sources need their SDKs, "
                                  "which libreyolo-c does not use; download the image first")
    found = n.SourceList()
    check(n.ly_source_list_expand(os.fsencode(text), ctypes.byref(found)))
    try:
        paths = [os.fsdecode(found.paths[i]) for i in range(found.count)]
        skipped = found.skipped
    finally:
        n.ly_source_list_free(ctypes.byref(found))
    if skipped:
        warnings.warn(f"skipped {skipped} WebP, TIFF or GIF image{'s' if skipped > 1 else ''}: "
                      "this build reads JPEG, PNG and BMP", stacklevel=4)
    single = is_url(text) or (os.path.isfile(text) and not text.lower().endswith(".txt"))
    return [Item("url" if is_url(p) else "file", p, p) for p in paths], single


def is_video(source):
    """Whether predict reads `source` as video (the library's ly_video_is_source:
    LibreYOLO's video extensions, streams, cameras, image sequences)."""
    if isinstance(source, int) and not isinstance(source, bool):
        source = str(source)  # OpenCV's camera index
    if not isinstance(source, (str, os.PathLike)):
        return False
    yes = ctypes.c_bool()
    check(n.ly_video_is_source(os.fsencode(source), ctypes.byref(yes)))
    return yes.value


def _uint8(arr):
    """LibreYOLO's dtype rule: floats in [0, 1] scaled by 255, then clipped to
    [0, 255] and truncated to uint8."""
    if arr.dtype == np.uint8:
        return arr
    if arr.dtype.kind == "f" and arr.size and arr.max() <= 1.0:
        arr = arr * 255
    return np.clip(arr, 0, 255).astype(np.uint8)


def array_item(arr, color_format, name=None):
    """A NumPy image as LibreYOLO's _from_numpy reads it: gray (H, W) or
    (H, W, 1), HWC or CHW with 1, 3 or 4 channels (alpha dropped), a batch's
    first image; color_format 'bgr' swaps the colour channels."""
    if arr.ndim == 4:
        arr = arr[0]
    if arr.ndim == 3 and arr.shape[0] in (1, 3, 4) and arr.shape[0] < arr.shape[2]:
        arr = np.transpose(arr, (1, 2, 0))
    if arr.ndim == 3 and arr.shape[2] == 1:
        arr = arr[..., 0]
    if arr.ndim == 2:
        gray = _uint8(arr)
        return Item("pixels", np.repeat(gray[..., None], 3, axis=2), name)
    if arr.ndim != 3 or arr.shape[2] not in (3, 4):
        raise ValueError(f"an image array must be (H, W), (H, W, 1|3|4) or (1|3|4, H, W); got "
                         f"{arr.dtype} {arr.shape}")
    rgb = _uint8(arr[..., :3])
    if rgb.strides[2] != 1 or rgb.strides[1] != 3:
        rgb = np.ascontiguousarray(rgb)
    return Item("pixels", rgb, name, bgr=color_format == "bgr")


def expand(source, color_format):
    """(items, single): the images of `source` in order, and whether it named
    one image (predict then returns one Results, else a list)."""
    if isinstance(source, np.ndarray):
        return [array_item(source, color_format)], True
    if isinstance(source, (bytes, bytearray, memoryview)):
        return [Item("bytes", bytes(source), "inference")], True
    if isinstance(source, io.IOBase) or hasattr(source, "getvalue"):
        data = source.getvalue() if hasattr(source, "getvalue") else source.read()
        return [Item("bytes", bytes(data), "inference")], True
    if type(source).__module__.split(".")[0] == "torch" and hasattr(source, "detach"):
        # a tensor (CHW or NCHW) is RGB, as LibreYOLO's _from_tensor reads it
        return [array_item(source.detach().cpu().numpy(), "rgb")], True
    if type(source).__module__.startswith("PIL."):
        return [array_item(np.asarray(source.convert("RGB")), "rgb")], True
    if isinstance(source, (str, os.PathLike)):
        return _path_items(os.fsdecode(source))
    if isinstance(source, (list, tuple)):
        items = []
        for entry in source:
            items.extend(expand(entry, color_format)[0])
        return items, False
    raise TypeError(f"source must be a path, a URL, a folder, a glob, a .txt list, a NumPy "
                    f"image, a PIL image, bytes, a BytesIO or a list of these; not "
                    f"{type(source).__name__}")
