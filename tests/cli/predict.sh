#!/usr/bin/env bash
# `libreyolo predict`, `run` and `info` on the fixture checkpoint, as a user
# calls them. Usage: bash predict.sh <path-to-libreyolo> <scratch-dir>.
# Quiet on success; skips (exit 0) without the shared fixture.
set -euo pipefail

bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
scratch=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
testdata=$here/../../../shared/testdata
model=$testdata/yolo9/LibreYOLO9t_seed0.pt
photo=$testdata/images/parkour.jpg
ref=$testdata/yolo9/ref_parkour

if [ ! -f "$model" ] || [ ! -f "$photo" ]; then
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
    "$@" >"$scratch/stdout" 2>"$scratch/stderr" || got=$?
    [ "$got" -eq "$want" ] || fail "'$*' exited $got, expected $want"
}

stderr_has() {
    grep -qF -- "$1" "$scratch/stderr" || fail "stderr lacks '$1'"
}

# ---- info
run 0 "$bin" info --model "$model"
grep -q '^family *yolo9$' "$scratch/stdout" || fail "info: no family line"
grep -q '^size *t$' "$scratch/stdout" || fail "info: no size line"
grep -q '^tensors *1338$' "$scratch/stdout" || fail "info: tensors"
grep -q '^parameters *2036544$' "$scratch/stdout" || fail "info: parameters"
run 0 "$bin" info --model "$model" --json
grep -q '"nc":80' "$scratch/stdout" || fail "info --json: nc"
run 2 "$bin" info
run 4 "$bin" info --model "$scratch/missing.pt"
stderr_has "$scratch/missing.pt"

# ---- run: the raw outputs, one .npy each
run 0 "$bin" run --model "$model" --input "$ref/input.npy" --output-dir "$scratch/raw" --threads 2
for name in predictions raw_p3 raw_p4 raw_p5; do
    [ -s "$scratch/raw/$name.npy" ] || fail "run wrote no $name.npy"
    cmp -s -n 10 "$scratch/raw/$name.npy" "$ref/$name.npy" || fail "$name.npy: not a .npy file"
done
[ "$(stat -c %s "$scratch/raw/predictions.npy")" = "$(stat -c %s "$ref/predictions.npy")" ] ||
    fail "predictions.npy has another size than the reference"
run 2 "$bin" run --model "$model" --input "$ref/input.npy"
run 3 "$bin" run --model "$model" --input "$scratch/none.npy" --output-dir "$scratch/raw"
stderr_has "$scratch/none.npy"

# ---- predict: needs images (stb)
"$bin" predict --model "$model" --source "$photo" --json >"$scratch/stdout" 2>"$scratch/stderr" || true
if grep -qF "built without stb" "$scratch/stdout" "$scratch/stderr"; then
    echo "skipped predict: this build cannot read images (no stb)"
    exit 0
fi
run 0 "$bin" predict --model "$model" --source "$photo" --json --threads 2
[ "$(wc -l <"$scratch/stdout")" -eq 1 ] || fail "--json: expected one document"
if command -v python3 >/dev/null; then
    python3 - "$scratch/stdout" "$photo" "$model" <<'EOF' || fail "--json output is not what was expected"
import json, sys
doc = json.loads(open(sys.argv[1]).read())
assert list(doc) == ["source", "model", "model_family", "image_size", "device", "results", "schema_version"], list(doc)
assert doc["source"] == sys.argv[2] and doc["model"] == sys.argv[3], doc
assert doc["model_family"] == "yolo9" and doc["image_size"] == [640, 640] and doc["device"] == "cpu"
assert doc["schema_version"] == 1
(o,) = doc["results"]
assert o["path"] == sys.argv[2] and o["original_shape"] == [852, 1280], o["original_shape"]
assert set(o["speed"]) == {"preprocess", "inference", "postprocess"}
d = o["detections"]
assert len(d) == 300, len(d)
assert all(list(x) == ["class", "class_id", "confidence", "bbox_xyxy"] and len(x["bbox_xyxy"]) == 4 for x in d)
assert all(d[i]["confidence"] >= d[i + 1]["confidence"] for i in range(len(d) - 1))
assert all(0 <= x["bbox_xyxy"][0] < x["bbox_xyxy"][2] <= 1280 and 0 <= x["bbox_xyxy"][1] < x["bbox_xyxy"][3] <= 852 for x in d)
assert all(x["confidence"] > 0.25 for x in d)
EOF
else
    grep -q '"detections": \[{' "$scratch/stdout" || fail "--json: no detections"
fi

# Human output and the annotated images, for a directory of images; --save DIR.
mkdir -p "$scratch/images"
cp "$photo" "$scratch/images/b.jpg"
cp "$photo" "$scratch/images/a.JPG"
cp "$photo" "$scratch/images/b.jpeg"
echo "not an image" >"$scratch/images/notes.txt"
run 0 "$bin" predict --model "$model" --source "$scratch/images" --save "$scratch/out" --conf 0.3 --imgsz 320 \
    --max-det 5 --classes 27,0 --threads 2
[ "$(grep -c '^image [0-9]*/3 .*: 1280x852 ' "$scratch/stdout")" -eq 3 ] || fail "expected three image lines"
head -1 "$scratch/stdout" | grep -q "^image 1/3 a.JPG:" || fail "images are not in name order"
grep -qF "Results saved to $scratch/out" "$scratch/stdout" || fail "no Results saved to line"
# <stem>.jpg as LibreYOLO names them; b.jpg and b.jpeg share a stem and do not overwrite each other
for f in a.jpg b.jpg b_2.jpg; do
    [ -s "$scratch/out/$f" ] || fail "--save wrote no $f"
    [ "$(head -c 2 "$scratch/out/$f" | od -An -tx1 | tr -d ' ')" = ffd8 ] || fail "$f is not a JPEG"
done
[ "$(ls "$scratch/out" | wc -l)" -eq 3 ] || fail "--save wrote other files: $(ls "$scratch/out")"
# Nothing is saved by default; `save` numbers runs/detect/predict, predict2, ...
mkdir -p "$scratch/cwd"
(
    cd "$scratch/cwd"
    run 0 "$bin" predict --model "$model" --source "$scratch/images/a.JPG" --max-det 1 --imgsz 320
    [ ! -e runs ] || fail "predict saved images without --save"
    run 0 "$bin" predict --model "$model" --source "$scratch/images/a.JPG" --max-det 1 --imgsz 320 --save
    [ -s runs/detect/predict/a.jpg ] || fail "--save wrote no runs/detect/predict/a.jpg"
    run 0 "$bin" predict model="$model" source="$scratch/images/a.JPG" max_det=1 imgsz=320 save=True
    [ -s runs/detect/predict2/a.jpg ] || fail "save=True did not number runs/detect/predict2"
    run 0 "$bin" predict --model "$model" --source "$scratch/images/a.JPG" --max-det 1 --imgsz 320 --save --exist-ok
    [ ! -e runs/detect/predict3 ] || fail "--exist-ok numbered a new folder"
    run 0 "$bin" predict --model "$model" --source "$scratch/images/a.JPG" --max-det 1 --no-save --imgsz 320
    run 0 "$bin" predict --model "$model" --source "$scratch/images/a.JPG" --max-det 1 save=False --imgsz 320
    [ ! -e runs/detect/predict3 ] || fail "save=False saved"
)

# batch=N: images in one network call, the results as one by one, a file
# that cannot be read reported in its place; a model without a batch notes it
mkdir -p "$scratch/batch"
for f in a c d e; do cp "$testdata/images/dog.jpg" "$scratch/batch/$f.jpg"; done
cp "$photo" "$scratch/batch/d.jpg"
echo "not a JPEG" >"$scratch/batch/b.jpg"
run 3 "$bin" predict --model "$model" --source "$scratch/batch" --jsonl --conf 0.1 --imgsz 320
python3 - "$scratch/stdout" >"$scratch/one.json" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line); d.pop("speed", None); print(json.dumps(d))
PY
run 3 "$bin" predict model="$model" source="$scratch/batch" batch=3 --jsonl --conf 0.1 --imgsz 320
python3 - "$scratch/stdout" "$scratch/one.json" <<'PY' || fail "batch=3 differs from one by one"
import json, sys
got = [json.loads(l) for l in open(sys.argv[1])]
want = [json.loads(l) for l in open(sys.argv[2])]
assert len(got) == len(want) == 5, (len(got), len(want))
for g, w in zip(got, want):
    g.pop("speed", None)
    assert g.keys() == w.keys(), (g.keys(), w.keys())
    if "detections" not in w:
        assert g == w, (g, w)
        continue
    assert len(g["detections"]) == len(w["detections"])
    for a, b in zip(g["detections"], w["detections"]):
        assert a["class_id"] == b["class_id"] and abs(a["confidence"] - b["confidence"]) < 1e-5, (a, b)
PY
run 2 "$bin" predict --model "$model" --source "$scratch/images/a.JPG" --batch 300
stderr_has "expected an integer in 1..256"
run 2 "$bin" predict --model "$model" --source "$scratch/images/a.JPG" --batch 0

# ---- errors name the file, with LibreYOLO's exit codes (3 source, 4 model)
run 4 "$bin" predict --model "$scratch/missing.pt" --source "$photo"
stderr_has "$scratch/missing.pt"
run 3 "$bin" predict --model "$model" --source "$scratch/images/notes.txt"
stderr_has "$scratch/images/notes.txt"
printf '\xff\xd8\xff\xe0garbage' >"$scratch/broken.jpg"
run 3 "$bin" predict --model "$model" --source "$scratch/broken.jpg"
stderr_has "$scratch/broken.jpg"
run 3 "$bin" predict --model "$model" --source "$scratch/nowhere"
stderr_has "$scratch/nowhere"
run 2 "$bin" predict --model "$model" --source "$photo" --conf 2
run 2 "$bin" predict --model "$model" --source "$photo" --imgsz 100
run 2 "$bin" predict --model "$model" --source "$photo" --classes 1,,2
run 2 "$bin" predict --model "$model"
exit 0
