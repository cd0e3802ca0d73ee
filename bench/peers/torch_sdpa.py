#!/usr/bin/env python3
"""PyTorch peer for the sdpa rows of `libreyolo bench kernels`: manual attention.

The formulation the target models run when they do not use fused SDPA (timm's
non-fused Attention, Swin's WindowAttention, HF CLIP/OWL-ViT):

    attn = (q * scale) @ k.transpose(-2, -1)
    attn = attn + bias          # Swin: relative position bias [1, H, N, N]
    attn = attn + mask          # Swin: shifted-window mask [B, 1, N, N] of 0 / -100
    attn = attn.softmax(dim=-1)
    out = attn @ v

    python3 torch_sdpa.py --threads 1 --runs 5 --warmup 1 \
        --case NAME:B:H:N:D:MASKS[:RUNS] [--case ...]

MASKS is "none" or "swin" (bias + shifted-window mask). RUNS overrides --runs for
one case (the OWLv2 shape takes seconds per run). Inputs are q ~ 1.5 N(0, 1),
k, v ~ N(0, 1), fp32, contiguous [B, H, N, D]. Prints one JSON object on stdout:
    {"runtime": "pytorch", "version", "threads", "cases": [{"name", "B", "H", "N",
     "D", "masks", "runs", "median_ms", "min_ms"}]}
Exit status 0 on success, 1 on failure, 2 on usage error.
"""
import argparse
import json
import math
import sys
import time

import torch


def parse_case(text):
    parts = text.split(":")
    if len(parts) not in (6, 7):
        raise argparse.ArgumentTypeError("expected NAME:B:H:N:D:MASKS[:RUNS], got %r" % text)
    name = parts[0]
    b, h, n, d = (int(p) for p in parts[1:5])
    masks = parts[5]
    if masks not in ("none", "swin"):
        raise argparse.ArgumentTypeError("MASKS must be none or swin, got %r" % masks)
    runs = int(parts[6]) if len(parts) == 7 else None
    return {"name": name, "B": b, "H": h, "N": n, "D": d, "masks": masks, "runs": runs}


def manual_attention(q, k, v, scale, bias, mask):
    attn = (q * scale) @ k.transpose(-2, -1)
    if bias is not None:
        attn = attn + bias
    if mask is not None:
        attn = attn + mask
    attn = attn.softmax(dim=-1)
    return attn @ v


def run_case(case, runs, warmup):
    g = torch.Generator().manual_seed(0)
    shape = (case["B"], case["H"], case["N"], case["D"])
    q = torch.randn(shape, generator=g) * 1.5
    k = torch.randn(shape, generator=g)
    v = torch.randn(shape, generator=g)
    scale = case["D"] ** -0.5
    bias = mask = None
    if case["masks"] == "swin":
        n = case["N"]
        bias = torch.randn((1, case["H"], n, n), generator=g) * 0.02
        mask = torch.where(torch.rand((case["B"], 1, n, n), generator=g) < 1.0 / 3.0,
                           torch.tensor(-100.0), torch.tensor(0.0))
    times = []
    with torch.no_grad():
        for i in range(warmup + runs):
            t0 = time.perf_counter()
            out = manual_attention(q, k, v, scale, bias, mask)
            t1 = time.perf_counter()
            if i >= warmup:
                times.append((t1 - t0) * 1e3)
            del out
    times.sort()
    # Median as nearest rank, the definition the C side uses.
    median = times[max(0, math.ceil(0.5 * len(times)) - 1)]
    return dict(case, runs=runs, median_ms=median, min_ms=times[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--case", type=parse_case, action="append", required=True)
    args = ap.parse_args()
    if args.threads < 1 or args.runs < 1 or args.warmup < 0:
        ap.error("--threads and --runs must be >= 1, --warmup >= 0")
    torch.set_num_threads(args.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    results = []
    for case in args.case:
        runs = case["runs"] or args.runs
        results.append(run_case(case, runs, args.warmup))
    json.dump({"runtime": "pytorch", "version": torch.__version__,
               "threads": torch.get_num_threads(), "cases": results}, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # one line on stderr for the caller's "failed: <why>"
        print("torch_sdpa.py: %s: %s" % (type(e).__name__, e), file=sys.stderr)
        sys.exit(1)
