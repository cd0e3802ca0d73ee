#!/usr/bin/env bash
# The Python package (python/libreyolo_c) and its Dask entry point, with pytest
# on this build's libreyolo.so: python/tests. Skipped with a message where
# Debian's python3-numpy / python3-pytest are missing, or in an instrumented
# build (its library needs the sanitizer runtime loaded first).
set -euo pipefail
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
scratch=$2
build=$(cd "$(dirname "$bin")" && pwd)
source=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=build_kind.bash
. "$(dirname "$0")/build_kind.bash"
skip_instrumented "python cannot load its library"
skip_portable "no image codecs, no XNNPACK; the default build runs them"
python=
for candidate in ${LIBREYOLO_PYTHON:-} python3 /usr/bin/python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
        "$candidate" -c "import numpy, pytest" >/dev/null 2>&1; then
        python=$candidate
        break
    fi
done
if [ -z "$python" ]; then
    echo "skipped: no python3 with numpy and pytest (apt-get install python3-numpy python3-pytest)"
    exit 0
fi
mkdir -p "$scratch"
cd "$source/python/tests"
LIBREYOLO_LIBRARY=$build/libreyolo.so.0 LIBREYOLO_CLI=$bin PYTHONPATH=$source/python \
    PYTHONDONTWRITEBYTECODE=1 "$python" -m pytest -q -p no:cacheprovider -p no:logging \
    -W ignore::DeprecationWarning --basetemp="$scratch/tmp" . 2>&1 | tail -n 20
exit "${PIPESTATUS[0]}"
