#!/usr/bin/env python3
"""PyTorch peer for `libreyolo bench model`: LibreYOLO9t written from yolo9.md 1.1-1.2.

The module is independent of LibreYOLO (only torch is needed) and keeps BatchNorm
unfused in eval mode, as LibreYOLO runs it. Before timing it checks its output against
the fixture LibreYOLO produced (ref_parkour/), so a passing run also validates the
architecture description the C implementation follows.

    python3 torch_yolo9.py --model LibreYOLO9t_seed0.pt --threads 1 [--runs 20]
        [--warmup 3] [--input input.npy] [--reference ref_parkour/] [--no-check]

Prints one JSON object on stdout:
    {"runtime": "pytorch", "version", "threads", "runs", "median_ms", "p90_ms",
     "load_ms", "peak_rss_mib", "parity": {...} or null}
Exit status 0 on success, 1 on failure (parity failure included), 2 on usage error.
"""
import argparse
import json
import math
import os
import resource
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

BN_EPS = 1e-3
BN_MOMENTUM = 0.03
PARITY_REL = 1e-3


class Conv(nn.Module):
    """Conv2d (no bias, pad (k-1)//2) -> BatchNorm2d -> SiLU (or nothing)."""

    def __init__(self, c1, c2, k=1, s=1, groups=1, act=True):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, (k - 1) // 2, groups=groups, bias=False)
        self.bn = nn.BatchNorm2d(c2, eps=BN_EPS, momentum=BN_MOMENTUM)
        self.act = nn.SiLU() if act else nn.Identity()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class ELAN(nn.Module):
    def __init__(self, c1, c2, c3, c4):
        super().__init__()
        self.cv1 = Conv(c1, c2, 1)
        self.cv2 = Conv(c2 // 2, c3, 3)
        self.cv3 = Conv(c3, c3, 3)
        self.cv4 = Conv(c2 + 2 * c3, c4, 1)

    def forward(self, x):
        a, b = self.cv1(x).chunk(2, 1)
        y2 = self.cv2(b)
        y3 = self.cv3(y2)
        return self.cv4(torch.cat([a, b, y2, y3], 1))


class RepConvN(nn.Module):
    """SiLU(BN(conv3x3 x) + BN(conv1x1 x)); no identity branch."""

    def __init__(self, c1, c2):
        super().__init__()
        self.conv1 = Conv(c1, c2, 3, act=False)
        self.conv2 = Conv(c1, c2, 1, act=False)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.act(self.conv1(x) + self.conv2(x))


class RepNBottleneck(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.cv1 = RepConvN(c, c)
        self.cv2 = Conv(c, c, 3)

    def forward(self, x):
        return x + self.cv2(self.cv1(x))


class RepNCSP(nn.Module):
    def __init__(self, c1, c2, n):
        super().__init__()
        c_ = c2 // 2
        self.cv1 = Conv(c1, c_, 1)
        self.cv2 = Conv(c1, c_, 1)
        self.cv3 = Conv(2 * c_, c2, 1)
        self.m = nn.Sequential(*(RepNBottleneck(c_) for _ in range(n)))

    def forward(self, x):
        return self.cv3(torch.cat([self.m(self.cv1(x)), self.cv2(x)], 1))


class RepNCSPELAN(nn.Module):
    def __init__(self, c1, c2, c3, c4, n):
        super().__init__()
        self.cv1 = Conv(c1, c2, 1)
        self.cv2 = nn.Sequential(RepNCSP(c2 // 2, c3, n), Conv(c3, c3, 3))
        self.cv3 = nn.Sequential(RepNCSP(c3, c3, n), Conv(c3, c3, 3))
        self.cv4 = Conv(c2 + 2 * c3, c4, 1)

    def forward(self, x):
        a, b = self.cv1(x).chunk(2, 1)
        y2 = self.cv2(b)
        y3 = self.cv3(y2)
        return self.cv4(torch.cat([a, b, y2, y3], 1))


class AConv(nn.Module):
    def __init__(self, c1, c2):
        super().__init__()
        self.cv = Conv(c1, c2, 3, 2)

    def forward(self, x):
        return self.cv(F.avg_pool2d(x, 2, 1, 0, False, True))


class SPPELAN(nn.Module):
    def __init__(self, c1, c2, c3):
        super().__init__()
        self.cv1 = Conv(c1, c2, 1)
        self.cv5 = Conv(4 * c2, c3, 1)

    def forward(self, x):
        y = [self.cv1(x)]
        for _ in range(3):
            y.append(F.max_pool2d(y[-1], 5, 1, 2))
        return self.cv5(torch.cat(y, 1))


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv0 = Conv(3, 16, 3, 2)
        self.conv1 = Conv(16, 32, 3, 2)
        self.elan1 = ELAN(32, 32, 16, 32)
        self.down2 = AConv(32, 64)
        self.elan2 = RepNCSPELAN(64, 64, 32, 64, 3)
        self.down3 = AConv(64, 96)
        self.elan3 = RepNCSPELAN(96, 96, 48, 96, 3)
        self.down4 = AConv(96, 128)
        self.elan4 = RepNCSPELAN(128, 128, 64, 128, 3)
        self.spp = SPPELAN(128, 64, 128)

    def forward(self, x):
        x = self.elan1(self.conv1(self.conv0(x)))
        b3 = self.elan2(self.down2(x))
        b4 = self.elan3(self.down3(b3))
        b5 = self.spp(self.elan4(self.down4(b4)))
        return b3, b4, b5


class Neck(nn.Module):
    def __init__(self):
        super().__init__()
        self.elan_up1 = RepNCSPELAN(224, 96, 48, 96, 3)
        self.elan_up2 = RepNCSPELAN(160, 64, 32, 64, 3)
        self.down1 = AConv(64, 48)
        self.elan_down1 = RepNCSPELAN(144, 96, 48, 96, 3)
        self.down2 = AConv(96, 64)
        self.elan_down2 = RepNCSPELAN(192, 128, 64, 128, 3)

    def forward(self, b3, b4, b5):
        up = lambda t: F.interpolate(t, scale_factor=2.0, mode="nearest")
        n4 = self.elan_up1(torch.cat([up(b5), b4], 1))
        p3 = self.elan_up2(torch.cat([up(n4), b3], 1))
        p4 = self.elan_down1(torch.cat([self.down1(p3), n4], 1))
        p5 = self.elan_down2(torch.cat([self.down2(p4), b5], 1))
        return p3, p4, p5


class DDetect(nn.Module):
    def __init__(self, nc, ch=(64, 96, 128), reg_max=16, strides=(8, 16, 32)):
        super().__init__()
        self.nc, self.reg_max, self.strides = nc, reg_max, strides
        box_hidden = max(-(-ch[0] // 4) * 4, 4 * reg_max, reg_max)
        cls_hidden = max(ch[0], min(nc, 100))
        self.cv2 = nn.ModuleList(
            nn.Sequential(Conv(c, box_hidden, 3), Conv(box_hidden, box_hidden, 3, groups=4),
                          nn.Conv2d(box_hidden, 4 * reg_max, 1, groups=4))
            for c in ch)
        self.cv3 = nn.ModuleList(
            nn.Sequential(Conv(c, cls_hidden, 3), Conv(cls_hidden, cls_hidden, 3),
                          nn.Conv2d(cls_hidden, nc, 1))
            for c in ch)
        self.register_buffer("project", torch.arange(reg_max, dtype=torch.float32),
                             persistent=False)

    def forward(self, feats):
        raw = [torch.cat([self.cv2[i](f), self.cv3[i](f)], 1) for i, f in enumerate(feats)]
        b = raw[0].shape[0]
        anchors, strides = [], []
        for r, s in zip(raw, self.strides):
            h, w = r.shape[2:]
            ys, xs = torch.meshgrid(torch.arange(h, dtype=torch.float32) + 0.5,
                                    torch.arange(w, dtype=torch.float32) + 0.5, indexing="ij")
            anchors.append(torch.stack([xs, ys], 0).reshape(2, -1))
            strides.append(torch.full((1, h * w), float(s)))
        anchors = torch.cat(anchors, 1)
        strides = torch.cat(strides, 1)
        flat = torch.cat([r.reshape(b, r.shape[1], -1) for r in raw], 2)
        box, cls = flat.split([4 * self.reg_max, self.nc], 1)
        # side-major: channel = side * reg_max + bin
        dist = box.reshape(b, 4, self.reg_max, -1).softmax(2)
        dist = (dist * self.project.reshape(1, 1, -1, 1)).sum(2)
        lt, rb = dist[:, :2], dist[:, 2:]
        xyxy = torch.cat([anchors - lt, anchors + rb], 1) * strides
        return torch.cat([xyxy, cls.sigmoid()], 1), raw


class LibreYOLO9t(nn.Module):
    def __init__(self, nc=80):
        super().__init__()
        self.backbone = Backbone()
        self.neck = Neck()
        self.head = DDetect(nc)

    def forward(self, x):
        return self.head(self.neck(*self.backbone(x)))


def load_checkpoint(path):
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except TypeError:  # torch < 1.13 has no weights_only
        ckpt = torch.load(path, map_location="cpu")
    state = ckpt
    if isinstance(ckpt, dict):
        for key in ("model", "state_dict"):
            if key in ckpt and isinstance(ckpt[key], dict):
                state = ckpt[key]
                break
    fixed = {}
    for k, v in state.items():
        if k.startswith("module."):
            k = k[len("module."):]
        if k.startswith("detect."):
            k = "head." + k[len("detect."):]
        fixed[k] = v
    nc = fixed["head.cv3.0.2.weight"].shape[0]
    if fixed["backbone.conv0.conv.weight"].shape[0] != 16:
        raise ValueError("%s: only size t is implemented here (backbone.conv0 has %d channels, "
                         "expected 16)" % (path, fixed["backbone.conv0.conv.weight"].shape[0]))
    model = LibreYOLO9t(nc)
    model.load_state_dict(fixed, strict=True)
    return model.eval()


def compare(name, got, ref):
    got = got.detach().numpy().astype(np.float64)
    ref = ref.astype(np.float64)
    if got.shape != ref.shape:
        return {"tensor": name, "ok": False, "error": "shape %s, expected %s" % (got.shape, ref.shape)}
    diff = np.abs(got - ref)
    scale = float(np.abs(ref).max())
    max_abs = float(diff.max())
    rel = max_abs / scale if scale > 0 else max_abs
    # element-wise relative error on the elements that are not tiny compared with the tensor
    significant = np.abs(ref) >= 1e-3 * scale
    elem_rel = float((diff[significant] / np.abs(ref[significant])).max()) if significant.any() else 0.0
    return {"tensor": name, "ok": bool(rel <= PARITY_REL), "max_abs": max_abs, "rel": rel,
            "max_elem_rel": elem_rel}


def parity(model, reference_dir, x):
    out = {}
    with torch.no_grad():
        pred, raw = model(x)
    checks = [compare("predictions", pred, np.load(os.path.join(reference_dir, "predictions.npy")))]
    for i, name in enumerate(("raw_p3", "raw_p4", "raw_p5")):
        path = os.path.join(reference_dir, name + ".npy")
        if os.path.exists(path):
            checks.append(compare(name, raw[i], np.load(path)))
    out["checks"] = checks
    out["ok"] = all(c["ok"] for c in checks)
    out["criterion"] = "max|got-ref| / max|ref| <= %g" % PARITY_REL
    return out


def percentile(sorted_values, q):
    # nearest rank, as the C side computes it
    idx = max(0, min(len(sorted_values) - 1, math.ceil(q * len(sorted_values)) - 1))
    return sorted_values[idx]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--imgsz", type=int, default=640)
    ap.add_argument("--input", help=".npy [1,3,H,W] float32 (default: reference input.npy, "
                                    "else a fixed synthetic input)")
    ap.add_argument("--reference", help="folder with predictions.npy/raw_p*.npy/input.npy "
                                        "(default: ref_parkour/ next to the checkpoint)")
    ap.add_argument("--no-check", action="store_true", help="skip the parity check")
    args = ap.parse_args()
    if args.threads < 1 or args.runs < 1 or args.warmup < 0:
        ap.error("--threads and --runs must be >= 1, --warmup >= 0")

    torch.set_num_threads(args.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass

    t0 = time.perf_counter()
    model = load_checkpoint(args.model)
    load_ms = (time.perf_counter() - t0) * 1e3

    reference = args.reference
    if reference is None:
        guess = os.path.join(os.path.dirname(os.path.abspath(args.model)), "ref_parkour")
        reference = guess if os.path.isdir(guess) else None

    result = {"runtime": "pytorch", "version": torch.__version__, "threads": args.threads,
              "runs": args.runs, "warmup": args.warmup, "load_ms": load_ms, "parity": None}

    if reference and not args.no_check:
        ref_input = torch.from_numpy(np.load(os.path.join(reference, "input.npy")))
        result["parity"] = parity(model, reference, ref_input)

    if args.input:
        x = torch.from_numpy(np.load(args.input))
    elif reference:
        x = torch.from_numpy(np.load(os.path.join(reference, "input.npy")))
    else:
        g = torch.Generator().manual_seed(0)
        x = torch.rand(1, 3, args.imgsz, args.imgsz, generator=g)
    x = x.contiguous().float()

    times = []
    with torch.no_grad():
        for i in range(args.warmup + args.runs):
            t0 = time.perf_counter()
            model(x)
            t = (time.perf_counter() - t0) * 1e3
            if i >= args.warmup:
                times.append(t)
    times.sort()
    result["median_ms"] = percentile(times, 0.5)
    result["p90_ms"] = percentile(times, 0.9)
    result["min_ms"] = times[0]
    result["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps(result))
    if result["parity"] is not None and not result["parity"]["ok"]:
        print("torch_yolo9.py: parity with %s failed: %s" % (reference, result["parity"]),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
