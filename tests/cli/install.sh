#!/usr/bin/env bash
# Installing and embedding: cmake --install into a temporary prefix; what lands
# where; no path of the source or build tree inside the installed library or
# command; the installed command run from another folder; examples/detect.c
# built against the install through pkg-config and through find_package,
# shared and static, and run on a test image (the YOLO9 fixture checkpoint, else
# the default model when cached); examples/video_detect.c built through
# pkg-config; add_subdirectory configures without cmocka.
set -euo pipefail
bin=$1
scratch=$2
build=$(cd "$(dirname "$bin")" && pwd)
source=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=build_kind.bash
. "$(dirname "$0")/build_kind.bash"
skip_instrumented "its library needs the sanitizer runtime to link"
fail() { echo "install.sh: $*" >&2; exit 1; }
rm -rf "$scratch" && mkdir -p "$scratch"
prefix=$scratch/prefix
cmake --install "$build" --prefix "$prefix" >"$scratch/install.log"
libdir=$prefix/$(sed -n 's/^CMAKE_INSTALL_LIBDIR:PATH=//p' "$build/CMakeCache.txt")
for f in bin/libreyolo include/libreyolo/libreyolo.h include/libreyolo/model.h \
    include/libreyolo/ops.inc share/libreyolo/kernels.lock.json share/doc/libreyolo/LICENSE; do
    [ -f "$prefix/$f" ] || fail "not installed: $f"
done
for f in libreyolo.a libreyolo.so.0 libreyolo.so pkgconfig/libreyolo.pc \
    cmake/libreyolo/libreyoloConfig.cmake cmake/libreyolo/libreyoloTargets.cmake \
    python3/dist-packages/libreyolo_c/__init__.py python3/dist-packages/libreyolo_c/assets/sample.png; do
    [ -e "$libdir/$f" ] || fail "not installed: $libdir/$f"
done
readelf -d "$libdir/libreyolo.so" | grep -q 'SONAME.*libreyolo.so.0' || fail "no soname libreyolo.so.0"
for f in "$prefix/bin/libreyolo" "$libdir/libreyolo.so.0" "$libdir/libreyolo.a"; do
    if strings "$f" | grep -qF -e "$source" -e "$build"; then
        fail "$f holds a path of the source or build tree: $(strings "$f" | grep -F -e "$source" -e "$build" | head -1)"
    fi
done

# The GStreamer element, where built: installed as a plugin that finds the
# installed library, with no path of the build tree.
if [ -f "$build/gstreamer/libgstlibreyolo.so" ]; then
    plugin=$libdir/gstreamer-1.0/libgstlibreyolo.so
    [ -f "$plugin" ] || fail "not installed: $plugin"
    if strings "$plugin" | grep -qF -e "$source" -e "$build"; then
        fail "$plugin holds a path of the source or build tree"
    fi
    if command -v gst-inspect-1.0 >/dev/null 2>&1; then
        GST_PLUGIN_PATH=$libdir/gstreamer-1.0 GST_REGISTRY=$scratch/registry.bin \
            gst-inspect-1.0 libreyolo >"$scratch/inspect.txt" 2>&1 ||
            fail "gst-inspect-1.0 does not load the installed element: $(cat "$scratch/inspect.txt")"
    fi
fi

# The video module, where built: installed beside the library's plugins, with no
# path of the build tree.
if [ -f "$build/plugins/libreyolo_video.so" ]; then
    module=$libdir/libreyolo/plugins/libreyolo_video.so
    [ -f "$module" ] || fail "not installed: $module"
    if strings "$module" | grep -qF -e "$source" -e "$build"; then
        fail "$module holds a path of the source or build tree"
    fi
fi

# The installed command from another folder finds its hub lock.
mkdir -p "$scratch/elsewhere"
(cd "$scratch/elsewhere" && env -u LIBREYOLO_HUB_LOCK "$prefix/bin/libreyolo" version >/dev/null) ||
    fail "the installed command does not run"
(cd "$scratch/elsewhere" && env -u LIBREYOLO_HUB_LOCK "$prefix/bin/libreyolo" kernels --json \
    >"$scratch/kernels.json" 2>"$scratch/kernels.err") || fail "kernels: $(cat "$scratch/kernels.err")"
if grep -q "kernels.lock.json" "$scratch/kernels.err"; then
    fail "the installed command misses its hub lock: $(cat "$scratch/kernels.err")"
fi

export PKG_CONFIG_PATH=$libdir/pkgconfig
cc -std=c17 -Wall -Wextra -Werror "$source/examples/detect.c" $(pkg-config --cflags --libs libreyolo) \
    -Wl,-rpath,"$libdir" -o "$scratch/detect_pc_shared"
cc -std=c17 -Wall -Wextra -Werror "$source/examples/video_detect.c" \
    $(pkg-config --cflags --libs libreyolo) -Wl,-rpath,"$libdir" -o "$scratch/video_detect"
cc -std=c17 -Wall -Wextra -Werror "$source/examples/detect.c" $(pkg-config --cflags libreyolo) \
    -Wl,-Bstatic -lreyolo -Wl,-Bdynamic $(pkg-config --static --libs libreyolo | sed 's/-lreyolo//') \
    -o "$scratch/detect_pc_static"
ldd "$scratch/detect_pc_static" | grep -q libreyolo && fail "the static build links libreyolo.so"
for kind in shared static; do
    static=OFF
    [ $kind = static ] && static=ON
    cmake -S "$source/tests/install/package" -B "$scratch/package_$kind" -DCMAKE_PREFIX_PATH="$prefix" \
        -DEXAMPLES="$source/examples" -DLIBREYOLO_USE_STATIC=$static -DCMAKE_BUILD_RPATH="$libdir" \
        >"$scratch/package_$kind.log" 2>&1 || { cat "$scratch/package_$kind.log"; fail "find_package ($kind)"; }
    cmake --build "$scratch/package_$kind" >>"$scratch/package_$kind.log" 2>&1 ||
        { cat "$scratch/package_$kind.log"; fail "find_package consumer build ($kind)"; }
done
cmake -S "$source/tests/install/subdir" -B "$scratch/subdir" -DLIBREYOLO_SOURCE="$source" \
    -DCMAKE_DISABLE_FIND_PACKAGE_cmocka=ON >"$scratch/subdir.log" 2>&1 ||
    { cat "$scratch/subdir.log"; fail "add_subdirectory consumer"; }

shared=$source/../shared/testdata
image=$shared/images/parkour.jpg
model=$shared/yolo9/LibreYOLO9t_seed0.pt
if [ ! -f "$model" ]; then
    model=nanodet
    image=/usr/share/darknet/data/dog.jpg
    if ! "$bin" fetch --list --json 2>/dev/null | grep -q '"cached":true' || [ ! -f "$image" ]; then
        echo "install: built the example four ways; run skipped (no fixture, default model not cached)"
        exit 0
    fi
fi
if ! "$bin" predict --model "$model" --source "$image" --no-save >/dev/null 2>&1; then
    echo "install: built the example four ways; run skipped (this build reads no images)"
    exit 0
fi
for exe in detect_pc_shared detect_pc_static package_shared/detect package_static/detect; do
    (cd "$scratch/elsewhere" && "$scratch/$exe" "$model" "$image") >"$scratch/out.txt" ||
        fail "$exe failed"
    grep -q "detections" "$scratch/out.txt" || fail "$exe printed no detections"
done
echo "install: ok (pkg-config and find_package, shared and static, ran on $(basename "$image"))"
