#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A NumPy transcription of LibreYOLO's Swin V1 classifier (../shared/specs/swin.md §1 and §3),
written from the spec alone, on a checkpoint it synthesises from LibreYOLO's key list.

usage: swin_numpy_ref.py KEYS.txt OUT_DIR [--size t] [--seed 0] [--no-forward]

Writes OUT_DIR/LibreSwin<size>-cls_synth.safetensors (every key of KEYS.txt by name, dtype and
shape; values drawn so activations stay of order one; metadata model_family, size, task, imgsz),
OUT_DIR/input.npy (float32 [1, 3, 224, 224]) and, unless --no-forward, OUT_DIR/logits.npy (float32
[1, classes]) computed in float64: the reference tests/test_swin.c holds libreyolo's network to
(within 1e-5 of max|ref|). Needs only numpy (and Python's math.erf for the exact GELU).
"""
import json
import math
import os
import struct
import sys

import numpy as np

WINDOW, SHIFT, PATCH, IMGSZ, EPS = 7, 3, 4, 224, 1e-5


def read_keys(path):
    keys = []
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            name, dtype, shape = line.split()
            keys.append((name, dtype, [int(s) for s in shape.split("x")] if shape != "" else []))
    return keys


def synthesise(keys, rng):
    state = {}
    for name, dtype, shape in keys:
        assert dtype == "float32", name
        if name.endswith("norm.weight") or name.endswith("norm1.weight") or name.endswith("norm2.weight"):
            v = 1.0 + 0.1 * rng.standard_normal(shape)
        elif name.endswith(".bias"):
            v = 0.02 * rng.standard_normal(shape)
        elif name.endswith("relative_position_bias_table"):
            v = 0.5 * rng.standard_normal(shape)  # large enough that the bias shows
        else:  # linear [out, in] and the patch conv [C, 3, 4, 4]
            fan_in = int(np.prod(shape[1:]))
            v = rng.standard_normal(shape) / math.sqrt(fan_in)
        state[name] = v.astype(np.float32)
    return state


def write_safetensors(path, state, metadata):
    header, offset = {"__metadata__": metadata}, 0
    for name, v in state.items():
        header[name] = {"dtype": "F32", "shape": list(v.shape), "data_offsets": [offset, offset + v.nbytes]}
        offset += v.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for v in state.values():
            f.write(np.ascontiguousarray(v).tobytes())


def layer_norm(x, w, b):
    m = x.mean(-1, keepdims=True)
    var = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(var + EPS) * w + b


_erf = np.frompyfunc(math.erf, 1, 1)


def gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)).astype(np.float64))


def relative_index(ws):
    n = ws * ws
    i = np.arange(n)
    yi, xi = i // ws, i % ws
    return (yi[:, None] - yi[None, :] + ws - 1) * (2 * ws - 1) + (xi[:, None] - xi[None, :] + ws - 1)


def shift_mask(side, ws, ss):
    def band(p):
        return 0 if p < side - ws else 1 if p < side - ss else 2

    labels = np.array([[3 * band(y) + band(x) for x in range(side)] for y in range(side)])
    windows = partition(labels[:, :, None], ws)[:, :, 0]  # [nW, N]
    return np.where(windows[:, :, None] != windows[:, None, :], -100.0, 0.0)


def partition(x, ws):  # [H, W, C] -> [nW, ws*ws, C], windows and tokens row-major
    h, w, c = x.shape
    return x.reshape(h // ws, ws, w // ws, ws, c).transpose(0, 2, 1, 3, 4).reshape(-1, ws * ws, c)


def reverse(x, h, w):
    ws = WINDOW
    c = x.shape[-1]
    return x.reshape(h // ws, w // ws, ws, ws, c).transpose(0, 2, 1, 3, 4).reshape(h, w, c)


def block(x, p, prefix, heads, shifted):
    h, w, c = x.shape
    d = c // heads
    g = lambda k: p[prefix + k]
    y = layer_norm(x, g("norm1.weight"), g("norm1.bias"))
    if shifted:
        y = np.roll(y, (-SHIFT, -SHIFT), axis=(0, 1))
    win = partition(y, WINDOW)  # [nW, N, C]
    n = WINDOW * WINDOW
    qkv = win @ g("attn.qkv.weight").T + g("attn.qkv.bias")  # [nW, N, 3C]: (q|k|v) x head x d
    qkv = qkv.reshape(-1, n, 3, heads, d).transpose(2, 0, 3, 1, 4)
    q, k, v = qkv[0] * (d ** -0.5), qkv[1], qkv[2]  # [nW, heads, N, d]
    s = q @ k.transpose(0, 1, 3, 2)
    table = g("attn.relative_position_bias_table")  # [169, heads]
    s = s + table[relative_index(WINDOW)].transpose(2, 0, 1)[None]
    if shifted:
        s = s + shift_mask(h, WINDOW, SHIFT)[:, None]
    s = np.exp(s - s.max(-1, keepdims=True))
    s = s / s.sum(-1, keepdims=True)
    o = (s @ v).transpose(0, 2, 1, 3).reshape(-1, n, c)
    o = o @ g("attn.proj.weight").T + g("attn.proj.bias")
    y = reverse(o, h, w)
    if shifted:
        y = np.roll(y, (SHIFT, SHIFT), axis=(0, 1))
    x = x + y
    m = layer_norm(x, g("norm2.weight"), g("norm2.bias"))
    m = gelu(m @ g("mlp.fc1.weight").T + g("mlp.fc1.bias"))
    return x + (m @ g("mlp.fc2.weight").T + g("mlp.fc2.bias"))


def forward(p, image, depths, heads):
    x = image[0].astype(np.float64)  # [3, 224, 224]
    wgt = p["patch_embed.proj.weight"]
    c = wgt.shape[0]
    side = IMGSZ // PATCH
    patches = x.reshape(3, side, PATCH, side, PATCH).transpose(1, 3, 0, 2, 4).reshape(side, side, -1)
    x = patches @ wgt.reshape(c, -1).T + p["patch_embed.proj.bias"]
    x = layer_norm(x, p["patch_embed.norm.weight"], p["patch_embed.norm.bias"])
    for s in range(4):
        if s > 0:
            pre = "layers.%d.downsample." % s
            x0, x1, x2, x3 = x[0::2, 0::2], x[1::2, 0::2], x[0::2, 1::2], x[1::2, 1::2]
            x = np.concatenate([x0, x1, x2, x3], -1)
            x = layer_norm(x, p[pre + "norm.weight"], p[pre + "norm.bias"])
            x = x @ p[pre + "reduction.weight"].T
        for j in range(depths[s]):
            x = block(x, p, "layers.%d.blocks.%d." % (s, j), heads[s], j % 2 == 1)
    x = layer_norm(x, p["norm.weight"], p["norm.bias"]).mean((0, 1))
    return (x @ p["head.fc.weight"].T + p["head.fc.bias"])[None]


SIZES = {"t": ([2, 2, 6, 2], [3, 6, 12, 24]), "s": ([2, 2, 18, 2], [3, 6, 12, 24]),
         "b": ([2, 2, 18, 2], [4, 8, 16, 32]), "l": ([2, 2, 18, 2], [6, 12, 24, 48])}


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    opts = dict(zip(argv[1:], argv[2:]))
    if len(args) < 2:
        sys.exit(__doc__)
    size = opts.get("--size", "t")
    rng = np.random.default_rng(int(opts.get("--seed", "0")))
    state = synthesise(read_keys(args[0]), rng)
    os.makedirs(args[1], exist_ok=True)
    meta = {"model_family": "swin", "size": size, "task": "classify", "imgsz": "224"}
    write_safetensors(os.path.join(args[1], "LibreSwin%s-cls_synth.safetensors" % size), state, meta)
    image = rng.standard_normal((1, 3, IMGSZ, IMGSZ)).astype(np.float32)
    np.save(os.path.join(args[1], "input.npy"), image)
    if "--no-forward" not in argv:
        p = {k: v.astype(np.float64) for k, v in state.items()}
        logits = forward(p, image, *SIZES[size])
        np.save(os.path.join(args[1], "logits.npy"), logits.astype(np.float32))


if __name__ == "__main__":
    main(sys.argv)
