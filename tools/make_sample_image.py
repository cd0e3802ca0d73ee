#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes python/libreyolo_c/assets/sample.png, the package's SAMPLE_IMAGE: a
640x480 picture drawn here (sky, ground, a sun, a house, a tree), so the
package ships a photo-sized image of its own licence (MIT) rather than a copy
of someone else's. Deterministic; standard library only (zlib PNG writer)."""
import os
import struct
import zlib

W, H = 640, 480


def pixel(x, y):
    if (x - 520) ** 2 + (y - 90) ** 2 < 45 ** 2:
        return (250, 210, 60)  # sun
    if 180 <= x < 380 and 250 <= y < 400:
        if 250 <= x < 300 and 320 <= y < 400:
            return (110, 70, 40)  # door
        if (200 <= x < 240 or 330 <= x < 370) and 280 <= y < 320:
            return (170, 210, 240)  # windows
        return (200, 80, 60)  # walls
    if 180 <= x < 380 and 250 - (x - 180 if x < 280 else 380 - x) <= y < 250:
        return (120, 50, 40)  # roof
    if 470 <= x < 490 and 300 <= y < 400:
        return (100, 65, 35)  # trunk
    if (x - 480) ** 2 + (y - 270) ** 2 < 55 ** 2:
        return (50, 140, 60)  # crown
    if y >= 380:
        return (70 + (x * 7 + y * 3) % 20, 150 + (x * 5 + y) % 25, 60)  # grass
    return (120 + y // 8, 170 + y // 10, 235)  # sky


def png(width, height):
    rows = b"".join(b"\0" + bytes(c for x in range(width) for c in pixel(x, y))
                    for y in range(height))

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 9))
            + chunk(b"IEND", b""))


if __name__ == "__main__":
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "libreyolo_c",
                       "assets", "sample.png")
    with open(out, "wb") as f:
        f.write(png(W, H))
    print(os.path.normpath(out))
