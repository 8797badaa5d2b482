#!/bin/sh
# Run every test binary of a build and finish with the line "N passed, N failed".
# Usage: tests/run.sh BUILD_DIR
BUILD=${1:-build}
passed=0
failed=0
broken=""
for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    out=$("$t" 2>&1)
    rc=$?
    printf '%s\n' "$out"
    p=$(printf '%s\n' "$out" | sed -n 's/.*\[  PASSED  \] \([0-9][0-9]*\) test.*/\1/p' | tail -n 1)
    f=$(printf '%s\n' "$out" | sed -n 's/.*\[  FAILED  \] \([0-9][0-9]*\) test.*/\1/p' | tail -n 1)
    passed=$((passed + ${p:-0}))
    failed=$((failed + ${f:-0}))
    # A binary that crashed or failed without a cmocka summary still counts as a failure.
    if [ $rc -ne 0 ] && [ -z "$f" ]; then
        failed=$((failed + 1))
        broken="$broken $(basename "$t")"
    fi
done
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
