#!/bin/sh
# Run every test binary of a build and finish with the line "N passed, N failed".
# Usage: tests/run.sh BUILD_DIR
#
# When PostgreSQL 15 is installed, a throw-away cluster (tests/support/pgtmp.sh)
# runs for the unit binaries, which find it in GPSERVE_TEST_PG_URL (the store's
# tests then run on PostgreSQL as well as SQLite); it is stopped and removed at
# the end, whatever happens. Without it those tests print a skip.
BUILD=${1:-build}
passed=0
failed=0
broken=""
HERE=$(cd "$(dirname "$0")" && pwd) || exit 1
pgparent=""
stop_pg() {
    if [ -n "$pgparent" ]; then
        sh "$HERE/support/pgtmp.sh" stop "$pgparent/pg"
        rmdir "$pgparent" 2>/dev/null
        pgparent=""
    fi
}
trap stop_pg EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
if [ -z "${GPSERVE_TEST_PG_URL:-}" ] && [ -x "${PGBIN:-/usr/lib/postgresql/15/bin}/initdb" ]; then
    pgparent=$(mktemp -d "${TMPDIR:-/tmp}/gpserve-pg.XXXXXX") || exit 1
    chmod 755 "$pgparent" # the cluster may run as the user postgres
    if url=$(sh "$HERE/support/pgtmp.sh" start "$pgparent/pg"); then
        GPSERVE_TEST_PG_URL=$url
        export GPSERVE_TEST_PG_URL
    else
        echo "tests/run.sh: no PostgreSQL for the store's tests (pgtmp.sh failed); they skip"
        stop_pg
    fi
fi
# The batching contract of test_method_contract (a point's bits do not depend on
# the other points of its call, docs/design/numerics.md) holds whichever kernels
# OpenBLAS picks, and they differ (an SSE2 ddot that depends on alignment, an
# AVX-512 dgemm whose kernel depends on the size): run it again on OpenBLAS's
# SSE2 kernels (its fallback on CPUs it does not know), on its AVX2 ones where
# the CPU has AVX2 and on its AVX-512 ones where it has AVX-512.
coretypes="Prescott"
grep -q avx2 /proc/cpuinfo 2>/dev/null && coretypes="$coretypes Haswell"
grep -q avx512f /proc/cpuinfo 2>/dev/null && coretypes="$coretypes SkylakeX"
for t in "$BUILD"/tests/test_* $(for c in $coretypes; do echo "OPENBLAS_CORETYPE=$c"; done); do
    case $t in
    OPENBLAS_CORETYPE=*)
        echo "test_method_contract with $t"
        out=$(env "$t" "$BUILD/tests/test_method_contract" 2>&1)
        rc=$?
        ;;
    *)
        [ -x "$t" ] || continue
        out=$("$t" 2>&1)
        rc=$?
        ;;
    esac
    printf '%s\n' "$out"
    # A binary may run several groups (the store's: one per back end): add them up.
    p=$(printf '%s\n' "$out" | sed -n 's/.*\[  PASSED  \] \([0-9][0-9]*\) test.*/\1/p' |
        awk '{ s += $1 } END { if (NR) print s }')
    f=$(printf '%s\n' "$out" | sed -n 's/.*\[  FAILED  \] \([0-9][0-9]*\) test.*/\1/p' |
        awk '{ s += $1 } END { if (NR) print s }')
    passed=$((passed + ${p:-0}))
    failed=$((failed + ${f:-0}))
    # A binary that crashed or failed without a cmocka summary still counts as a failure.
    if [ $rc -ne 0 ] && [ -z "$f" ]; then
        failed=$((failed + 1))
        broken="$broken $(basename "$t")"
    fi
done
if [ -n "$pgparent" ]; then # ours: the integration tests do not use it
    stop_pg
    unset GPSERVE_TEST_PG_URL
fi
# The libFuzzer targets (make test builds them in FUZZ_DIR), FUZZ_TEST_SECONDS
# each on their committed corpus: each target one test, a finding a failure.
if [ "${FUZZ_TEST_SECONDS:-0}" != 0 ]; then
    if ! why=$(sh "$HERE/fuzz/have_libfuzzer.sh" "${FUZZ_CC:-clang}" 2>&1); then
        echo "tests/run.sh: fuzz targets skipped: $why"
    else
        targets=""
        for src in "$HERE"/fuzz/fuzz_*.c; do
            targets="$targets $(basename "$src" .c)"
        done
        out=$(sh "$HERE/fuzz/run.sh" "${FUZZ_DIR:-build/fuzz}" "$FUZZ_TEST_SECONDS" $targets 2>&1)
        printf '%s\n' "$out"
        p=$(printf '%s\n' "$out" | grep -c '^fuzz: [a-z_0-9]* ok:')
        f=$(printf '%s\n' "$out" | grep -c '^fuzz: [a-z_0-9]* FAILED')
        passed=$((passed + p))
        failed=$((failed + f))
    fi
fi
if [ -d tests/integration ] && [ -x tests/integration/run.sh ]; then
    out=$(sh tests/integration/run.sh "$BUILD" 2>&1)
    printf '%s\n' "$out"
    p=$(printf '%s\n' "$out" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed.*/\1/p' | tail -n 1)
    f=$(printf '%s\n' "$out" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed.*/\2/p' | tail -n 1)
    passed=$((passed + ${p:-0}))
    failed=$((failed + ${f:-1}))
fi
[ -n "$broken" ] && echo "crashed without a summary:$broken"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
