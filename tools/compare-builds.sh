#!/bin/sh
# Nothing moves: two builds of the command give byte-identical ExecuTorch
# programs and the same `predict --json` documents (the speed objects removed).
#
#   tools/compare-builds.sh BEFORE/libreyolo AFTER/libreyolo [WORKDIR]
#
# Models: the fixtures' LibreYOLO9t, D-FINE-n, DEIM-n, DEIMv2-atto, ViT-Ti and
# quantized LibreYOLO9t, and NanoDet-g from the cache (`libreyolo fetch nanodet`);
# images: the fixtures'. Each model's program is exported by both builds and
# compared byte for byte (program and sidecar); every model and every program
# predicts on every image. Prints one line per comparison and exits 1 on any
# difference. Needs ../shared/testdata and python3.
set -u
before=$(realpath "$1") after=$(realpath "$2")
work=${3:-$(mktemp -d)}
data=$(cd "$(dirname "$0")/.." && pwd)/../shared/testdata
[ -d "$data" ] || { echo "compare-builds: no $data (the shared fixtures)" >&2; exit 2; }
mkdir -p "$work/before" "$work/after"
fail=0

strip_speed() {
    python3 -c 'import json,sys
def strip(o):
    if isinstance(o, dict): return {k: strip(v) for k, v in o.items() if k != "speed"}
    if isinstance(o, list): return [strip(v) for v in o]
    return o
print(json.dumps(strip(json.load(sys.stdin)), sort_keys=True))'
}

same() { # label file-a file-b
    if cmp -s "$2" "$3"; then echo "same       $1"; else echo "DIFFERENT  $1"; fail=1; fi
}

models="yolo9/LibreYOLO9t_seed0.pt dfine/LibreDFINEn_seed0.pt deim/LibreDEIMn_seed2.pt
deimv2/LibreDEIMv2atto_seed0.pt vit/LibreViTti_seed0.pt yolo9-quant/int8/LibreYOLO9t_seed0-final.pt
yolo9-quant/fp8/LibreYOLO9t_seed0-final.pt"
exports="yolo9/LibreYOLO9t_seed0.pt dfine/LibreDFINEn_seed0.pt deimv2/LibreDEIMv2atto_seed0.pt
vit/LibreViTti_seed0.pt nanodet"

for m in $exports; do
    stem=$(basename "$m" .pt)
    for side in before after; do
        bin=$before; [ $side = after ] && bin=$after
        src=$m; [ "$m" = nanodet ] || src=$data/$m
        "$bin" export --model "$src" --format executorch --output "$work/$side/$stem.pte" --quiet \
            >"$work/$side/$stem.export.log" 2>&1 || echo "export failed ($side): $m" >&2
    done
    same "export $stem.pte" "$work/before/$stem.pte" "$work/after/$stem.pte"
    same "export $stem.pte.json" "$work/before/$stem.pte.json" "$work/after/$stem.pte.json"
    models="$models $work/before/$stem.pte"
done

for m in nanodet $models; do
    src=$m
    case $m in nanodet | /*) ;; *) src=$data/$m ;; esac
    [ -e "$src" ] || [ "$m" = nanodet ] || { echo "skip       $m (absent)"; continue; }
    for img in "$data"/images/*.jpg; do
        tag=$(echo "${m#"$work"/before/}" | tr / _)-$(basename "$img" .jpg)
        "$before" predict --model "$src" --source "$img" --json --threads 1 --quiet 2>/dev/null |
            strip_speed >"$work/before/$tag.json"
        "$after" predict --model "$src" --source "$img" --json --threads 1 --quiet 2>/dev/null |
            strip_speed >"$work/after/$tag.json"
        [ -s "$work/before/$tag.json" ] || echo "empty      $tag (before)"
        same "predict $tag" "$work/before/$tag.json" "$work/after/$tag.json"
    done
done
[ $fail = 0 ] && echo "compare-builds: nothing moved" || echo "compare-builds: differences (files in $work)"
exit $fail
