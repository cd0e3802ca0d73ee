#!/usr/bin/env bash
# LibreYOLO's quantized YOLO9 checkpoints through the command: `info` names the
# recipe, state, remainder and module count (text and JSON), `run` writes the
# four outputs, and `export --format executorch` refuses in LibreYOLO's words.
set -euo pipefail
bin=$1
scratch=$2
mkdir -p "$scratch"
shared=$(cd "$(dirname "$0")/../.." && pwd)/../shared/testdata
final=$shared/yolo9-quant/int8/LibreYOLO9t_seed0-final.pt
prepared=$shared/yolo9-quant/int8/LibreYOLO9t_seed0-prepared.pt
fp8=$shared/yolo9-quant/fp8/LibreYOLO9t_seed0-final.pt
if [ ! -f "$final" ] || [ ! -f "$prepared" ] || [ ! -f "$fp8" ]; then
    echo "skipped: the yolo9-quant fixture is absent"
    exit 0
fi
fail() { echo "quant.sh: $*" >&2; exit 1; }

"$bin" info --model "$final" >"$scratch/info.txt"
grep -q "^quant *int8, finalized, remainder fp32, 208 quantized modules" "$scratch/info.txt" ||
    fail "info does not describe the int8 finalized checkpoint"
"$bin" info --model "$prepared" | grep -q "^quant *int8, prepared, 208 quantized modules" ||
    fail "info does not describe the prepared checkpoint"
"$bin" info --model "$fp8" --json >"$scratch/info.json"
grep -qF '"quant":{"recipe":"fp8","state":"finalized","remainder":"fp32","modules":208}' \
    "$scratch/info.json" || fail "info --json lacks the quant object"

"$bin" run --model "$prepared" --input "$shared/yolo9/ref_parkour/input.npy" \
    --output-dir "$scratch/run" >/dev/null
for o in predictions raw_p3 raw_p4 raw_p5; do
    [ -f "$scratch/run/$o.npy" ] || fail "run wrote no $o.npy"
done

if "$bin" export --model "$final" --format executorch --output "$scratch/q.pte" \
    >/dev/null 2>"$scratch/export.err"; then
    fail "export of a quantized model succeeded"
fi
grep -qF "EXECUTORCH INT8 export is not supported. (the model is quantized: recipe int8, finalized)" \
    "$scratch/export.err" || fail "export refusal wording: $(cat "$scratch/export.err")"
[ ! -e "$scratch/q.pte" ] || fail "a refused export left a file"
echo "quant: ok"
