#!/usr/bin/env bash
# make fuzz: run every libFuzzer harness of tests/fuzz for FUZZ_SECONDS each
# (FUZZ_TARGETS="npy pte" for some), in the clang ASan+UBSan build BUILD_DIR.
# New inputs go to BUILD_DIR/corpus/<target> (the committed corpus is read,
# not written: merge what is worth keeping with
#   BUILD_DIR/tests/fuzz/fuzz_<t> -merge=1 tests/fuzz/corpus/<t> BUILD_DIR/corpus/<t>);
# a finding is written to BUILD_DIR/findings/ and fails the run. A finding
# that is fixed becomes a file in tests/fuzz/regressions/<target>/.
set -u
build=${BUILD_DIR:-build-fuzz}
seconds=${FUZZ_SECONDS:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
targets=${FUZZ_TARGETS:-$(cd "$root/tests/fuzz" && ls fuzz_*.c | sed -e 's/^fuzz_//' -e 's/\.c$//' | grep -v '^util$')}
mkdir -p "$build/findings"
status=0
for t in $targets; do
    exe="$build/tests/fuzz/fuzz_$t"
    [ -x "$exe" ] || { echo "fuzz: no $exe (build with LIBREYOLO_FUZZ=ON)" >&2; exit 2; }
    mkdir -p "$build/corpus/$t"
    seeds=()
    for d in "$root/tests/fuzz/corpus/$t" "$root/tests/fuzz/regressions/$t"; do [ -e "$d" ] && seeds+=("$d"); done
    case $t in
        pte) seeds+=("$root/tests/fixtures/pte") ;;
        hub_lock) mkdir -p "$build/seeds/hub_lock" && cp "$root/src/kernels/hub/kernels.lock.json" "$build/seeds/hub_lock/" && seeds+=("$build/seeds/hub_lock") ;;
    esac
    [ -d "$root/../shared/testdata/hostile" ] && seeds+=("$root/../shared/testdata/hostile")
    log="$build/fuzz-$t.log"
    printf 'fuzz %-12s %ss ... ' "$t" "$seconds"
    ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
        "$exe" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2560 -max_len=65536 -print_final_stats=1 \
        -artifact_prefix="$build/findings/$t-" "$build/corpus/$t" "${seeds[@]}" >"$log" 2>&1
    rc=$?
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1)
    if [ $rc -eq 0 ]; then
        echo "${runs:-?} executions, $cov, no finding"
    else
        echo "FINDING (exit $rc): see $log and $build/findings/"
        status=1
    fi
done
exit $status
