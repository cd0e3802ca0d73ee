#!/usr/bin/env bash
# Smoke test of `libreyolo bench`: every target answers, and a tiny run of each
# prints parsable JSON. Timings are never asserted.
set -euo pipefail
bin=$1
scratch=$2
mkdir -p "$scratch"
fixture=$(cd "$(dirname "$0")/../.." && pwd)/../shared/testdata/yolo9/LibreYOLO9t_seed0.pt

"$bin" bench --help >/dev/null
"$bin" bench kernels --help >/dev/null
"$bin" bench conv --help >/dev/null
"$bin" bench model --help >/dev/null
if "$bin" bench nosuchtarget >/dev/null 2>&1; then
    echo "bench accepted an unknown target" >&2
    exit 1
fi

"$bin" bench kernels --slot fake_quant_fp8 --size-mib 1 --repeat 1 --json >"$scratch/kernels.json"
if [ -f "$fixture" ]; then
    "$bin" bench model --model "$fixture" --imgsz 64 --runs 1 --warmup 0 --no-image --no-peers \
        --threads 1 --json >"$scratch/model.json"
    # interleaved rounds: each round's minimum and median, the least and the median of medians
    "$bin" bench model --model "$fixture" --imgsz 64 --runs 2 --warmup 0 --no-image --no-peers \
        --threads 1 --rounds 3 --json >"$scratch/rounds.json"
    grep -q '"rounds": {"n": 3, "libreyolo": {"min_ms": \[[0-9.e+-]*, [0-9.e+-]*, [0-9.e+-]*\]' \
        "$scratch/rounds.json" || {
        echo "bench model --rounds 3: no rounds in its JSON" >&2
        exit 1
    }
    # --vs: another model of ours timed beside M, in the table and in each round
    "$bin" bench model --model "$fixture" --vs "$fixture" --imgsz 64 --runs 2 --warmup 0 \
        --no-image --no-peers --threads 1 --rounds 2 --json >"$scratch/vs.json"
    grep -q '"vs_model": {"available": true, "ok": true' "$scratch/vs.json" &&
        grep -q '"vs_model": {"min_ms": \[[0-9.e+-]*, [0-9.e+-]*\]' "$scratch/vs.json" || {
        echo "bench model --vs: no vs_model row or rounds in its JSON" >&2
        exit 1
    }
    "$bin" bench model --model "$fixture" --vs "$scratch/no-such-model.pt" --imgsz 64 --runs 1 \
        --warmup 0 --no-image --no-peers --threads 1 >"$scratch/vs-missing.txt"
    grep -q -- '--vs  *failed: .*no-such-model.pt' "$scratch/vs-missing.txt" || {
        echo "bench model --vs with a missing model: no failed row naming it" >&2
        exit 1
    }
    if "$bin" bench model --model "$fixture" --rounds 0 >/dev/null 2>&1; then
        echo "bench model accepted --rounds 0" >&2
        exit 1
    fi
    # a .pte program: our graph path, and its delegates on XNNPACK's operators as a peer row
    if "$bin" export --model "$fixture" --format executorch --imgsz 64 \
        --output "$scratch/y64.pte" >/dev/null 2>&1; then
        if "$bin" bench model --model "$scratch/y64.pte" --runs 1 --warmup 0 --no-image \
            --threads 1 --json >"$scratch/pte.json" 2>"$scratch/pte.err"; then
            grep -q '"xnnpack_operators": {"available": true, "ok": true' "$scratch/pte.json" || {
                echo "bench model on a .pte: no XNNPACK operators row" >&2
                exit 1
            }
        elif grep -q 'XnnpackBackend' "$scratch/pte.err"; then
            rm -f "$scratch/pte.json" # a build without XNNPACK runs no program
        else
            cat "$scratch/pte.err" >&2
            exit 1
        fi
    fi
fi
if command -v python3 >/dev/null 2>&1; then
    for f in "$scratch"/*.json; do
        python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$f"
    done
fi
