#!/usr/bin/env bash
# The libreyolo GStreamer element (plugins/gstreamer/): gst-launch-1.0 runs it on
# videotestsrc and on a decoded MJPEG file, a tee writing the same frames as PNG;
# the detections it writes (jsonl-location) must be predict's on those PNGs (and
# with track=true its ids those of `libreyolo track` on them), its
# region-of-interest metadata must be on the buffers, and a model that is not
# there must stop the pipeline with an error naming it. Skipped without
# gst-launch-1.0 or the element, in instrumented and portable builds, and
# without the YOLO9 fixture.
set -euo pipefail
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
scratch=$2
build=$(cd "$(dirname "$bin")" && pwd)
source=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=build_kind.bash
. "$(dirname "$0")/build_kind.bash"
skip_instrumented "gst-launch-1.0 cannot load an instrumented library"
skip_portable "no image codecs for the PNG frames"
fail() { echo "gstreamer.sh: $*" >&2; exit 1; }
command -v gst-launch-1.0 >/dev/null 2>&1 || { echo "skipped: no gst-launch-1.0 (gstreamer1.0-tools)"; exit 0; }
[ -f "$build/gstreamer/libgstlibreyolo.so" ] || { echo "skipped: this build has no GStreamer element (libgstreamer-plugins-base1.0-dev)"; exit 0; }
model=$source/../shared/testdata/yolo9/LibreYOLO9t_seed0.pt
[ -f "$model" ] || { echo "skipped: ../shared/testdata (the YOLO9 fixture) is absent"; exit 0; }
python=
for candidate in python3 /usr/bin/python3; do
    if "$candidate" -c "import numpy" >/dev/null 2>&1; then python=$candidate; break; fi
done
[ -n "$python" ] || { echo "skipped: no python3 with numpy to compare the detections"; exit 0; }
export GST_PLUGIN_PATH=$build/gstreamer GST_REGISTRY=$scratch/registry.bin LIBREYOLO_THREADS=1
rm -rf "$scratch" && mkdir -p "$scratch"

# compare ELEMENT.jsonl FRAMES_DIR: the element's detections against predict's
compare() {
    "$bin" predict model="$model" source="$2" --jsonl >"$2.jsonl" || fail "predict on $2"
    "$python" - "$1" "$2.jsonl" <<'PY' || fail "the element's detections differ from predict's ($1)"
import json, sys
import numpy as np
ours = [json.loads(l) for l in open(sys.argv[1])]
theirs = [json.loads(l) for l in open(sys.argv[2])]
assert len(ours) == len(theirs) > 0, (len(ours), len(theirs))
def rows(d):
    return [(x["class_id"], np.float32(x["confidence"]), tuple(np.float32(x["bbox_xyxy"])))
            for x in d["detections"]]
for k, (a, b) in enumerate(zip(ours, theirs)):
    assert a["frame"] == k, a["frame"]
    assert rows(a) == rows(b), (k, rows(a)[:2], rows(b)[:2])
print(f"{len(ours)} frames, {sum(len(d['detections']) for d in ours)} detections: identical")
PY
}

caps="video/x-raw,width=320,height=240,format=RGB"
mkdir -p "$scratch/test_frames"
gst-launch-1.0 -q videotestsrc num-buffers=6 pattern=ball ! "$caps" ! tee name=t \
    t. ! queue ! libreyolo model="$model" jsonl-location="$scratch/test.jsonl" draw=true ! fakesink \
    t. ! queue ! pngenc ! multifilesink location="$scratch/test_frames/%03d.png" \
    || fail "the videotestsrc pipeline failed"
compare "$scratch/test.jsonl" "$scratch/test_frames"

gst-launch-1.0 -q videotestsrc num-buffers=8 pattern=smpte ! "$caps" ! videoconvert ! jpegenc ! \
    avimux ! filesink location="$scratch/clip.avi" || fail "could not write the test clip"
mkdir -p "$scratch/clip_frames"
gst-launch-1.0 -q filesrc location="$scratch/clip.avi" ! avidemux ! jpegdec ! videoconvert ! "$caps" ! \
    tee name=t t. ! queue ! libreyolo model="$model" jsonl-location="$scratch/clip.jsonl" ! fakesink \
    t. ! queue ! pngenc ! multifilesink location="$scratch/clip_frames/%03d.png" \
    || fail "the decoded-file pipeline failed"
compare "$scratch/clip.jsonl" "$scratch/clip_frames"

# track=true: the same ids as `libreyolo track` on the same frames
mkdir -p "$scratch/track_frames"
gst-launch-1.0 -q videotestsrc num-buffers=8 pattern=ball ! "$caps" ! tee name=t \
    t. ! queue ! libreyolo model="$model" track=true max-det=10 jsonl-location="$scratch/track.jsonl" ! fakesink \
    t. ! queue ! pngenc ! multifilesink location="$scratch/track_frames/%03d.png" \
    || fail "the tracking pipeline failed"
"$bin" track model="$model" source="$scratch/track_frames/%03d.png" max_det=10 --jsonl \
    >"$scratch/track_cli.jsonl" || fail "libreyolo track on the frames failed"
"$python" - "$scratch/track.jsonl" "$scratch/track_cli.jsonl" <<'PY' || fail "the element's track ids differ from libreyolo track's"
import json, sys
import numpy as np
ours = [json.loads(l) for l in open(sys.argv[1])]
theirs = [json.loads(l) for l in open(sys.argv[2])]
assert len(ours) == len(theirs) == 8, (len(ours), len(theirs))
def rows(d):
    return [(x["track_id"], x["class_id"], tuple(np.float32(x["bbox_xyxy"]))) for x in d["detections"]]
for k, (a, b) in enumerate(zip(ours, theirs)):
    assert rows(a) == rows(b), (k, rows(a)[:2], rows(b)[:2])
assert any(d["detections"] for d in ours), "nothing tracked"
print(f"track: {sum(len(d['detections']) for d in ours)} tracked detections, ids identical")
PY

# the metadata: one region of interest per detection on the buffer
gst-launch-1.0 -v videotestsrc num-buffers=1 pattern=ball ! "$caps" ! libreyolo model="$model" ! \
    identity silent=false ! fakesink >"$scratch/meta.txt" 2>&1 || fail "the metadata pipeline failed"
grep -q "meta: GstVideoRegionOfInterestMeta" "$scratch/meta.txt" || fail "no region-of-interest meta on the buffer"

# a model that is not there: an error naming it, the pipeline stops
if gst-launch-1.0 videotestsrc num-buffers=1 ! "$caps" ! libreyolo model="$scratch/absent.pt" ! \
    fakesink >"$scratch/bad.txt" 2>&1; then fail "a missing model did not stop the pipeline"; fi
grep -q "absent.pt" "$scratch/bad.txt" || fail "the error does not name the model: $(cat "$scratch/bad.txt")"
echo "gstreamer: ok"
