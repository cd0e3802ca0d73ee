#!/usr/bin/env bash
# What a fresh Debian 12 machine lacks for the build, the tests and the demo:
# installed with apt-get when run as root, otherwise the exact command to run
# is printed and the script fails. `make demo`, `make test` and .ci/run call it.
set -euo pipefail

# Build and tests (gcc; clang with ASan/UBSan/TSan), the optional libraries the
# providers use, FFmpeg's for video (and python3-opencv, which test_video
# compares frames with), GStreamer's for the element (and the tools and
# plugins its test runs), the demo's photos (darknet), the model fetcher (npm) and the
# Python package's tests (numpy, pytest, Dask distributed with pandas) and its
# `pip install` (venv, setuptools, wheel).
packages=(build-essential cmake pkg-config clang libclang-rt-14-dev libcmocka-dev zlib1g-dev
          libdnnl-dev libopenblas-dev libxnnpack-dev libpthreadpool-dev libstb-dev
          libjpeg62-turbo-dev libssl-dev libcjson-dev libcurl4-openssl-dev flatbuffers-compiler
          libavformat-dev libavcodec-dev libswscale-dev libavdevice-dev python3-opencv
          libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev gstreamer1.0-tools
          gstreamer1.0-plugins-base gstreamer1.0-plugins-good
          darknet python3 python3-numpy python3-pytest python3-pandas python3-dask python3-distributed
          python3-venv python3-setuptools python3-wheel)

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm (model fetches): Debian's package, unless a Node.js distribution already brings it.
command -v npm >/dev/null 2>&1 || missing+=(npm)
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
    echo "libreyolo needs these Debian packages: ${missing[*]}" >&2
    echo "install them with:" >&2
    echo "  sudo apt-get install --no-install-recommends ${missing[*]}" >&2
    exit 1
fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
