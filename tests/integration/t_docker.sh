#!/bin/sh
# Integration area "docker": docker_check.sh (the Docker files, without Docker)
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "Docker files"
if [ -f "$ROOT/tests/integration/docker_check.sh" ]; then
    sh "$ROOT/tests/integration/docker_check.sh" "$BUILD" >"$T/docker.out" 2>&1
    grep -E '^(ok |FAIL|note)' "$T/docker.out"
    sed -n 's/^ok .*/PASS/p; s/^FAIL.*/FAIL/p' "$T/docker.out" >>"$RESULTS"
    grep -Eq '^(ok |FAIL)' "$T/docker.out" || fail "docker_check.sh ran" "$(tail -n 3 "$T/docker.out")"
fi
