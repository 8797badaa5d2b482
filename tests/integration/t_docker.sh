#!/bin/sh
# Integration area "docker": docker_check.sh (the Docker files against the
# binary, without an engine), then docker_smoke.sh (the image built with podman
# and its root file system run as its user: health, fit, predict, restart on
# the same volume). The smoke test prints one "skipped: ..." line instead when
# it cannot run here (not root, podman or mmdebstrap not installable, no
# Debian mirror, GPSERVE_TEST_DOCKER=0, a sanitizer build); that line is shown
# and counts neither way.
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

# docker_script NAME FILE: run FILE with the build directory, show its ok, FAIL,
# note and skipped lines (and the indented details under them), count ok and FAIL.
docker_script() {
    sh "$2" "$BUILD" >"$T/$1.out" 2>&1
    grep -E '^(ok |FAIL|note|skipped|     \|)' "$T/$1.out"
    sed -n 's/^ok .*/PASS/p; s/^FAIL.*/FAIL/p' "$T/$1.out" >>"$RESULTS"
    grep -Eq '^(ok |FAIL|skipped)' "$T/$1.out" || fail "$1 ran" "$(tail -n 3 "$T/$1.out")"
}

section "Docker files"
if [ -f "$ROOT/tests/integration/docker_check.sh" ]; then
    docker_script docker_check "$ROOT/tests/integration/docker_check.sh"
fi

section "Docker image: built with podman, its root file system run (docker_smoke.sh)"
if [ -f "$ROOT/tests/integration/docker_smoke.sh" ]; then
    docker_script docker_smoke "$ROOT/tests/integration/docker_smoke.sh"
fi
