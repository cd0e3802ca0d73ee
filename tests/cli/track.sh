#!/usr/bin/env bash
# `libreyolo track`: a static scene (one photo as an image sequence, a clip the
# test makes) keeps every id from the first frame to the last; --jsonl is one
# object per frame with a track_id per detection; save numbers runs/track/<stem>.mp4,
# <stem>2.mp4; mistyped options, bad tracker settings, a classifier and an image
# are refused with LibreYOLO's words. Skipped without video (FFmpeg) or the fixtures.
set -euo pipefail
bin=$1
scratch=$2
source=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "$(dirname "$bin")" && pwd)
# shellcheck source=build_kind.bash
. "$(dirname "$0")/build_kind.bash"
skip_portable "no video in the portable build"
fail() { echo "track.sh: $*" >&2; exit 1; }
in_build '^FFMPEG_FOUND:INTERNAL=1' || { echo "skipped: this build has no video (FFmpeg's libraries)"; exit 0; }
shared=$source/../shared/testdata
model=$shared/yolo9/LibreYOLO9t_seed0.pt
photo=$shared/images/parkour.jpg
[ -f "$model" ] && [ -f "$photo" ] || { echo "skipped: ../shared/testdata (the YOLO9 fixture) is absent"; exit 0; }
rm -rf "$scratch" && mkdir -p "$scratch/scene"
for k in 0 1 2 3 4 5 6 7; do cp "$photo" "$scratch/scene/00$k.jpg"; done
export LIBREYOLO_THREADS=1

"$bin" track model="$model" source="$scratch/scene/%03d.jpg" max_det=20 --jsonl >"$scratch/out.jsonl" ||
    fail "track failed"
[ "$(wc -l <"$scratch/out.jsonl")" -eq 8 ] || fail "expected 8 lines, got $(wc -l <"$scratch/out.jsonl")"
awk -F'"track_id": ' '
    { ids = ""; for (i = 2; i <= NF; i++) { split($i, a, "}"); ids = ids " " a[1] } }
    NR == 1 { first = ids; if (ids == "") { print "no tracks in the first frame"; exit 1 } }
    ids != first { print "frame " NR - 1 ": ids" ids " differ from the first frame'"'"'s" first; exit 1 }
    !/"frame": / || !/"timestamp": / { print "no frame or timestamp"; exit 1 }' "$scratch/out.jsonl" ||
    fail "the ids of a static scene changed"

(cd "$scratch" && "$bin" track model="$model" source=scene/%03d.jpg max_det=5 save >run1.txt &&
    "$bin" track model="$model" source=scene/%03d.jpg max_det=5 save >run2.txt) || fail "track save failed"
grep -q "Results saved to runs/track/scene.mp4" "$scratch/run1.txt" || fail "first save: $(tail -1 "$scratch/run1.txt")"
grep -q "Results saved to runs/track/scene2.mp4" "$scratch/run2.txt" || fail "second save: $(tail -1 "$scratch/run2.txt")"
grep -q "^frame 8/8 " "$scratch/run1.txt" || fail "no per-frame line: $(head -1 "$scratch/run1.txt")"

expect_refusal() { # code words args...
    local code=$1 words=$2
    shift 2
    set +e
    "$bin" track "$@" >"$scratch/refused.out" 2>"$scratch/refused.err"
    local got=$?
    set -e
    [ "$got" -eq "$code" ] || fail "track $*: exit $got, expected $code"
    grep -qF "$words" "$scratch/refused.err" || fail "track $*: no '$words' in: $(cat "$scratch/refused.err")"
}
expect_refusal 2 "did you mean '--track-buffer'" model="$model" source="$scratch/scene/%03d.jpg" traxk_buffer=3
expect_refusal 2 "track_high_thresh must be in [0, 1], got 2.0" model="$model" source="$scratch/scene/%03d.jpg" track_high_thresh=2
expect_refusal 3 "for images use predict" model="$model" source="$photo"
vit=$shared/vit/LibreViTti_seed0.pt
if [ -f "$vit" ]; then
    expect_refusal 2 "Tracking does not support classification models. Use predict()." model="$vit" source="$scratch/scene/%03d.jpg"
fi
echo "track: ok"
