#!/usr/bin/env bash
# `pip install --no-build-isolation .` as the README says: into a fresh venv with
# Debian's site packages (python3-numpy), offline (--no-index), reusing this
# build's libreyolo.so (LIBREYOLO_BUILD_DIR); then the installed package,
# with no PYTHONPATH or LIBREYOLO_LIBRARY, from another folder: its library is
# the one inside the package, and it predicts on a fixture. The default build
# only (one install per `make test`).
set -euo pipefail
bin=$1
scratch=$2
build=$(cd "$(dirname "$bin")" && pwd)
source=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=build_kind.bash
. "$(dirname "$0")/build_kind.bash"
skip_instrumented "python cannot load its library"
skip_portable "the default build installs the package"
python=/usr/bin/python3
if ! "$python" -c "import numpy, venv, ensurepip, setuptools, wheel" >/dev/null 2>&1; then
    echo "skipped: /usr/bin/python3 lacks numpy, venv, setuptools or wheel" \
        "(apt-get install python3-numpy python3-venv python3-setuptools python3-wheel)"
    exit 0
fi
fail() { echo "pip_install.sh: $*" >&2; exit 1; }
rm -rf "$scratch" && mkdir -p "$scratch/elsewhere"
"$python" -m venv --system-site-packages "$scratch/venv"
(cd "$source" && LIBREYOLO_BUILD_DIR=$build PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 \
    "$scratch/venv/bin/pip" install --no-build-isolation --no-index --no-cache-dir . \
    >"$scratch/pip.log" 2>&1) || { tail -n 30 "$scratch/pip.log"; fail "pip install failed"; }

shared=$source/../shared/testdata
model=$shared/yolo9/LibreYOLO9t_seed0.pt
image=$shared/images/parkour.jpg
[ -f "$model" ] && [ -f "$image" ] || model=
(cd "$scratch/elsewhere" && env -u PYTHONPATH -u LIBREYOLO_LIBRARY PYTHONDONTWRITEBYTECODE=1 \
    "$scratch/venv/bin/python" - "$scratch/venv" "$model" "$image" <<'PY') || fail "the installed package"
import os, sys
import libreyolo_c
venv, model, image = sys.argv[1:]
here = os.path.dirname(libreyolo_c.__file__)
assert os.path.realpath(here).startswith(os.path.realpath(venv)), here
assert libreyolo_c.LIBRARY_PATH == os.path.join(here, "libreyolo.so.0"), libreyolo_c.LIBRARY_PATH
assert os.path.isfile(os.path.join(here, "share", "libreyolo", "kernels.lock.json"))
assert os.path.isfile(libreyolo_c.SAMPLE_IMAGE), libreyolo_c.SAMPLE_IMAGE
if model:
    m = libreyolo_c.LibreYOLO(model)
    r = m(image)
    assert len(r.boxes) > 0 and r.boxes.xyxy.shape[1] == 4
    # LibreYOLO's quickstart, the model path changed
    result = m(libreyolo_c.SAMPLE_IMAGE, save=True)
    assert os.path.isfile(result.saved_path), result.saved_path
    print(f"pip install: ok ({len(r.boxes)} boxes on {os.path.basename(image)}, the quickstart "
          f"saved {result.saved_path}, from {here})")
else:
    print(f"pip install: ok (imported from {here}; predict skipped: no fixture)")
PY
