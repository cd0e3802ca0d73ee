# SPDX-License-Identifier: MIT
"""Images through the C library's one loader and writer: files, URLs and
encoded bytes decoded into RGB HWC uint8 arrays, arrays written as JPEG or PNG."""
import ctypes
import os

import numpy as np

from . import _native as n
from .errors import check

JPEG_QUALITY = 90  # the command's (`libreyolo predict save`): the same files from both


def is_url(text):
    return text.startswith(("http://", "https://"))


def stem(source_name):
    """A source's file stem as LibreYOLO names saved images ("inference" for
    none; a URL's path without its query)."""
    base = source_name.split("?")[0].split("#")[0] if "://" in source_name else source_name
    return os.path.splitext(os.path.basename(base))[0] or "inference"


def load_rgb(source):
    """A path, an http(s) URL or encoded bytes decoded by the library, as a new
    RGB (H, W, 3) uint8 array."""
    img = n.Image()
    if isinstance(source, bytes):
        check(n.ly_image_load_buffer(source, len(source), b"bytes", ctypes.byref(img)))
    elif is_url(source):
        check(n.ly_image_load_url(source.encode(), ctypes.byref(img)))
    else:
        check(n.ly_image_load(os.fsencode(source), ctypes.byref(img)))
    try:
        pixels = ctypes.cast(img.pixels, ctypes.POINTER(ctypes.c_uint8))
        return np.ctypeslib.as_array(pixels, shape=(img.height, img.width, 3)).copy()
    finally:
        n.ly_image_free(ctypes.byref(img))


def as_c_image(rgb):
    """The library's ly_image over a C-contiguous RGB (H, W, 3) uint8 array
    (borrowed: the array must outlive it)."""
    return n.Image(rgb.ctypes.data, rgb.shape[1], rgb.shape[0])


def save_rgb(rgb, path):
    """Write an RGB array, JPEG or PNG by the extension, atomically; the path."""
    rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
    check(n.ly_image_save(os.fsencode(path), ctypes.byref(as_c_image(rgb)), JPEG_QUALITY))
    return os.fspath(path)
