#!/usr/bin/env python3
"""PyTorch peer for `libreyolo bench kernels` (slot ms_deform_attn).

Times the formulation every deformable DETR runs on a CPU (spec kernels.md 5.4:
per level F.grid_sample(value_l, 2*loc - 1, bilinear, zeros, align_corners=False),
levels concatenated, times the attention weights, summed over the points), forward
and backward (autograd), on the shapes the bench passes, at each thread count.

    python3 torch_msda.py --shape NAME:B,Lq,H,C:h0xw0,h1xw1:P0,P1 [--shape ...]
        [--threads 1,2] [--repeats 5] [--data DIR]

With --data, DIR holds NAME.value.npy, NAME.shapes.npy, NAME.loc.npy (ragged
layout [B, Lq, H, sum(P), 2]), NAME.attn.npy and NAME.out.npy (libreyolo's
output) for some shapes; the peer runs its forward on those inputs and reports
max |torch - libreyolo| and max |libreyolo| ("parity"), so the bench also checks
that both sides compute the same op.

Prints one JSON object on stdout:
    {"runtime": "pytorch", "version", "results": [{"shape", "threads",
     "forward_ms", "backward_ms"}], "parity": [{"shape", "max_abs_diff", "max_abs_out"}]}
backward_ms is the autograd backward alone (each timed backward follows an untimed forward).
Exit status 0 on success, 1 on failure, 2 on usage error.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F


def parse_shape(text):
    try:
        name, dims, levels, points = text.split(":")
        b, lq, h, c = (int(x) for x in dims.split(","))
        hw = [tuple(int(v) for v in lv.split("x")) for lv in levels.split(",")]
        pts = [int(p) for p in points.split(",")]
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"bad --shape '{text}': {e}")
    if len(pts) != len(hw):
        raise argparse.ArgumentTypeError(f"bad --shape '{text}': one point count per level")
    return {"name": name, "B": b, "Lq": lq, "H": h, "C": c, "levels": hw, "points": pts}


def msda(value, shapes, loc, attn, points):
    """value [B, S, H, C]; loc [B, Lq, H, K, 2]; attn [B, Lq, H, K] -> [B, Lq, H*C]."""
    B, _, H, C = value.shape
    Lq, K = loc.shape[1], loc.shape[3]
    values = value.split([h * w for h, w in shapes], dim=1)
    grids = (2 * loc - 1).split(points, dim=3)
    sampled = []
    for (h, w), v, g in zip(shapes, values, grids):
        v = v.flatten(2).transpose(1, 2).reshape(B * H, C, h, w)
        g = g.transpose(1, 2).flatten(0, 1)  # [B*H, Lq, P, 2]
        sampled.append(
            F.grid_sample(v, g, mode="bilinear", padding_mode="zeros", align_corners=False)
        )
    a = attn.transpose(1, 2).reshape(B * H, 1, Lq, K)
    out = (torch.cat(sampled, dim=-1) * a).sum(-1).view(B, H * C, Lq)
    return out.transpose(1, 2).contiguous()


def inputs(s, gen):
    K = sum(s["points"])
    S = sum(h * w for h, w in s["levels"])
    value = torch.randn(s["B"], S, s["H"], s["C"], generator=gen)
    loc = torch.rand(s["B"], s["Lq"], s["H"], K, 2, generator=gen) * 1.1 - 0.05
    attn = torch.randn(s["B"], s["Lq"], s["H"], K, generator=gen).softmax(-1)
    return value, loc, attn


def median_ms(fn, repeats):
    fn()  # warm-up
    samples = []
    for _ in range(repeats):
        inner, t0 = 0, time.perf_counter()
        while True:  # repeat a fast call inside one sample up to 10 ms
            fn()
            inner += 1
            elapsed = time.perf_counter() - t0
            if elapsed >= 0.01:
                break
        samples.append(elapsed / inner)
    samples.sort()
    return samples[len(samples) // 2] * 1e3


def backward_median_ms(forward, grad, leaves, repeats):
    """The autograd backward alone: each timed call follows an untimed forward."""

    def one():
        out = forward()
        t0 = time.perf_counter()
        out.backward(grad)
        elapsed = time.perf_counter() - t0
        for x in leaves:
            x.grad = None
        return elapsed

    one()  # warm-up
    samples = []
    for _ in range(repeats):
        total, inner = 0.0, 0
        while total < 0.01:
            total += one()
            inner += 1
        samples.append(total / inner)
    samples.sort()
    return samples[len(samples) // 2] * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", action="append", type=parse_shape, required=True)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--data")
    args = ap.parse_args()
    try:
        threads = [int(t) for t in args.threads.split(",")]
    except ValueError:
        ap.error("--threads: a comma-separated list of integers")
    torch.set_num_interop_threads(1)
    torch.set_grad_enabled(True)
    gen = torch.Generator().manual_seed(0)
    results, parity = [], []
    for s in args.shape:
        value, loc, attn = inputs(s, gen)
        shapes, points = s["levels"], s["points"]
        grad = torch.randn(s["B"], s["Lq"], s["H"] * s["C"], generator=gen)
        for t in threads:
            torch.set_num_threads(t)
            with torch.no_grad():
                fwd = median_ms(lambda: msda(value, shapes, loc, attn, points), args.repeats)
            v, l, a = (x.clone().requires_grad_(True) for x in (value, loc, attn))
            bwd = backward_median_ms(lambda: msda(v, shapes, l, a, points), grad, (v, l, a),
                                     args.repeats)
            results.append(
                {"shape": s["name"], "threads": t, "forward_ms": fwd, "backward_ms": bwd}
            )
        if args.data:
            base = os.path.join(args.data, s["name"])
            if os.path.exists(base + ".out.npy"):
                torch.set_num_threads(1)
                dv = torch.from_numpy(np.load(base + ".value.npy"))
                dl = torch.from_numpy(np.load(base + ".loc.npy"))
                da = torch.from_numpy(np.load(base + ".attn.npy"))
                dh = [tuple(int(x) for x in r) for r in np.load(base + ".shapes.npy")]
                ours = torch.from_numpy(np.load(base + ".out.npy"))
                with torch.no_grad():
                    theirs = msda(dv, dh, dl, da, points)
                parity.append(
                    {
                        "shape": s["name"],
                        "max_abs_diff": float((theirs - ours).abs().max()),
                        "max_abs_out": float(ours.abs().max()),
                    }
                )
    print(
        json.dumps(
            {
                "runtime": "pytorch",
                "version": torch.__version__,
                "results": results,
                "parity": parity,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
