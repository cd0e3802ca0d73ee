#!/usr/bin/env bash
# The classify task through the command: ViT-Ti's top-5 as text and in the
# JSON document ("probs"), `run` writing logits.npy, `info` naming the
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
grep -q "top-5" "$scratch/top5.txt" || fail "predict printed no top-5"
# predict.json's top-1 for dog.jpg is class 521
grep -A1 "top-5" "$scratch/top5.txt" | grep -q "(class 521)" || fail "top-1 is not class 521"

for setting in "--fused-attn off" "fused_attn=on"; do
    # shellcheck disable=SC2086
    "$bin" predict --model "$model" --source "$image" --no-save --json $setting >"$scratch/p.json"
    if command -v python3 >/dev/null 2>&1; then
        python3 - "$scratch/p.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
probs = doc["results"][0]["probs"]
assert probs["top1"] == 521, probs
assert len(probs["top5"]) == 5 and probs["top5"][0]["class_id"] == 521, probs
assert set(probs["top5"][0]) == {"class", "class_id", "confidence"}, probs
PY
    fi
done

if "$bin" predict --model "$model" --source "$image" --no-save --fused-attn maybe \
    >/dev/null 2>&1; then
    fail "--fused-attn accepted 'maybe'"
fi
echo "classify: ok"
