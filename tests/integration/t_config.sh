#!/bin/sh
# Integration area "config": the README configuration table against --help
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "README configuration table"
# Every flag of `gpserve --help` is in the README's configuration table, with
# its environment variable, and the table names no flag the daemon lacks.
"$BIN" --help >"$T/help.txt" 2>&1
sed -n 's/^[[:space:]]*\(--[a-z][a-z0-9-]*\).*/\1/p' "$T/help.txt" | grep -v -- '^--help$' | sort -u >"$T/help.flags"
sed -n '/^### Configuration/,/^## /p' README.md | grep '^| `--' >"$T/readme.table"
sed 's/^| `\(--[a-z0-9-]*\).*/\1/' "$T/readme.table" | sort -u >"$T/readme.flags"
if [ -s "$T/help.flags" ] && cmp -s "$T/help.flags" "$T/readme.flags"; then
    pass "README configuration table has exactly the flags of --help ($(count_lines <"$T/help.flags"))"
else
    fail "README configuration table has exactly the flags of --help" \
        "only in --help: $(comm -23 "$T/help.flags" "$T/readme.flags" | tr '\n' ' ')only in README: $(comm -13 "$T/help.flags" "$T/readme.flags" | tr '\n' ' ')"
fi
bad=""
baddef=""
while read -r f; do
    env=$(grep -A1 -- "^ *$f " "$T/help.txt" | grep -o 'GPSERVE_[A-Z_]*' | head -n 1)
    dflt=$(grep -A1 -- "^ *$f " "$T/help.txt" | sed -n 's/.*default \([^ ,]*\).*/\1/p' | head -n 1)
    rrow=$(grep -- "^| \`$f[ \`]" "$T/readme.table")
    printf '%s\n' "$rrow" | grep -q "\`$env\`" || bad="$bad $f/$env"
    case $dflt in
    none) printf '%s\n' "$rrow" | grep -q '| none |' || baddef="$baddef $f=none" ;;
    *) printf '%s\n' "$rrow" | awk -F'|' -v d="\`$dflt\`" 'index($4, d) == 0 { exit 1 }' || baddef="$baddef $f=$dflt" ;;
    esac
done <"$T/help.flags"
[ -z "$bad" ]
verdict "README table: each flag's environment variable as in --help" $? "mismatch:$bad"
[ -z "$baddef" ]
verdict "README table: each flag's default as in --help" $? "--help says:$baddef"

section "OpenBLAS core at start-up"
# The daemon logs the OpenBLAS core it runs; on a CPU with AVX2 + FMA where
# the library fell back to an older core (Prescott), it restarts itself once
# with OPENBLAS_CORETYPE (core/base/blas_core.h); the user's
# OPENBLAS_CORETYPE and GPSERVE_BLAS_CORE=off are kept.
core_run() { # core_run NAME [env assignments...]: start, stop; the log in $T/core_NAME.log
    _n=$1
    shift
    env -u OPENBLAS_CORETYPE -u GPSERVE_BLAS_CORE -u GPSERVE_BLAS_CORE_RESTARTED "$@" \
        "$BIN" --bind 127.0.0.1 --port 0 --db "$T/core_$_n.db" >"$T/core_$_n.log" 2>&1 &
    _p=$!
    PIDS="$PIDS $_p"
    i=0
    while [ $i -lt $((STARTUP * 10)) ] && ! grep -q 'gpserve listening' "$T/core_$_n.log"; do
        sleep 0.1
        i=$((i + 1))
    done
    stop_daemon "$_p"
}
core_run user OPENBLAS_CORETYPE=Haswell
grep -q 'gpserve: OpenBLAS core Haswell (OPENBLAS_CORETYPE=Haswell from the environment)' "$T/core_user.log"
verdict "the user's OPENBLAS_CORETYPE is kept and logged" $? "$(grep -i 'openblas\|listening' "$T/core_user.log" | head -n 3)"
core_run off GPSERVE_BLAS_CORE=off
core_run auto
n_core=$(grep -c 'gpserve: OpenBLAS core ' "$T/core_auto.log")
[ "$n_core" = 1 ] && ! grep -q 'set by gpserve' "$T/core_off.log"
verdict "one core line at start-up; GPSERVE_BLAS_CORE=off restarts for no core" $? "$(grep 'OpenBLAS core' "$T/core_auto.log" "$T/core_off.log")"
if grep -q "fallback on this AVX-512 CPU" "$T/core_off.log"; then
    grep -q 'gpserve: OpenBLAS core SkylakeX (OPENBLAS_CORETYPE=SkylakeX set by gpserve: the library chose' "$T/core_auto.log"
    verdict "the fallback core on an AVX-512 CPU is replaced by SkylakeX" $? "$(grep 'OpenBLAS core' "$T/core_auto.log")"
elif grep -q "fallback on this AVX2 CPU" "$T/core_off.log"; then
    grep -q 'gpserve: OpenBLAS core Haswell (OPENBLAS_CORETYPE=Haswell set by gpserve: the library chose' "$T/core_auto.log"
    verdict "the fallback core on an AVX2 CPU is replaced by Haswell" $? "$(grep 'OpenBLAS core' "$T/core_auto.log")"
else
    note "OpenBLAS chose its own core on this CPU: $(grep -o 'OpenBLAS core [^ ]*' "$T/core_off.log")"
fi
