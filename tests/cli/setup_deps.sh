#!/usr/bin/env bash
# tools/setup-deps.sh, the one set-up script of `make demo`, `make test` and
# .ci/run, on a pretend machine (fake dpkg-query, id, apt-get and npm first
# on PATH) that lacks two packages: as a user it prints the exact sudo line
# and fails; as root it asks apt-get for exactly those; with nothing missing it
# does nothing.
set -euo pipefail
scratch=$2
script=$(cd "$(dirname "$0")/../.." && pwd)/tools/setup-deps.sh
fake=$scratch/fakebin
rm -rf "$fake" && mkdir -p "$fake"
fail() { echo "setup_deps.sh: $*" >&2; exit 1; }

cat >"$fake/dpkg-query" <<'SH'
#!/bin/sh
for p; do last=$p; done
case " $MISSING " in *" $last "*) exit 1 ;; esac
printf 'install ok installed'
SH
cat >"$fake/id" <<'SH'
#!/bin/sh
echo "$FAKE_UID"
SH
cat >"$fake/apt-get" <<'SH'
#!/bin/sh
echo "$*" >>"$APT_LOG"
SH
printf '#!/bin/sh\n' >"$fake/npm"
chmod +x "$fake"/*
export APT_LOG=$scratch/apt.log
rm -f "$APT_LOG"

if MISSING="libcjson-dev darknet" FAKE_UID=1000 PATH="$fake:$PATH" "$script" \
    >"$scratch/out" 2>"$scratch/err"; then
    fail "succeeded for a user with packages missing"
fi
grep -qxF "  sudo apt-get install --no-install-recommends libcjson-dev darknet" "$scratch/err" ||
    fail "no exact sudo line: $(cat "$scratch/err")"
[ ! -e "$APT_LOG" ] || fail "ran apt-get as a user"

MISSING="libcjson-dev darknet" FAKE_UID=0 PATH="$fake:$PATH" "$script" >"$scratch/out"
grep -qxF "install -y -qq --no-install-recommends libcjson-dev darknet" "$APT_LOG" ||
    fail "apt-get was not asked for the two packages: $(cat "$APT_LOG")"

rm -f "$APT_LOG"
MISSING="" FAKE_UID=1000 PATH="$fake:$PATH" "$script" >"$scratch/out" 2>&1 ||
    fail "failed with nothing missing"
[ ! -s "$scratch/out" ] && [ ! -e "$APT_LOG" ] || fail "did something with nothing missing"
echo "setup_deps: ok"
