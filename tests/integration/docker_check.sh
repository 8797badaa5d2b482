#!/bin/sh
# Static checks of docker/Dockerfile and docker/compose.yaml, for machines
# without a Docker engine (run by tests/integration/run.sh; also on its own):
#   - the runtime stage's apt-get line provides every shared library that
#     BUILD_DIR/gpserve needs directly (its NEEDED entries, readelf -d): each
#     library's Debian package (dpkg -S on the resolved file) is listed there,
#     or is part of every Debian base image (libc6 and the other Priority:
#     required packages); the transitive dependencies of the listed packages
#     are apt's business;
#   - every package named in the Dockerfile exists for this Debian release
#     (apt-cache, when it has package lists);
#   - every flag and GPSERVE_* variable the Dockerfile and compose.yaml use is
#     in `gpserve --help`; the image's ports, volume, user and health checks
#     agree with each other;
#   - compose.yaml's profile "scale" (PostgreSQL, the replicas, haproxy) and
#     docker/haproxy.cfg, by compose_check.py (python3 with yaml; haproxy -c).
# Prints "ok   NAME" / "FAIL NAME: why" / "note: ..." lines and ends with
# "N passed, N failed".
# Usage: tests/integration/docker_check.sh BUILD_DIR

BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/../.." && pwd) || exit 1
cd "$ROOT" || exit 1
case $BUILD in /*) BIN=$BUILD/gpserve ;; *) BIN=$ROOT/$BUILD/gpserve ;; esac
DF=docker/Dockerfile
DC=docker/compose.yaml
np=0
nf=0
pass() {
    np=$((np + 1))
    echo "ok   docker: $1"
}
fail() {
    nf=$((nf + 1))
    echo "FAIL docker: $1${2:+: $2}"
}
finish() {
    echo "$np passed, $nf failed"
    [ "$nf" -eq 0 ]
    exit $?
}

for f in "$DF" "$DC"; do
    if [ -f "$f" ]; then pass "$f exists"; else fail "$f exists"; fi
done
[ -f "$DF" ] || finish

# The Dockerfile with continuation lines joined, comments dropped.
joined=$(sed -e '/^[[:space:]]*#/d' "$DF" | awk '{ if (sub(/\\[[:space:]]*$/, "")) { buf = buf $0 " "; next } print buf $0; buf = "" }')
# The final stage: everything after the last FROM.
final=$(printf '%s\n' "$joined" | awk '/^FROM[[:space:]]/ { buf = "" } { buf = buf $0 "\n" } END { printf "%s", buf }')
nstages=$(printf '%s\n' "$joined" | grep -c '^FROM[[:space:]]')
[ "$nstages" -ge 2 ]
if [ $? -eq 0 ]; then pass "multi-stage ($nstages stages)"; else fail "multi-stage" "$nstages FROM lines"; fi
printf '%s\n' "$joined" | grep '^FROM' | grep -qv 'debian:bookworm-slim' &&
    fail "every stage FROM debian:bookworm-slim" "$(printf '%s\n' "$joined" | grep '^FROM' | tr '\n' ';')" ||
    pass "every stage FROM debian:bookworm-slim"

# apt_packages TEXT: the package names of its apt-get install commands.
apt_packages() {
    printf '%s\n' "$1" | grep -o 'apt-get[[:space:]][^&;|]*install[^&;|]*' |
        sed 's/.*install//' | tr ' \t' '\n\n' | grep -v '^-' | grep -v '^$' | sort -u
}
runtime_pkgs=$(apt_packages "$final")
all_pkgs=$(apt_packages "$joined")
if [ -n "$runtime_pkgs" ]; then
    pass "runtime stage installs: $(printf '%s' "$runtime_pkgs" | tr '\n' ' ')"
else
    fail "runtime stage has an apt-get install line"
fi
for p in $runtime_pkgs; do
    case $p in *-dev | build-essential | pkg-config | gcc* | make)
        fail "runtime stage installs no build package" "$p" ;;
    esac
done

# Every named package exists for this release (when apt has package lists).
have_lists=""
for l in /var/lib/apt/lists/*_Packages*; do [ -f "$l" ] && have_lists=yes; done
if command -v apt-cache >/dev/null 2>&1 && [ -n "$have_lists" ]; then
    # One apt-cache call: it prints "NAME:" then "  Candidate: VERSION" for each known package.
    # shellcheck disable=SC2086
    known=$(apt-cache policy $all_pkgs 2>/dev/null | awk '/^[^ ].*:$/ { p = $0; sub(/:$/, "", p) }
        /^  Candidate:/ && $2 != "(none)" { print p }')
    unknown=""
    for p in $all_pkgs; do
        printf '%s\n' "$known" | grep -qx "$p" || unknown="$unknown $p"
    done
    if [ -z "$unknown" ]; then pass "every Dockerfile package is known to apt-cache"; else
        fail "every Dockerfile package is known to apt-cache" "unknown:$unknown"
    fi
else
    echo "note: no apt package lists here (apt-get update): package names not checked"
fi

# ---- libraries of the binary
if [ ! -x "$BIN" ]; then
    fail "binary $BIN" "not built"
elif ! command -v readelf >/dev/null 2>&1 || ! command -v dpkg >/dev/null 2>&1; then
    echo "note: readelf or dpkg missing: library check skipped"
else
    needed=$(readelf -d "$BIN" | sed -n 's/.*(NEEDED).*\[\(.*\)\].*/\1/p')
    ldd_out=$(ldd "$BIN" 2>/dev/null)
    owners=""   # the packages of the binary's direct libraries
    for lib in $needed; do
        case $lib in
        # The sanitizer runtime of `make test SAN=1` binaries: not in the image's build.
        libasan.so* | libubsan.so* | liblsan.so* | libtsan.so*)
            echo "note: $lib is the sanitizer runtime (SAN=1 build): not needed by the image"
            continue
            ;;
        esac
        path=$(printf '%s\n' "$ldd_out" | awk -v l="$lib" '$1 == l && $2 == "=>" { print $3; exit }')
        if [ -z "$path" ] || [ "$path" = "not" ]; then
            fail "library $lib" "ldd cannot resolve it"
            continue
        fi
        # Through symlinks and Debian's alternatives (libopenblas.so.0) to the file.
        real=$(readlink -f "$path")
        owner=$(dpkg -S "$real" 2>/dev/null | head -n 1 | sed 's/:.*//')
        if [ -z "$owner" ]; then
            # dpkg may know the file under the other half of merged /usr.
            alt=$(printf '%s\n' "$real" | sed -e 's#^/usr/lib/#/lib/#;t' -e 's#^/lib/#/usr/lib/#')
            owner=$(dpkg -S "$alt" 2>/dev/null | head -n 1 | sed 's/:.*//')
        fi
        if [ -z "$owner" ]; then
            fail "library $lib" "no Debian package owns $real"
            continue
        fi
        owners="$owners $owner"
        # Covered when listed; libopenblas.so.0 comes from any of libopenblas0-pthread,
        # -openmp, -serial (or the libopenblas0 package that picks one).
        covered=""
        for p in $runtime_pkgs; do
            [ "$p" = "$owner" ] && covered=listed
            case $owner in libopenblas0-*) case $p in libopenblas0 | libopenblas0-*) covered=listed ;; esac ;; esac
        done
        if [ -z "$covered" ]; then
            prio=$(dpkg-query -W -f='${Priority}' "$owner" 2>/dev/null)
            case $owner in libc6 | libgcc-s1) prio=required ;; esac
            [ "$prio" = required ] && covered=base
        fi
        case $covered in
        listed) pass "library $lib <- $owner (listed in the runtime stage)" ;;
        base) pass "library $lib <- $owner (in every Debian base image, Priority: required)" ;;
        *) fail "library $lib" "its package $owner ($real) is not in the runtime apt-get line" ;;
        esac
    done
    # A listed package that provides none of the direct libraries (curl is for the HEALTHCHECK).
    for p in $runtime_pkgs; do
        [ "$p" = curl ] && continue
        used=""
        for o in $owners; do
            [ "$o" = "$p" ] && used=yes
            case $p in libopenblas0*) case $o in libopenblas0*) used=yes ;; esac ;; esac
        done
        [ -n "$used" ] || echo "note: runtime package $p provides none of the binary's direct libraries"
    done
fi

# ---- flags and variables against --help
if [ -x "$BIN" ]; then
    help=$("$BIN" --help 2>&1)
    rc=$?
    if [ $rc -eq 0 ]; then pass "gpserve --help exits 0"; else fail "gpserve --help exits 0" "exit $rc"; fi
    flags=$( {
        printf '%s\n' "$final" | grep -E '^(ENTRYPOINT|CMD)' | grep -o '"--[a-z][a-z0-9-]*'
        [ -f "$DC" ] && grep -E '^[[:space:]]*(command|entrypoint):' "$DC" | grep -o '"\{0,1\}--[a-z][a-z0-9-]*'
    } | tr -d '"' | sort -u)
    [ -n "$flags" ] || fail "flags found in ENTRYPOINT/CMD and compose command"
    for f in $flags; do
        if printf '%s\n' "$help" | grep -q -- "${f}[ =]"; then pass "flag $f is in --help"; else
            fail "flag $f is in --help" "not there"
        fi
    done
    vars=$( {
        grep -o 'GPSERVE_[A-Z_]*' "$DF"
        [ -f "$DC" ] && grep -o 'GPSERVE_[A-Z_]*' "$DC"
    } | sort -u)
    for v in $vars; do
        if printf '%s\n' "$help" | grep -q "$v"; then pass "variable $v is in --help"; else
            fail "variable $v is in --help" "not there"
        fi
    done
fi

# ---- the build stage copies every source folder that `make build/gpserve` compiles
if command -v make >/dev/null 2>&1; then
    srcdirs=$(make -B -n build/gpserve 2>/dev/null | grep -o ' -c [^ ]*' | awk '{ print $2 }' |
        sed 's#/[^/]*$##' | grep -v '^build/' | sort -u) # build/gen: generated by make itself
    copied=$(printf '%s\n' "$joined" | awk '/^FROM[[:space:]]/ { n++ } n == 1 && /^COPY[[:space:]]/ && !/--from/ {
        for (i = 2; i < NF; i++) print $i }' | sed 's#^\./##; s#/$##')
    if [ -z "$srcdirs" ]; then
        echo "note: make -B -n build/gpserve listed no sources: COPY coverage not checked"
    else
        missing=""
        for d in $srcdirs; do
            ok=""
            for c in $copied; do
                case $c in . ) ok=yes ;; esac
                case "$d/" in "$c"/*) ok=yes ;; esac
            done
            [ -n "$ok" ] || missing="$missing $d"
        done
        if [ -z "$missing" ]; then pass "build stage COPYs every source folder of build/gpserve ($(echo $srcdirs))"; else
            fail "build stage COPYs every source folder of build/gpserve" "not copied:$missing"
        fi
    fi
    printf '%s\n' "$copied" | grep -qx Makefile
    if [ $? -eq 0 ]; then pass "build stage COPYs the Makefile"; else fail "build stage COPYs the Makefile"; fi
fi

# ---- consistency of the image
chk() { # NAME PATTERN TEXT: TEXT has a line matching the grep -E PATTERN
    if printf '%s\n' "$3" | grep -Eq "$2"; then pass "$1"; else fail "$1" "no line matching /$2/"; fi
}
chk "ENTRYPOINT is /usr/local/bin/gpserve" '^ENTRYPOINT \["/usr/local/bin/gpserve"\]' "$final"
chk "COPY of the binary from the build stage" '^COPY --from=[a-z]+ .*/gpserve /usr/local/bin/gpserve' "$final"
chk "build stage runs make build/gpserve" '^RUN .*make( -j[^ ]*)? build/gpserve' "$joined"
chk "non-root USER gpserve" '^USER gpserve' "$final"
chk "VOLUME /data" '^VOLUME \[?"?/data' "$final"
chk "EXPOSE 8080" '^EXPOSE 8080' "$final"
chk "HEALTHCHECK curl /healthz on 8080" '^HEALTHCHECK .*curl -fsS http://127.0.0.1:8080/healthz' "$final"
chk "CMD listens on 0.0.0.0:8080" '^CMD .*"--bind", *"0.0.0.0", *"--port", *"8080"' "$final"
for e in GPSERVE_DB=/data/gpserve.db GPSERVE_BIND=0.0.0.0 GPSERVE_PORT=8080 OPENBLAS_THREAD_TIMEOUT=16; do
    chk "ENV $e" "^ENV .*$e" "$final"
done
printf '%s\n' "$runtime_pkgs" | grep -qx curl
if [ $? -eq 0 ]; then pass "curl installed for the HEALTHCHECK"; else fail "curl installed for the HEALTHCHECK"; fi
if [ -f "$DC" ]; then
    dc=$(cat "$DC")
    chk "compose: service gpserve" '^  gpserve:' "$dc"
    chk "compose: builds docker/Dockerfile" 'dockerfile: docker/Dockerfile' "$dc"
    chk "compose: port 8080:8080" '"?8080:8080"?' "$dc"
    chk "compose: named volume on /data" '^ *- *[A-Za-z0-9_-]+:/data' "$dc"
    chk "compose: healthcheck on /healthz" 'test:.*/healthz' "$dc"
    vol=$(printf '%s\n' "$dc" | sed -n 's/^ *- *\([A-Za-z0-9_-]*\):\/data.*/\1/p' | head -n 1)
    chk "compose: volume $vol declared" "^  $vol:" "$(printf '%s\n' "$dc" | sed -n '/^volumes:/,$p')"
    # No tabs (YAML forbids them for indentation).
    if grep -q "$(printf '\t')" "$DC"; then fail "compose.yaml has no tabs"; else pass "compose.yaml has no tabs"; fi
fi

# ---- the profile "scale" and docker/haproxy.cfg (structure, in Python with its yaml module)
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
if [ -z "$PY" ]; then
    echo "note: no python3: the profile scale and haproxy.cfg not checked"
else
    cc_out=$(mktemp "${TMPDIR:-/tmp}/compose_check.XXXXXX")
    "$PY" tests/integration/compose_check.py "$ROOT" "$BIN" >"$cc_out" 2>&1
    grep -E '^(ok |FAIL|note)' "$cc_out"
    np=$((np + $(grep -c '^ok ' "$cc_out")))
    nf=$((nf + $(grep -c '^FAIL' "$cc_out")))
    grep -Eq '^[0-9]+ passed, [0-9]+ failed$' "$cc_out" ||
        fail "compose_check.py ran" "$(tail -n 3 "$cc_out")"
    rm -f "$cc_out"
fi
finish
