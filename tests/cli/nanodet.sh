#!/usr/bin/env bash
# `libreyolo info`, `run` and `predict` on NanoDet-g, as a user calls them.
# The model: $LIBREYOLO_NANODET_DIR, else the cache (never fetched here).
# Usage: bash nanodet.sh <path-to-libreyolo> <scratch-dir>. Quiet on success;
# skips (exit 0) without the model or the shared fixture.
set -euo pipefail

bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
scratch=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
testdata=$here/../../../shared/testdata

model=${LIBREYOLO_NANODET_DIR:-}
if [ -z "$model" ]; then
    # `fetch --list` only looks at the cache.
    model=$("$bin" fetch --list --json 2>/dev/null |
        sed -n 's/.*"name":"nanodet","dir":"\([^"]*\)","cached":true.*/\1/p' || true)
fi
if [ -z "$model" ] || [ ! -f "$model/nanodet.json" ]; then
    echo "skipped: no NanoDet model (set LIBREYOLO_NANODET_DIR or run \`libreyolo fetch nanodet\`)"
    exit 0
fi
if [ ! -f "$testdata/nanodet/dog/input.npy" ] || [ ! -f "$testdata/images/dog.jpg" ]; then
    echo "skipped: the shared fixture ($testdata) is not here"
    exit 0
fi

rm -rf "$scratch"
mkdir -p "$scratch"

fail() {
    echo "FAIL: $*" >&2
    if [ -s "$scratch/stderr" ]; then sed 's/^/  stderr: /' "$scratch/stderr" >&2; fi
    exit 1
}

# run EXPECTED_EXIT CMD... : stdout in $scratch/stdout, stderr in $scratch/stderr.
run() {
    local want=$1 got=0
    shift
    "$@" >"$scratch/stdout" 2>"$scratch/stderr" </dev/null || got=$?
    [ "$got" -eq "$want" ] || fail "'$*' exited $got, expected $want"
}

stdout_has() {
    grep -qF -- "$1" "$scratch/stdout" || fail "stdout lacks '$1'"
}

stderr_has() {
    grep -qF -- "$1" "$scratch/stderr" || fail "stderr lacks '$1'"
}

# ---- info: the folder and the JSON inside it
for m in "$model" "$model/nanodet.json"; do
    run 0 "$bin" info --model "$m"
    grep -q '^family *nanodet$' "$scratch/stdout" || fail "info $m: family"
    grep -q '^size *g$' "$scratch/stdout" || fail "info $m: size"
    grep -q '^classes *80$' "$scratch/stdout" || fail "info $m: classes"
    grep -q '^imgsz *416$' "$scratch/stdout" || fail "info $m: imgsz"
    grep -q '^parameters *3786068$' "$scratch/stdout" || fail "info $m: parameters"
    stdout_has "BGR (x - mean) / std"
done
run 0 "$bin" info --model "$model" --json
stdout_has '"family":"nanodet"'
stdout_has '"input_shape":[1,3,416,416]'

# ---- run: the six outputs under their signature names
run 0 "$bin" run --model "$model" --input "$testdata/nanodet/dog/input.npy" --output-dir "$scratch/out"
stdout_has "Identity.npy [1, 2704, 80] f32"
stdout_has "Identity_1.npy [1, 676, 80] f32"
stdout_has "Identity_2.npy [1, 169, 80] f32"
stdout_has "Identity_3.npy [1, 2704, 44] f32"
stdout_has "Identity_4.npy [1, 676, 44] f32"
stdout_has "Identity_5.npy [1, 169, 44] f32"
for n in Identity Identity_1 Identity_2 Identity_3 Identity_4 Identity_5; do
    [ "$(head -c 6 "$scratch/out/$n.npy" | tail -c 5)" = "NUMPY" ] || fail "$n.npy is not a .npy file"
done
# a YOLO9-sized input is refused with the size NanoDet takes
if [ -f "$testdata/yolo9/ref_parkour/input.npy" ]; then
    run 1 "$bin" run --model "$model" --input "$testdata/yolo9/ref_parkour/input.npy" \
        --output-dir "$scratch/out"
    stderr_has "expected [1, 3, 416, 416]"
fi

# ---- predict: the dog, the bicycle and the car at the model's defaults
# (a build without image codecs says so and is done here)
got=0
"$bin" predict --model "$model" --source "$testdata/images/dog.jpg" --json \
    >"$scratch/stdout" 2>"$scratch/stderr" </dev/null || got=$?
if [ "$got" -ne 0 ] && grep -qF "built without" "$scratch/stdout" "$scratch/stderr"; then
    :
else
    [ "$got" -eq 0 ] || fail "predict exited $got"
    stdout_has '"class": "dog"'
    stdout_has '"class": "bicycle"'
    stdout_has '"class": "car"'
    run 0 "$bin" predict --model "$model" --source "$testdata/images/dog.jpg" --save "$scratch/pred"
    [ -n "$(ls "$scratch/pred")" ] || fail "predict --save wrote no image"
fi

# ---- errors name the file
run 4 "$bin" run --model "$scratch/missing.json" --input "$testdata/nanodet/dog/input.npy" \
    --output-dir "$scratch/out"
stderr_has "missing.json"
printf '{"format": "graph-model", "modelTopology": {"node": [{"name": "x", "op": "Placeholder"}, {"name": "y", "op": "Erf", "input": ["x"]}]}, "signature": {"inputs": {"x:0": {"tensorShape": {"dim": [{"size": "1"}, {"size": "3"}, {"size": "32"}, {"size": "32"}]}}}, "outputs": {"y:0": {"name": "y:0"}}}}' \
    >"$scratch/erf.json"
run 4 "$bin" info --model "$scratch/erf.json"
stderr_has "node 'y' (Erf): op 'Erf' is not supported"

# ---- bench model: parsable, the network's cost counted from its graph, no peers
run 0 "$bin" bench model --model "$model" --runs 1 --warmup 0 --no-image --threads 1 --json
stdout_has '"family": "nanodet"'
stdout_has '"gflop": 4.18'
stdout_has 'none for this model'
if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$scratch/stdout" ||
        fail "bench model --json is not JSON"
fi
