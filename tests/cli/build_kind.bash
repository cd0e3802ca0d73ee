# Sourced by the command-line tests of this folder (not itself a test: ctest runs
# the *.sh files): skips for builds a test cannot use. Needs $build.
in_build() { grep -qE "$1" "$build/CMakeCache.txt"; }
# skip_instrumented WHY: the sanitizer builds, whose library needs its runtime first
skip_instrumented() {
    if in_build '^LIBREYOLO_(SANITIZE|TSAN):BOOL=ON'; then
        echo "skipped: an instrumented build ($1)"
        exit 0
    fi
}
# skip_portable WHY: the build without the optional libraries (no image codecs)
skip_portable() {
    if in_build '^LIBREYOLO_WITH_(STB|XNNPACK):BOOL=OFF'; then
        echo "skipped: the portable build ($1)"
        exit 0
    fi
}
