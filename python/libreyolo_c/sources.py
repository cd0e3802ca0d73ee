# SPDX-License-Identifier: MIT
"""What predict accepts, as LibreYOLO's ImageLoader and the command read it.

A source is a path, a URL (http, https), a folder (its images and its
subfolders', in path order), a glob, a .txt file listing sources, a NumPy
image (HWC or CHW, gray, RGB, BGR or RGBA, any dtype as LibreYOLO normalises
it), a torch tensor (CHW or NCHW, RGB), a PIL image, bytes or a BytesIO, or a
list or tuple of these. Files,
URLs and bytes are decoded by the C library (one loader for the command, C
and Python).
"""
import glob
import io
import os

import numpy as np

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp")
VIDEO_SUFFIXES = (".mp4", ".avi", ".mov", ".mkv", ".webm", ".m4v", ".wmv", ".flv", ".mpg",
                  ".mpeg", ".ts")


class Item:
    """One image to predict on: a file path, a URL, encoded bytes, or pixels
    (RGB or BGR HWC uint8, as `bgr` says)."""

    def __init__(self, kind, value, name, bgr=False):
        self.kind, self.value, self.name, self.bgr = kind, value, name, bgr


def _is_url(text):
    return text.startswith(("http://", "https://"))


def _folder_images(folder):
    found = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found.extend(os.path.join(root, f) for f in files
                     if not f.startswith(".") and f.lower().endswith(IMAGE_SUFFIXES))
    if not found:
        raise FileNotFoundError(f"{folder}: no .jpg, .jpeg, .png or .bmp images in it")
    return sorted(found)


def _path_items(text, listed=False):
    """Items of one path-like source, and whether it is one image."""
    if text.startswith(("s3://", "gs://")):
        raise NotImplementedError(f"{text}: S3 and Google Cloud Storage sources need their SDKs, "
                                  "which libreyolo-c does not use; download the image first")
    if _is_url(text):
        return [Item("url", text, text)], True
    if os.path.isdir(text):
        return [Item("file", p, p) for p in _folder_images(text)], False
    if os.path.isfile(text):
        if text.lower().endswith(VIDEO_SUFFIXES):
            raise NotImplementedError(f"{text}: video sources are not supported yet in "
                                      "libreyolo-c (images, folders, lists, URLs)")
        if text.lower().endswith(".txt") and not listed:
            items = []
            with open(text, encoding="utf-8") as f:
                for number, line in enumerate(f, 1):
                    entry = line.strip()
                    if not entry or entry.startswith("#"):
                        continue
                    if not _is_url(entry) and not os.path.exists(entry):
                        raise FileNotFoundError(f"{text} line {number}: Source not found: "
                                                f"{entry}")
                    items.extend(_path_items(entry, listed=True)[0])
            if not items:
                raise FileNotFoundError(f"{text}: lists no images")
            return items, False
        return [Item("file", text, text)], True
    if not listed and any(c in text for c in "*?["):
        matches = sorted(p for p in glob.glob(text, recursive=True)
                         if os.path.isfile(p) and p.lower().endswith(IMAGE_SUFFIXES))
        if not matches:
            raise FileNotFoundError(f"{text}: the pattern matches no .jpg, .jpeg, .png or .bmp "
                                    "images")
        return [Item("file", p, p) for p in matches], False
    raise FileNotFoundError(f"Source not found: {text}")


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
