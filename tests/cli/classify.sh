#!/usr/bin/env bash
# The classify task through the command: ViT-Ti's top-1 in LibreYOLO's summary
# line, the top 5 under --verbose and in the JSON document ("classification",
# "top5" as LibreYOLO writes them), `run` writing logits.npy, `info` naming the
# attention modules, --fused-attn on|off (and LibreYOLO's fused_attn=off).
set -euo pipefail
bin=$1
scratch=$2
mkdir -p "$scratch"
shared=$(cd "$(dirname "$0")/../.." && pwd)/../shared/testdata
model=$shared/vit/LibreViTti_seed0.pt
image=$shared/images/dog.jpg
if [ ! -f "$model" ] || [ ! -f "$image" ]; then
    echo "skipped: the ViT fixture is absent"
    exit 0
fi
fail() { echo "classify.sh: $*" >&2; exit 1; }

"$bin" info --model "$model" >"$scratch/info.txt"
grep -q "^task *classify" "$scratch/info.txt" || fail "info does not say classify"
grep -q "12 modules, fused_attn on" "$scratch/info.txt" || fail "info does not say fused_attn on"

"$bin" run --model "$model" --input "$shared/vit/ref_dog/input.npy" --output-dir "$scratch/run" \
    --fused-attn off >/dev/null
[ -f "$scratch/run/logits.npy" ] || fail "run wrote no logits.npy"

# predict needs images (stb)
if ! "$bin" predict --model "$model" --source "$image" --no-save >"$scratch/top5.txt" \
    2>"$scratch/stderr"; then
    if grep -qF "built without stb" "$scratch/stderr"; then
        echo "classify: predict skipped (this build cannot read images: no stb)"
        exit 0
    fi
    cat "$scratch/stderr" >&2
    fail "predict failed"
fi
# LibreYOLO's line: image 1/1 dog.jpg: 768x576 <top-1 name> <confidence>, <ms>
grep -q "^image 1/1 dog.jpg: 768x576 " "$scratch/top5.txt" || fail "predict printed no summary line"
"$bin" predict --model "$model" --source "$image" --no-save --verbose >"$scratch/top5.txt"
# predict.json's top-1 for dog.jpg is class 521; --verbose lists the top 5 under the line
sed -n 2p "$scratch/top5.txt" | grep -q "(class 521)" || fail "top-1 is not class 521"
[ "$(wc -l <"$scratch/top5.txt")" -eq 6 ] || fail "--verbose did not list the top 5"

for setting in "--fused-attn off" "fused_attn=on"; do
    # shellcheck disable=SC2086
    "$bin" predict --model "$model" --source "$image" --no-save --json $setting >"$scratch/p.json"
    if command -v python3 >/dev/null 2>&1; then
        python3 - "$scratch/p.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
result = doc["results"][0]
assert result["classification"]["class"] == 521, result
assert result["top5"][0] == result["classification"], result
assert len(result["top5"]) == 5 and result["detections"] == [], result
assert set(result["top5"][0]) == {"name", "class", "confidence"}, result
PY
    fi
done

if "$bin" predict --model "$model" --source "$image" --no-save --fused-attn maybe \
    >/dev/null 2>&1; then
    fail "--fused-attn accepted 'maybe'"
fi
echo "classify: ok"
