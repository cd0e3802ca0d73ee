#!/usr/bin/env bash
# The command as a LibreYOLO user types it: both argument styles, the task
# word, save folders, the JSON and error documents field by field, model names
# and every exit code. Usage: bash libreyolo_style.sh <path-to-libreyolo> <scratch-dir>.
# Quiet on success; the parts that need the shared fixture skip without it.
set -euo pipefail

bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
scratch=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
testdata=$here/../../../shared/testdata
model=$testdata/yolo9/LibreYOLO9t_seed0.pt
photo=$testdata/images/parkour.jpg

rm -rf "$scratch"
mkdir -p "$scratch"
cd "$scratch"
printf "not decoded before the model loads" >x.jpg

fail() {
    echo "FAIL: $*" >&2
    if [ -s "$scratch/stderr" ]; then sed 's/^/  stderr: /' "$scratch/stderr" >&2; fi
    if [ -s "$scratch/stdout" ]; then head -c 2000 "$scratch/stdout" | sed 's/^/  stdout: /' >&2; fi
    exit 1
}
run() {
    local want=$1 got=0
    shift
    "$@" >"$scratch/stdout" 2>"$scratch/stderr" || got=$?
    [ "$got" -eq "$want" ] || fail "'$*' exited $got, expected $want"
}
stderr_has() { grep -qF -- "$1" "$scratch/stderr" || fail "stderr lacks '$1'"; }
stdout_has() { grep -qF -- "$1" "$scratch/stdout" || fail "stdout lacks '$1'"; }
# error_doc CODE: stdout is exactly LibreYOLO's error document with that code
error_doc() {
    if ! command -v python3 >/dev/null; then stdout_has "\"error\": \"$1\""; return; fi
    python3 - "$scratch/stdout" "$1" <<'EOF' || fail "not the error document for $1"
import json, sys
doc = json.loads(open(sys.argv[1]).read())
assert list(doc) == ["schema_version", "error", "message", "suggestion"], list(doc)
assert doc["schema_version"] == 1 and doc["error"] == sys.argv[2], doc
assert isinstance(doc["message"], str) and doc["message"]
assert doc["suggestion"] is None or isinstance(doc["suggestion"], str)
EOF
}

# ---- no model needed: version, usage errors, did you mean
run 0 "$bin" version
grep -qE '^libreyolo [0-9]+\.[0-9]+\.[0-9]+' "$scratch/stdout" || fail "version"
run 0 "$bin" version --json
stdout_has '"schema_version": 1'
run 2 "$bin" predct
stderr_has "unknown command 'predct'; did you mean 'predict'?"
run 2 "$bin" predict --source x.jpg --cnf 0.3
stderr_has "unexpected argument '--cnf'; did you mean '--conf'?"
run 2 "$bin" predict source=x.jpg cnf=0.3 --json
error_doc config_unknown_key
run 2 "$bin" predict --model m.pt
stderr_has "missing source="
run 2 "$bin" predict source=x.jpg conf=2 --json
error_doc config_range_error
run 3 "$bin" predict source=x.jpg --half
stderr_has "warning: --half: predict runs FP32"
run 2 "$bin" predict source=x.jpg --int8
stderr_has "--int8: predict runs FP32"
run 2 "$bin" predict source=x.jpg json=maybe
stderr_has "json=maybe: expected json=true or json=false"
run 2 "$bin" predict source=x.jpg --save --no-save
run 1 "$bin" predict source=x.jpg --device 0 --json
error_doc device_not_available
run 3 "$bin" predict source="$scratch/nowhere.jpg" --json
error_doc source_not_found
run 4 "$bin" predict model=yolo9-t source=x.jpg
stderr_has "LibreYOLO9t.pt"
stderr_has "https://huggingface.co/LibreYOLO/LibreYOLO9t/resolve/main/LibreYOLO9t.pt"
run 4 "$bin" predict model=yolo9z source=x.jpg --json
error_doc model_not_found
grep -qF "yolo9-t, yolo9-s, yolo9-m, yolo9-c" "$scratch/stdout" || fail "unknown names do not list the known ones"
run 2 "$bin" predict --classes 1,,2 --source x.jpg

if [ ! -f "$model" ] || [ ! -f "$photo" ]; then
    echo "skipped the model parts: the shared fixture ($testdata) is not here"
    exit 0
fi
"$bin" predict model="$model" source="$photo" max_det=1 >"$scratch/stdout" 2>"$scratch/stderr" || true
if grep -qF "built without stb" "$scratch/stdout" "$scratch/stderr"; then
    echo "skipped predict: this build cannot read images (no stb)"
    exit 0
fi

# ---- both styles give the same document; classes filters the top max_det (LibreYOLO's order:
# NMS, max_det, then classes), so of this photo's top 3 (stop sign, tie, kite) two stay
run 0 "$bin" predict model="$model" source="$photo" conf=0.5 max_det=3 classes=[11,27] imgsz=320 device=cpu --json
cp "$scratch/stdout" "$scratch/a.json"
run 0 "$bin" detect predict --model "$model" --source "$photo" --conf 0.5 --max_det 3 --classes '[11, 27]' \
    --imgsz=320 --device auto json=true
cp "$scratch/stdout" "$scratch/b.json"
run 0 "$bin" predict model="$model" source="$photo" conf=0.5 max_det=3 imgsz=320 --json
cp "$scratch/stdout" "$scratch/all.json"
if command -v python3 >/dev/null; then
    python3 - "$scratch/a.json" "$scratch/b.json" "$scratch/all.json" <<'EOF' || fail "the two styles differ"
import json, sys
a, b, everything = (json.loads(open(p).read()) for p in sys.argv[1:])
for d in (a, b, everything):
    for r in d["results"]:
        r.pop("speed")
assert a == b, (a, b)
assert a["image_size"] == [320, 320]
dets, top = a["results"][0]["detections"], everything["results"][0]["detections"]
assert dets == [d for d in top if d["class_id"] in (11, 27)], (dets, top)
assert 1 <= len(dets) < len(top) <= 3 and all(d["confidence"] > 0.5 for d in dets), dets
EOF
fi
# classify is not this model's task: a usage error
run 2 "$bin" classify predict model="$model" source="$photo"
stderr_has "the model's task is detect, not classify"

# ---- --jsonl: one result object per line; errors as documents too
mkdir -p imgs && cp "$photo" imgs/a.jpg && printf '\xff\xd8\xff\xe0garbage' >imgs/b.jpg
run 3 "$bin" predict model="$model" source=imgs max_det=1 imgsz=320 --jsonl
[ "$(wc -l <"$scratch/stdout")" -eq 2 ] || fail "--jsonl: expected two lines"
head -1 "$scratch/stdout" | grep -qF '"path": "imgs/a.jpg", "original_shape": [852, 1280]' || fail "--jsonl: first line"
tail -1 "$scratch/stdout" | grep -qF '"path": "imgs/b.jpg", "error": "data_invalid"' || fail "--jsonl: second line"

# ---- save folders: runs/detect/predict, predict2, --project/--name, --exist-ok
run 0 "$bin" predict model="$model" source="$photo" max_det=1 imgsz=320 save
stdout_has "Results saved to runs/detect/predict"
run 0 "$bin" predict model="$model" source="$photo" max_det=1 imgsz=320 save=True --json
stdout_has '"output_path": "runs/detect/predict2"'
run 0 "$bin" predict model="$model" source="$photo" max_det=1 imgsz=320 save project=out name=exp
run 0 "$bin" predict model="$model" source="$photo" max_det=1 imgsz=320 save project=out name=exp
run 0 "$bin" predict model="$model" source="$photo" max_det=1 imgsz=320 save project=out name=exp exist_ok=True
for f in runs/detect/predict/parkour.jpg runs/detect/predict2/parkour.jpg out/exp/parkour.jpg out/exp2/parkour.jpg; do
    [ -s "$f" ] || fail "no $f"
done
[ ! -e out/exp3 ] || fail "exist_ok numbered a new folder"
# --save=false and --save false are the boolean, not folders named false
for off in --save=false "--save false" --save=0 "--save False"; do
    # shellcheck disable=SC2086
    run 0 "$bin" predict model="$model" source="$photo" max_det=1 imgsz=320 $off
done
[ ! -e false ] && [ ! -e 0 ] && [ ! -e False ] && [ ! -e runs/detect/predict3 ] ||
    fail "--save false wrote something"
run 0 "$bin" predict model="$model" source="$photo" max_det=1 imgsz=320 --save true --json
stdout_has '"output_path": "runs/detect/predict3"'

# ---- imgsz as LibreYOLO writes it: S, H,W, [H,W], HxW (a rectangle refused with the reason)
for size in "imgsz=[320,320]" "imgsz=320,320" "imgsz=320x320"; do
    run 0 "$bin" predict model="$model" source="$photo" max_det=1 "$size" --json
    stdout_has '"image_size": [320, 320]'
done
run 2 "$bin" predict model="$model" source="$photo" imgsz=480x640 --json
error_doc config_range_error
stdout_has "imgsz 480x640: predict takes a square input"

# ---- a mistyped model name: the closest known one suggested (by the library's message)
run 4 "$bin" predict model=nanodett source="$photo"
stderr_has "'nanodett' is no file here, and no model name this build knows; did you mean 'nanodet'?"

# ---- model names: yolo9-t and LibreYOLO9t from weights/
mkdir -p weights && ln -s "$model" weights/LibreYOLO9t.pt
run 0 "$bin" info model=yolo9-t
grep -q '^family *yolo9$' "$scratch/stdout" || fail "info model=yolo9-t"
run 0 "$bin" predict model=LibreYOLO9t source="$photo" max_det=1 imgsz=320 --quiet

# ---- sources: a quoted glob, a .txt list, WebP refused, an http URL from a local server
mkdir -p g && cp "$photo" g/p1.jpg && cp "$photo" g/p2.jpg && : >g/x.webp
run 0 "$bin" predict model=LibreYOLO9t source='g/*.jpg' max_det=1 imgsz=320
[ "$(grep -c '^image [0-9]*/[0-9]* .*: 1280x852 ' "$scratch/stdout")" -eq 2 ] || fail "a glob: expected two images"
printf 'g/p2.jpg\n# a comment\n\ng/p1.jpg\n' >list.txt
run 0 "$bin" predict model=LibreYOLO9t source=list.txt max_det=1 imgsz=320
[ "$(grep -c '^image [0-9]*/[0-9]* .*: 1280x852 ' "$scratch/stdout")" -eq 2 ] || fail "a .txt list: expected two images"
head -1 "$scratch/stdout" | grep -q '^image 1/2 p2.jpg:' || fail "a .txt list is not read in its order"
mkdir -p g/sub && cp "$photo" g/sub/p3.jpg
run 0 "$bin" predict model=LibreYOLO9t source=g max_det=1 imgsz=320 save name=nested
stderr_has "skipped 1 WebP, TIFF or GIF image"
[ "$(grep -c '^image [0-9]*/[0-9]* .*: 1280x852 ' "$scratch/stdout")" -eq 3 ] || fail "a folder: expected its subfolder's image too"
[ -s runs/detect/nested/p3.jpg ] || fail "the subfolder's image was not saved"
printf 'g/p1.jpg\ng/missing.jpg\n' >bad.txt
run 3 "$bin" predict model=LibreYOLO9t source=bad.txt
stderr_has "bad.txt line 2: Source not found: g/missing.jpg"
run 0 "$bin" predict model=LibreYOLO9t source=g/p1.jpg max_det=1 imgsz=320 save=yes name=yes_is_true
[ -s runs/detect/yes_is_true/p1.jpg ] || fail "save=yes is a boolean"
run 3 "$bin" predict model=LibreYOLO9t source=g/x.webp
stderr_has "not supported in this build"
if command -v python3 >/dev/null; then
    port=$((20000 + RANDOM % 20000))
    (cd g && exec python3 -m http.server "$port" --bind 127.0.0.1 >/dev/null 2>&1) &
    server=$!
    trap 'kill $server 2>/dev/null || true' EXIT
    for _ in $(seq 50); do
        python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', $port), 0.2)" 2>/dev/null && break
        sleep 0.1
    done
    got=0
    "$bin" predict model=LibreYOLO9t source="http://127.0.0.1:$port/p1.jpg?v=1" max_det=1 imgsz=320 \
        save name=url >"$scratch/stdout" 2>"$scratch/stderr" || got=$?
    if grep -qF "built without libcurl" "$scratch/stdout" "$scratch/stderr"; then
        echo "skipped the URL source: this build has no libcurl"
    else
        [ "$got" -eq 0 ] || fail "predict on a URL exited $got"
        [ -s runs/detect/url/p1.jpg ] || fail "a URL's image is saved as <stem>.jpg"
        run 3 "$bin" predict model=LibreYOLO9t source="http://127.0.0.1:$port/none.jpg" --json
        stdout_has '"error": "data_invalid"'
    fi
    kill $server 2>/dev/null || true
    trap - EXIT
fi

# ---- export: format codes (5) and the model code (4)
run 5 "$bin" export model=yolo9-t format=onnx --json
error_doc export_format_unknown
run 5 "$bin" export model=yolo9-t format=executorch half=true
run 4 "$bin" export model=missing.pt format=executorch
exit 0
