#!/bin/sh
# Run libFuzzer targets for a fixed time each (make fuzz).
# Usage: tests/fuzz/run.sh FUZZ_DIR SECONDS TARGET...
# Each target runs on build/fuzz/corpus/<target> (the seeds of
# tests/fuzz/corpus/<target> copied in; inputs found by earlier runs are kept)
# with -max_len=65536; its output goes to FUZZ_DIR/<target>.log and any crash,
# leak or timeout input to FUZZ_DIR/artifacts/<target>/. Exit status 1 when
# any target found something.
FUZZ_DIR=$1
SECONDS_EACH=$2
shift 2
# One BLAS thread (inputs run one at a time); UBSan findings abort with a stack.
OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export OPENBLAS_NUM_THREADS UBSAN_OPTIONS ASAN_OPTIONS
failed=""
for t in "$@"; do
    bin=$FUZZ_DIR/$t
    corpus=$FUZZ_DIR/corpus/$t
    art=$FUZZ_DIR/artifacts/$t
    log=$FUZZ_DIR/$t.log
    mkdir -p "$corpus" "$art"
    if [ -d "tests/fuzz/corpus/$t" ]; then
        cp tests/fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null
    fi
    echo "fuzz: $t for ${SECONDS_EACH}s (log $log)"
    "$bin" -max_len=65536 -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$art/" "$corpus" >"$log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1)
    if [ $rc -ne 0 ]; then
        failed="$failed $t"
        echo "fuzz: $t FAILED (exit $rc); the report:"
        grep -E '^==[0-9]+==|SUMMARY|runtime error|^fuzz:|^artifact_prefix|Test unit written|^ +#[0-9]+ ' "$log" | head -n 60
        ls "$art"
    else
        echo "fuzz: $t ok: ${runs:-?} runs, ${cov:-cov ?}"
    fi
done
if [ -n "$failed" ]; then
    echo "fuzz: findings in:$failed (artifacts in $FUZZ_DIR/artifacts/)"
    exit 1
fi
echo "fuzz: no findings"
