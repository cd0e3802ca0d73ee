#!/usr/bin/env bash
# `libreyolo kernels` and `libreyolo kernels run`, as a user calls them.
# Usage: bash kernels.sh <path-to-libreyolo> <scratch-dir>. Quiet on success.
set -euo pipefail

bin=$1
scratch=$2
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

# ---- A tiny .npy writer: version 1.0 header padded to 64 bytes, then payload.
# npy PATH DESCR SHAPE PAYLOAD, PAYLOAD as printf escapes (\xHH...).
npy() {
    local path=$1 descr=$2 shape=$3 payload=$4
    local dict="{'descr': '$descr', 'fortran_order': False, 'shape': $shape, }"
    local total=$(((10 + ${#dict} + 1 + 63) / 64 * 64))
    local hlen=$((total - 10))
    {
        printf '\x93NUMPY\x01\x00'
        printf '%b' "\\x$(printf %02x $((hlen & 255)))\\x$(printf %02x $((hlen >> 8)))"
        printf '%s' "$dict"
        printf "%$((hlen - ${#dict} - 1))s\n" ""
        printf '%b' "$payload"
    } >"$path"
}

# Little-endian bytes of 32-bit words given in hex.
le32() {
    local out="" w
    for w in "$@"; do out+="\\x${w:6:2}\\x${w:4:2}\\x${w:2:2}\\x${w:0:2}"; done
    printf '%s' "$out"
}

bytes() {
    local out="" b
    for b in "$@"; do out+="\\x$b"; done
    printf '%s' "$out"
}

# ---- Global options and usage errors
run 0 "$bin" --version
grep -q '^libreyolo [0-9]' "$scratch/stdout" || fail "--version printed $(cat "$scratch/stdout")"
run 0 "$bin" --help
run 2 "$bin"
run 2 "$bin" no-such-command
stderr_has "no-such-command"
run 2 "$bin" kernels --no-such-option
stderr_has "--no-such-option"

# ---- The active map
run 0 "$bin" kernels
[ -s "$scratch/stdout" ] || fail "kernels printed nothing"
cp "$scratch/stdout" "$scratch/active.txt"
slots=()
while read -r slot impl rest; do
    if [ -z "$impl" ] || [ -n "$rest" ]; then fail "kernels: malformed line '$slot $impl $rest'"; fi
    slots+=("$slot")
done <"$scratch/active.txt"
for slot in fake_quant_fp8 fake_quant_int8_per_channel unpack_int_grouped unpack_nvfp4; do
    grep -q "^$slot " "$scratch/active.txt" || fail "kernels does not list $slot"
done

run 0 "$bin" kernels --all
grep -q '^selection: ' "$scratch/stdout" || fail "kernels --all shows no selection"
for slot in "${slots[@]}"; do
    grep -q "^$slot " "$scratch/stdout" || fail "kernels --all does not list $slot"
done
[ "$(grep -c ' reference  *eligible$' "$scratch/stdout")" -eq "${#slots[@]}" ] ||
    fail "kernels --all: not every slot shows an eligible reference"

run 0 "$bin" kernels --json
cp "$scratch/stdout" "$scratch/active.json"
run 0 "$bin" kernels --all --json
cp "$scratch/stdout" "$scratch/all.json"
if command -v python3 >/dev/null 2>&1; then
    for f in active.json all.json; do
        python3 -c 'import json,sys; json.load(sys.stdin)' <"$scratch/$f" ||
            fail "kernels --json output $f is not valid JSON"
    done
    python3 - "$scratch/all.json" "${slots[@]}" <<'EOF' || fail "kernels --all --json content"
import json, sys
doc = json.load(open(sys.argv[1]))
slots = sys.argv[2:]
assert list(doc["active"]) == slots, (list(doc["active"]), slots)
assert [s["slot"] for s in doc["slots"]] == slots
for s in doc["slots"]:
    names = [i["name"] for i in s["implementations"]]
    assert names[-1] == "reference", names
    assert s["active"] in names
EOF
fi
grep -q '"selection": null' "$scratch/active.json" || fail "kernels --json: selection should be null"

# ---- Forcing the reference
for value in off " Reference "; do
    LIBREYOLO_KERNELS=$value run 0 "$bin" kernels
    while read -r slot impl; do
        [ "$impl" = reference ] || fail "LIBREYOLO_KERNELS='$value': $slot uses $impl"
    done <"$scratch/stdout"
    [ "$(wc -l <"$scratch/stdout")" -eq "${#slots[@]}" ] || fail "LIBREYOLO_KERNELS=$value changed the slot list"
done
LIBREYOLO_KERNELS=off run 0 "$bin" kernels --all --json
grep -q '"selection": {"variable": "LIBREYOLO_KERNELS", "value": "off"}' "$scratch/stdout" ||
    fail "kernels --json does not show the selection"
LIBREYOLO_KERNELS='' LIBREYOLO_QUANT_KERNELS=off run 0 "$bin" kernels --all
grep -q '^selection: LIBREYOLO_QUANT_KERNELS=off' "$scratch/stdout" || fail "legacy alias not shown"

# ---- kernels run: inputs with edge values (NaN, +-inf, -0, subnormal, ties, huge)
cd "$scratch"
x16=$(le32 3dcccccd c0200000 406ccccd 3a83126f 43fa0000 80000000 7fc00000 7f800000 \
    ff800000 00000001 43e00000 3f000000 3fc00000 c2c80000 7f7fffff 3e800000)
npy x.npy '<f4' '(2, 8)' "$x16"
npy scale1.npy '<f4' '(1,)' "$(le32 3c23d70a)"
npy amax.npy '<f4' '(1,)' "$(le32 40c00000)"
npy payload4.npy '|u1' '(2, 4)' "$(bytes 01 23 45 67 fe dc ba 98)"
npy gscale.npy '<f4' '(2, 2)' "$(le32 3f800000 3dcccccd 40000000 bf800000)"
npy payload8.npy '|u1' '(2, 8)' "$(bytes 01 23 45 67 89 ab cd ef fe dc ba 98 76 54 32 10)"
npy bscale.npy '|u1' '(2, 1)' "$(bytes 38 44)"

# slot | arguments (inputs and params)
cases=(
    "fake_quant_fp8|--in x.npy --in scale1.npy"
    "fake_quant_int8_per_channel|--in x.npy --in none --arg axis=0"
    "fake_quant_int8_affine|--in x.npy --in scale1.npy --in amax.npy"
    "fake_quant_int_grouped|--in x.npy --in none --arg bits=4 --arg group_size=4"
    "fake_quant_int_grouped|--in x.npy --in none --arg bits=2 --arg group_size=8"
    "fake_quant_nvfp4_weight|--in x.npy --in amax.npy"
    "fake_quant_nvfp4_dynamic|--in x.npy"
    "fake_quant_mxfp4_weight|--in x.npy"
    "fake_quant_mxfp4_dynamic|--in x.npy"
    "unpack_int_grouped|--in payload4.npy --in gscale.npy --arg bits=4 --arg group_size=4 --arg in_features=7"
    "unpack_nvfp4|--in payload8.npy --in bscale.npy --in amax.npy --arg in_features=13"
)
LIBREYOLO_KERNELS=avx2 run 0 "$bin" kernels
cp "$scratch/stdout" "$scratch/avx2.txt"
n=0
for c in "${cases[@]}"; do
    slot=${c%%|*}
    read -r -a args <<<"${c#*|}"
    n=$((n + 1))
    run 0 "$bin" kernels run "$slot" --impl reference "${args[@]}" --out "ref$n.npy"
    [ "$(head -c 6 "ref$n.npy" | tail -c 5)" = NUMPY ] ||
        fail "$slot: output ref$n.npy is not a .npy file"
    # Dispatch without --impl gives the same bytes as the reference.
    run 0 "$bin" kernels run "$slot" "${args[@]}" --threads 2 --out "dispatch$n.npy"
    cmp -s "ref$n.npy" "dispatch$n.npy" || fail "$slot: dispatch differs from the reference"
    if grep -q "^$slot  *avx2\$" avx2.txt; then
        run 0 "$bin" kernels run "$slot" --impl avx2 "${args[@]}" --out "avx2_$n.npy"
        cmp -s "ref$n.npy" "avx2_$n.npy" || fail "$slot: avx2 differs from the reference"
    fi
done
ls ./*.tmp-* >/dev/null 2>&1 && fail "kernels run left temporary files"

# ---- kernels run: errors
run 1 "$bin" kernels run no_such_slot --in x.npy --out y.npy
stderr_has "no_such_slot"
run 1 "$bin" kernels run fake_quant_fp8 --impl no_such_impl --in x.npy --in scale1.npy --out y.npy
stderr_has "no_such_impl"
head -c 100 x.npy >truncated.npy
run 1 "$bin" kernels run fake_quant_fp8 --in truncated.npy --in scale1.npy --out y.npy
stderr_has "truncated.npy"
printf 'not a numpy file at all' >garbage.npy
run 1 "$bin" kernels run fake_quant_fp8 --in x.npy --in garbage.npy --out y.npy
stderr_has "garbage.npy"
stderr_has "magic"
run 1 "$bin" kernels run fake_quant_fp8 --in missing.npy --in scale1.npy --out y.npy
stderr_has "missing.npy"
run 1 "$bin" kernels run fake_quant_fp8 --in x.npy --in none --out y.npy
stderr_has "scale"
run 1 "$bin" kernels run unpack_int_grouped --in payload4.npy --in gscale.npy --arg bits=3 --out y.npy
stderr_has "bits"
[ ! -e y.npy ] || fail "a failed run wrote its output"
run 1 "$bin" kernels run fake_quant_fp8 --in x.npy --in scale1.npy --out no_such_dir/y.npy
stderr_has "no_such_dir/y.npy"
run 2 "$bin" kernels run fake_quant_fp8 --in x.npy --in scale1.npy --arg colour=red --out y.npy
stderr_has "colour"
stderr_has "it has none"
run 2 "$bin" kernels run unpack_int_grouped --in payload4.npy --in gscale.npy --arg colour=red --out y.npy
stderr_has "its parameters: bits, group_size, in_features"
run 2 "$bin" kernels run unpack_int_grouped --in payload4.npy --in gscale.npy --arg bits=four --out y.npy
stderr_has "expected 1 integer value"
run 2 "$bin" kernels run conv2d --in x.npy --arg stride=2 --out y.npy
stderr_has "expected 2 integer values (comma-separated)"
run 2 "$bin" kernels run fake_quant_fp8 --in x.npy --in scale1.npy --out y.npy --out z.npy
run 2 "$bin" kernels run fake_quant_fp8 --in x.npy --in scale1.npy --threads 0 --out y.npy
run 2 "$bin" kernels run fake_quant_fp8 --in x.npy --in scale1.npy
run 2 "$bin" kernels run --in x.npy --out y.npy
run 2 "$bin" kernels run fake_quant_fp8 --in
run 0 "$bin" kernels run --help
exit 0

# ---- kernels check: one case alone, by its name (its values are seeded from it)
run 0 "$bin" kernels check --slot clamp --impl reference --case "0-d to [-10, 10]" --json
grep -q '"slot": "clamp", "impl": "reference", "verdict": "bit-identical"' "$scratch/stdout" ||
    fail "kernels check --case: $(cat "$scratch/stdout")"
grep -q '"elements": 2,' "$scratch/stdout" ||
    fail "kernels check --case did not run the one 0-d case (plain and in place)"
run 0 "$bin" kernels check --slot clamp --impl reference --case "no such case"
grep -q "no cases run" "$scratch/stdout" || fail "kernels check --case ran cases it does not name"
run 2 "$bin" kernels check --case
