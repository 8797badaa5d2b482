#!/bin/sh
# Exit 0 when CC (default clang) can link a libFuzzer target with ASan and
# UBSan, as `make fuzz` builds them; otherwise say what is missing on stderr
# and exit 1 (make test then skips the fuzz targets with that message).
# Usage: tests/fuzz/have_libfuzzer.sh [CC]
CC=${1:-clang}
if ! command -v "$CC" >/dev/null 2>&1; then
    echo "no $CC (Debian: apt-get install clang libclang-rt-14-dev, or make deps as root)" >&2
    exit 1
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/gpserve-fuzzcheck.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
cat >"$dir/t.c" <<'C'
#include <stddef.h>
#include <stdint.h>
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return size && data[0] == 1; }
C
if ! "$CC" -fsanitize=fuzzer,address,undefined -o "$dir/t" "$dir/t.c" >"$dir/log" 2>&1; then
    echo "$CC cannot link a libFuzzer target (Debian: apt-get install libclang-rt-14-dev, or make deps as root): $(head -n 1 "$dir/log")" >&2
    exit 1
fi
exit 0
