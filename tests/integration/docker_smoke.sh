#!/bin/sh
# The container image, built and run (run by t_docker.sh, so by `make test`;
# also on its own). As root, with podman and mmdebstrap (installed with apt-get
# when missing):
#   1. a minimal Debian root file system for each FROM image of docker/Dockerfile
#      (debian:SUITE-slim, or debian:SUITE), made by mmdebstrap from the Debian
#      mirror configured in /etc/apt/sources.list(.d), shaped like the official
#      slim image (no docs, man pages or locales; apt's docker-clean), and
#      imported under that name into a podman store of BUILD_DIR/container;
#   2. podman build --format docker --isolation=chroot -f docker/Dockerfile
#      (the docker format keeps the HEALTHCHECK, which OCI images drop); the
#      image's configuration is checked with podman image inspect;
#   3. the image's root file system (podman export) runs the image's own
#      command (Entrypoint + Cmd) with its Env and WorkingDir, as its USER
#      (chroot --userspec), with a data directory of the user's on its VOLUME
#      /data, in a network and mount namespace of its own (unshare): only
#      loopback, so the default 0.0.0.0:8080 is used unchanged and free, and
#      every mount (proc, sys, a /dev of the usual devices, the volume)
#      vanishes with the namespace. Checked: the daemon's uid, the image's
#      HEALTHCHECK command run inside the image, /healthz, the README's exact
#      fit, a predict, SIGTERM (exit 0), a restart on the same /data with
#      docker/compose.yaml's command and environment (the model is there and
#      predicts byte-identically), SIGTERM again, no 5xx logged.
# podman run is not used: crun cannot set the container's rlimits and cgroups
# on machines like CI's (setrlimit RLIMIT_NOFILE refused; cgroups hybrid mode).
#
# Prints "ok   docker image: ..." / "FAIL docker image: ..." / "note: ..." lines,
# or one "skipped: docker image: WHY" line when it cannot run here (not root,
# tools not installable, no Debian mirror configured, no namespaces, the base
# file system cannot be made, GPSERVE_TEST_DOCKER=0, a sanitizer build dir),
# and ends with "N passed, N failed"; exit 0 unless something failed.
# Files: BUILD_DIR/container/ (the podman store, logs, the cached base
# tarballs base-SUITE-KEY.tar, remade after 7 days or when the mirror
# configuration changes). Every step is bounded by timeout(1).
# Usage: tests/integration/docker_smoke.sh BUILD_DIR
#        (docker_smoke.sh --inside DIR is its own run phase, in the namespaces)

ROOT=$(cd "$(dirname "$0")/../.." && pwd) || exit 1
SELF=$ROOT/tests/integration/docker_smoke.sh
np=0
nf=0
pass() {
    np=$((np + 1))
    echo "ok   docker image: $1"
}
fail() {
    nf=$((nf + 1))
    echo "FAIL docker image: $1${2:+: $2}"
}
note() { echo "note: docker image: $*"; }
finish() {
    # The run phase's lines are counted by the build phase, which prints the summary.
    [ -n "$INSIDE" ] || echo "$np passed, $nf failed"
    [ "$nf" -eq 0 ]
    exit $?
}
skip() {
    echo "skipped: docker image: $*"
    finish
}
# tail_of FILE: its last lines, indented (what a failure shows).
tail_of() {
    tail -n "${2:-8}" "$1" 2>/dev/null | sed 's/^/     | /'
}
# alive PID: the process exists and is not a zombie.
alive() {
    st=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)
    [ -n "$st" ] && [ "$st" != Z ]
}

# ============================================================ run phase
# In a new network and mount namespace (unshare --net --mount, propagation
# private): nothing mounted here is seen outside, and it all goes with the
# namespace. $1 is the work directory with rootfs/, data/ and run.env.
inside() {
    W=$1
    R=$W/rootfs
    # shellcheck disable=SC1091
    . "$W/run.env" || exit 1
    DPID=""
    trap 'inside_cleanup' EXIT
    trap 'exit 130' INT TERM HUP
    if ! ip link set lo up 2>"$W/ip.err"; then
        fail "loopback up in the test's network namespace" "$(cat "$W/ip.err")"
        finish
    fi
    # What a container runtime gives the process: /proc, a read-only /sys, a
    # /dev with the usual devices and /dev/shm, and the volume.
    mnt_ok=yes
    mount -t proc -o nosuid,nodev,noexec proc "$R/proc" || mnt_ok=""
    mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$R/sys" || note "sysfs not mounted"
    if mount -t tmpfs -o nosuid,mode=755,size=64k tmpfs "$R/dev"; then
        for d in "null 1 3" "zero 1 5" "full 1 7" "random 1 8" "urandom 1 9" "tty 5 0"; do
            # shellcheck disable=SC2086
            set -- $d
            mknod -m 666 "$R/dev/$1" c "$2" "$3" || mnt_ok=""
        done
        mkdir -p "$R/dev/shm" "$R/dev/pts"
        mount -t tmpfs -o nosuid,nodev,mode=1777 shm "$R/dev/shm" || mnt_ok=""
        ln -s /proc/self/fd "$R/dev/fd"
        ln -s /proc/self/fd/0 "$R/dev/stdin"
        ln -s /proc/self/fd/1 "$R/dev/stdout"
        ln -s /proc/self/fd/2 "$R/dev/stderr"
    else
        mnt_ok=""
    fi
    mkdir -p "$R$SMOKE_VOLUME"
    mount --bind "$W/data" "$R$SMOKE_VOLUME" || mnt_ok=""
    if [ -z "$mnt_ok" ]; then
        fail "mounts of the image's root file system (proc, dev, $SMOKE_VOLUME)"
        finish
    fi

    BASE=http://127.0.0.1:$SMOKE_PORT
    FIT='{"name": "demo", "method": "exact", "kernel": {"type": "rbf", "ard": true}, "seed": 42,
  "X": [[0.0], [0.5], [1.0], [1.5], [2.0], [2.5], [3.0], [3.5], [4.0], [4.5], [5.0]],
  "y": [0.02, 0.47, 0.86, 0.99, 0.90, 0.61, 0.13, -0.36, -0.74, -0.98, -0.95]}'
    PRED='{"X": [[0.25], [2.75]]}'

    # ---- first start
    if start_image 1; then
        check_process
        check_healthcheck
        req GET /healthz 1
        if [ "$ST" = 200 ] && jq -e '.status == "ok"' "$W/body1" >/dev/null 2>&1; then
            pass "GET /healthz: 200 {\"status\":\"ok\"}"
        else
            fail "GET /healthz" "status $ST: $(head -c 200 "$W/body1")"
        fi
        req POST /v1/models 2 -H 'Content-Type: application/json' --data-binary "$FIT"
        if [ "$ST" = 201 ] && jq -e '.name == "demo"' "$W/body2" >/dev/null 2>&1; then
            pass "exact fit of the README's demo (POST /v1/models): 201"
        else
            fail "exact fit of the README's demo (POST /v1/models)" "status $ST: $(head -c 300 "$W/body2")"
        fi
        req POST /v1/models/demo/predict 3 -H 'Content-Type: application/json' --data-binary "$PRED"
        # sin(0.25) = 0.247, sin(2.75) = 0.382: the demo's data are sin(x) to 0.02.
        if [ "$ST" = 200 ] && jq -e '(.mean | length) == 2 and ((.mean[0] - 0.247) | fabs) < 0.15
                and ((.mean[1] - 0.382) | fabs) < 0.15 and all(.variance[]; . > 0)' "$W/body3" >/dev/null 2>&1; then
            pass "predict: 200, means $(jq -c '.mean' "$W/body3") near sin x, variances > 0"
        else
            fail "predict" "status $ST: $(head -c 300 "$W/body3")"
        fi
        # The browser view is embedded in the image's binary, byte for byte web/.
        req GET /ui/app.js 4
        if [ "$ST" = 200 ] && cmp -s "$W/body4" "$ROOT/web/app.js"; then
            pass "GET /ui/app.js: 200, the browser view's web/app.js byte for byte"
        else
            fail "GET /ui/app.js" "status $ST, $(wc -c <"$W/body4") bytes"
        fi
        stop_image "first daemon"
        db=${SMOKE_DB:-}
        if [ -n "$db" ] && [ -s "$W/data/${db#"$SMOKE_VOLUME"/}" ]; then
            owner=$(stat -c %u "$W/data/${db#"$SMOKE_VOLUME"/}")
            if [ "$owner" = "$SMOKE_UID" ]; then
                pass "the database $db is on the volume, owned by uid $owner"
            else
                fail "the database $db is owned by the image user" "uid $owner, expected $SMOKE_UID"
            fi
        else
            fail "the database is on the volume" "no file ${db:-(GPSERVE_DB unset)} under $SMOKE_VOLUME: $(ls "$W/data")"
        fi
    fi

    # ---- restart on the same volume
    if start_image 2; then
        req GET /v1/models/demo 4
        if [ "$ST" = 200 ]; then pass "restart on the same volume: the model demo is there"; else
            fail "restart on the same volume: the model demo is there" "status $ST: $(head -c 200 "$W/body4")"
        fi
        req POST /v1/models/demo/predict 5 -H 'Content-Type: application/json' --data-binary "$PRED"
        if [ "$ST" = 200 ] && cmp -s "$W/body3" "$W/body5"; then
            pass "after the restart the predict answer is byte-identical"
        else
            fail "after the restart the predict answer is byte-identical" "status $ST: $(head -c 300 "$W/body5")"
        fi
        check_healthcheck
        stop_image "restarted daemon"
    fi
    if grep -Eq ' 5[0-9][0-9] ' "$W"/daemon*.log; then
        fail "no 5xx answer logged" "$(grep -E ' 5[0-9][0-9] ' "$W"/daemon*.log | head -n 3)"
    else
        pass "no 5xx answer logged"
    fi
    finish
}

# inside_cleanup: SIGTERM, then SIGKILL after 10 s, to every process left in
# the image's root (the daemon, a health check); the mounts go with the namespace.
inside_cleanup() {
    rr=$(readlink -f "$R")
    left=""
    for d in /proc/[0-9]*; do
        [ "$(readlink -f "$d/root" 2>/dev/null)" = "$rr" ] && left="$left ${d#/proc/}"
    done
    [ -n "$left" ] || return 0
    # shellcheck disable=SC2086
    kill -TERM $left 2>/dev/null
    i=0
    while [ $i -lt 100 ]; do
        alive_any=""
        for p in $left; do alive "$p" && alive_any=yes; done
        [ -n "$alive_any" ] || return 0
        sleep 0.1
        i=$((i + 1))
    done
    # shellcheck disable=SC2086
    kill -KILL $left 2>/dev/null
}

# req METHOD PATH N [curl args]: one request; ST is the status, the body in $W/bodyN.
req() {
    _m=$1
    _p=$2
    _n=$3
    shift 3
    ST=$(curl -sS --max-time 60 -o "$W/body$_n" -w '%{http_code}' -X "$_m" "$@" "$BASE$_p" 2>"$W/curl.err")
    [ -n "$ST" ] || ST=000
    [ -f "$W/body$_n" ] || : >"$W/body$_n"
}

# start_image N: the image's command with the image's environment and working
# directory, as the image's user, in the background (chroot execs env, which
# execs the command: DPID is the daemon); waits (at most 30 s) for its
# "listening" line.
start_image() {
    N=$1
    LOG=$W/daemon$N.log
    : >"$LOG"
    if [ "$N" = 1 ]; then eval "set -- $SMOKE_ENV $SMOKE_CMD"; HOW="the image's command ($SMOKE_CMD_TEXT)"; else
        eval "set -- $SMOKE_ENV2 $SMOKE_CMD2"
        HOW=$SMOKE_HOW2
    fi
    chroot --userspec="$SMOKE_UID:$SMOKE_GID" --groups="$SMOKE_GROUPS" "$R" \
        /usr/bin/env -i -C "$SMOKE_WORKDIR" "$@" >>"$LOG" 2>&1 &
    DPID=$!
    i=0
    LISTEN=""
    while [ $i -lt 300 ]; do
        LISTEN=$(sed -n 's/.*gpserve listening on \([^ ]*\).*/\1/p' "$LOG" | head -n 1)
        [ -n "$LISTEN" ] && break
        alive "$DPID" || break
        sleep 0.1
        i=$((i + 1))
    done
    if [ -z "$LISTEN" ]; then
        if alive "$DPID"; then why="no 'gpserve listening on' line within 30 s"; else
            wait "$DPID"
            why="it exited ($?) without a 'gpserve listening on' line"
        fi
        fail "start $N: $HOW" "$why"
        tail_of "$LOG" 20
        return 1
    fi
    if [ "$LISTEN" = "$SMOKE_LISTEN" ]; then
        pass "start $N: $HOW listens on $LISTEN"
    else
        fail "start $N: $HOW listens on $SMOKE_LISTEN" "it says $LISTEN"
    fi
    return 0
}

# check_process: the daemon runs as the image user, inside the image's root.
check_process() {
    uids=$(awk '/^Uid:/ { print $2, $3, $4, $5 }' "/proc/$DPID/status")
    gids=$(awk '/^Gid:/ { print $2, $3, $4, $5 }' "/proc/$DPID/status")
    root=$(readlink -f "/proc/$DPID/root")
    want="$SMOKE_UID $SMOKE_UID $SMOKE_UID $SMOKE_UID"
    wantg="$SMOKE_GID $SMOKE_GID $SMOKE_GID $SMOKE_GID"
    if [ "$uids" = "$want" ] && [ "$gids" = "$wantg" ] && [ "$SMOKE_UID" != 0 ] && [ "$root" = "$(readlink -f "$R")" ]; then
        pass "the daemon runs as $SMOKE_USER (uid $SMOKE_UID, gid $SMOKE_GID), not root, in the image's root"
    else
        fail "the daemon runs as $SMOKE_USER (uid $SMOKE_UID)" "uids '$uids', gids '$gids', root $root"
    fi
}

# check_healthcheck: the image's HEALTHCHECK command, run in the image as its user.
# shellcheck disable=SC2120 # its arguments are set from SMOKE_HEALTH
check_healthcheck() {
    eval "set -- $SMOKE_HEALTH"
    case $1 in
    CMD-SHELL)
        shift
        timeout 10 chroot --userspec="$SMOKE_UID:$SMOKE_GID" --groups="$SMOKE_GROUPS" "$R" \
            /usr/bin/env -i -C "$SMOKE_WORKDIR" PATH="$SMOKE_PATH" /bin/sh -c "$1" >"$W/health.out" 2>&1
        rc=$?
        ;;
    CMD)
        shift
        timeout 10 chroot --userspec="$SMOKE_UID:$SMOKE_GID" --groups="$SMOKE_GROUPS" "$R" \
            /usr/bin/env -i -C "$SMOKE_WORKDIR" PATH="$SMOKE_PATH" "$@" >"$W/health.out" 2>&1
        rc=$?
        ;;
    *) rc="none (no HEALTHCHECK in the image)" ;;
    esac
    if [ "$rc" = 0 ]; then
        pass "the image's HEALTHCHECK command, run inside the image, exits 0"
    else
        fail "the image's HEALTHCHECK command, run inside the image" "exit $rc: $(head -c 200 "$W/health.out" 2>/dev/null)"
    fi
}

# stop_image WHAT: SIGTERM, wait at most 30 s; passes when the exit code is 0.
stop_image() {
    kill -TERM "$DPID" 2>/dev/null
    i=0
    while alive "$DPID" && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
    if alive "$DPID"; then
        kill -KILL "$DPID" 2>/dev/null
        wait "$DPID" 2>/dev/null
        fail "SIGTERM stops the $1" "still running after 30 s (killed)"
    else
        wait "$DPID"
        rc=$?
        if [ $rc -eq 0 ]; then pass "SIGTERM stops the $1 with exit 0 ($((i / 10)) s)"; else
            fail "SIGTERM stops the $1 with exit 0" "exit $rc"
            tail_of "$LOG"
        fi
    fi
    DPID=""
}

INSIDE=""
if [ "${1:-}" = --inside ]; then
    INSIDE=yes
    inside "$2"
    exit 1
fi

# ============================================================ build phase
T_START=$(date +%s)
BUILD=${1:-build}
case $BUILD in /*) W=$BUILD/container ;; *) W=$ROOT/$BUILD/container ;; esac
cd "$ROOT" || exit 1
DF=docker/Dockerfile

[ "${GPSERVE_TEST_DOCKER:-1}" = 0 ] && skip "GPSERVE_TEST_DOCKER=0"
case $BUILD in *san*) skip "a sanitizer build directory ($BUILD): the image builds its own binary; the plain build's make test runs this" ;; esac
[ -f "$DF" ] || skip "no $DF"
[ "$(id -u)" = 0 ] || skip "needs root (mmdebstrap, podman's store, chroot, namespaces); run as root: sh $0 $BUILD"
command -v apt-get >/dev/null 2>&1 || skip "no apt-get: not a Debian machine"
mkdir -p "$W" || skip "cannot create $W"

# ---- tools
missing=""
for t in podman:podman mmdebstrap:mmdebstrap ip:iproute2 unshare:util-linux chroot:coreutils \
    timeout:coreutils flock:util-linux curl:curl jq:jq tar:tar; do
    command -v "${t%%:*}" >/dev/null 2>&1 || missing="$missing ${t#*:}"
done
if [ -n "$missing" ]; then
    note "installing$missing with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    if ! timeout 600 apt-get update -qq >"$W/apt.log" 2>&1 ||
        ! timeout 900 apt-get install -y -qq --no-install-recommends $missing >>"$W/apt.log" 2>&1; then
        skip "cannot install$missing with apt-get: $(tail -n 2 "$W/apt.log" | tr '\n' ' ')"
    fi
fi

# One run at a time on this work directory (bounded wait).
exec 9>"$W/lock"
flock -w 1800 9 || skip "another run holds $W/lock for 30 minutes"
unshare --net --mount true 2>/dev/null || skip "cannot make network and mount namespaces here (unshare --net --mount)"

# ---- cleanup on every exit path: the podman store (its mounts, then the
# store itself: about 1 GB of images), the exported root file system, the
# temporary files. The base tarballs and the logs stay.
POD=""
umount_under() { # every mount below $1, deepest first
    awk -v p="$1/" 'index($2, p) == 1 { print $2 }' /proc/self/mounts | sort -r | while read -r m; do
        umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
    done
}
cleanup() {
    if [ -n "$POD" ]; then
        timeout 120 $POD rm -a -f -v >/dev/null 2>&1
        timeout 300 $POD rmi -a -f >/dev/null 2>&1
    fi
    umount_under "$W"
    rm -rf "$W/rootfs" "$W/tmp" "$W"/store-* "$W/runroot"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
cleanup # what a run that was killed left
rm -rf "$W/data"
mkdir -p "$W/tmp"
export TMPDIR="$W/tmp"

# ---- a podman store of this run's own, in the build directory: overlay, or
# vfs where the kernel's overlay cannot be used (slower: a full copy a layer).
for driver in overlay vfs; do
    rm -rf "$W"/store-* "$W/runroot"
    POD="podman --root $W/store-$driver --runroot $W/runroot --storage-driver $driver --events-backend none --cgroup-manager cgroupfs"
    timeout 120 $POD info >"$W/podman-info.log" 2>&1 && break
    [ $driver = vfs ] && skip "podman cannot open a store here: $(tail -n 2 "$W/podman-info.log" | tr '\n' ' ')"
    note "podman's $driver driver does not work here ($(tail -n 1 "$W/podman-info.log"))"
done

# ---- the base images the Dockerfile names
# FROM lines: IMAGE [AS NAME]; a FROM of an earlier stage's name is not a base.
bases=$(awk 'toupper($1) == "FROM" {
        i = 2; while ($i ~ /^--/) i++
        img = $i; if (!(img in stage)) print img
        if (toupper($(i + 1)) == "AS") stage[$(i + 2)] = 1 }' "$DF" | sort -u)
[ -n "$bases" ] || skip "no FROM line in $DF"
host_codename=$(. /etc/os-release 2>/dev/null && echo "$VERSION_CODENAME")
[ -n "$host_codename" ] || skip "no VERSION_CODENAME in /etc/os-release"

# apt_entries: "URI SUITE COMPONENTS..." of every enabled deb entry of the host's
# apt configuration (one-line .list files and deb822 .sources files).
apt_entries() {
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        sed -e 's/#.*//' -e 's/\[[^]]*\]//' "$f" | awk '$1 == "deb" && NF >= 3 {
            line = $2; for (i = 3; i <= NF; i++) line = line " " $i; print line }'
    done
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk 'function flush() {
                if (types ~ /(^| )deb( |$)/ && tolower(enabled) != "no")
                    for (u = 1; u <= nu; u++) for (s = 1; s <= ns; s++) print uri[u], suite[s], comps
                types = ""; enabled = ""; comps = ""; nu = 0; ns = 0; field = "" }
            /^[[:space:]]*#/ { next }
            /^[[:space:]]*$/ { flush(); next }
            /^[[:space:]]/ { next }        # a continuation line (Signed-By key blocks)
            {
                field = tolower($1); sub(/:$/, "", field); val = $0; sub(/^[^:]*:[[:space:]]*/, "", val)
                if (field == "types") types = val
                else if (field == "enabled") enabled = val
                else if (field == "components") comps = val
                else if (field == "uris") nu = split(val, uri, /[[:space:]]+/)
                else if (field == "suites") ns = split(val, suite, /[[:space:]]+/)
            }
            END { flush() }' "$f"
    done
}
entries=$(apt_entries)

made=""
for img in $bases; do
    name=${img#docker.io/}
    name=${name#library/}
    case $name in
    debian:*-slim) suite=${name#debian:}; suite=${suite%-slim} ;;
    debian:*) suite=${name#debian:} ;;
    *) skip "FROM $img: only debian:SUITE[-slim] bases can be made from the Debian mirror" ;;
    esac
    case $suite in *[!a-z]* | "") skip "FROM $img: not a Debian release name" ;; esac
    # The host's entries for its own release, its updates and security suites,
    # turned to the image's release.
    sources=$(printf '%s\n' "$entries" | awk -v h="$host_codename" -v s="$suite" 'NF >= 3 {
        if ($2 == h) $2 = s; else if ($2 == h "-updates") $2 = s "-updates";
        else if ($2 == h "-security" || $2 == h "/updates") $2 = s "-security"; else next
        print "deb " $0 }' | sort -u)
    [ -n "$sources" ] || skip "no Debian mirror for $host_codename in /etc/apt/sources.list(.d)"
    printf '%s\n' "$sources" >"$W/sources-$suite.list"
    # apt's configuration of the official images: no .debs or caches kept.
    cat >"$W/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
Acquire::Languages "none";
EOF
    set -- --mode=root --variant=minbase --format=tar \
        --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
        --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
        --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/lintian/*' \
        --customize-hook='cp "$SMOKE_APT_CLEAN" "$1/etc/apt/apt.conf.d/docker-clean"' \
        --customize-hook='rm -f "$1"/var/cache/apt/*.bin'
    # Merged /usr by directory symlinks, as debootstrap (so the official images)
    # makes it, rather than by the usrmerge package and the perl it needs.
    hooks=/usr/share/mmdebstrap/hooks/merged-usr
    [ -d "$hooks" ] && set -- "$@" --hook-dir="$hooks"
    key=$( {
        echo "$*"
        cat "$W/sources-$suite.list" "$W/docker-clean"
    } | cksum | awk '{ print $1 }')
    tarball=$W/base-$suite-$key.tar
    if [ -s "$tarball" ] && [ -n "$(find "$tarball" -mtime -7 2>/dev/null)" ]; then
        note "base $suite: cached $tarball (remade after 7 days)"
    else
        rm -f "$W"/base-"$suite"-*.tar
        t0=$(date +%s)
        SMOKE_APT_CLEAN=$W/docker-clean timeout 900 mmdebstrap "$@" "$suite" "$tarball.part" \
            "$W/sources-$suite.list" >"$W/mmdebstrap-$suite.log" 2>&1
        rc=$?
        if [ $rc -ne 0 ] || [ ! -s "$tarball.part" ]; then
            rm -f "$tarball.part"
            tail_of "$W/mmdebstrap-$suite.log" 5
            skip "mmdebstrap cannot make the $suite base from $(awk '{ print $2 }' "$W/sources-$suite.list" | sort -u | tr '\n' ' ')(exit $rc; $W/mmdebstrap-$suite.log)"
        fi
        mv "$tarball.part" "$tarball"
        note "base $suite: made by mmdebstrap in $(($(date +%s) - t0)) s from $(awk '{ print $2 " " $3 }' "$W/sources-$suite.list" | tr '\n' ';')"
    fi
    if ! timeout 300 $POD import --change 'CMD ["bash"]' "$tarball" "docker.io/library/$name" >"$W/import.log" 2>&1; then
        skip "podman import of the $suite base fails here: $(tail -n 2 "$W/import.log" | tr '\n' ' ')"
    fi
    made="$made $name"
done
pass "base images$made made from the configured Debian mirror and imported"

# ---- the build
t0=$(date +%s)
timeout 1800 $POD build --pull=never --format docker --isolation=chroot -f "$DF" -t localhost/gpserve . \
    >"$W/build.log" 2>&1
rc=$?
BUILD_SECS=$(($(date +%s) - t0))
# The mirror out of reach from the build's apt-get is this machine's state, not the image's.
# (apt-get update only warns then, and the install cannot locate the packages.)
if [ $rc -ne 0 ] &&
    grep -Eq 'Temporary failure resolving|Could not resolve|Could not connect to|Unable to connect to|Connection timed out' "$W/build.log"; then
    tail_of "$W/build.log" 5
    skip "the build's apt-get cannot reach the Debian mirror ($W/build.log)"
fi
if [ $rc -ne 0 ]; then
    fail "podman build --format docker --isolation=chroot -f $DF" "exit $rc after $BUILD_SECS s ($W/build.log)"
    tail_of "$W/build.log" 20
    finish
fi
pass "podman build --format docker --isolation=chroot -f $DF ($BUILD_SECS s)"

# ---- the image's configuration
timeout 120 $POD image inspect localhost/gpserve >"$W/image.json" 2>&1 || {
    fail "podman image inspect gpserve" "$(tail -n 2 "$W/image.json")"
    finish
}
# jcfg FILTER [jq options]: FILTER on the image's Config.
jcfg() {
    _f=$1
    shift
    jq -r "$@" ".[0].Config | $_f" "$W/image.json"
}
hc=$(jq -c '.[0].Healthcheck.Test // .[0].HealthCheck.Test // .[0].Config.Healthcheck.Test // empty' "$W/image.json")
case $hc in
*/healthz*) pass "the image keeps the HEALTHCHECK: $hc" ;;
*) fail "the image keeps the HEALTHCHECK" "Test is '$hc'" ;;
esac
SMOKE_USER=$(jcfg '.User // ""')
case $SMOKE_USER in
"" | root | 0 | root:* | 0:*) fail "the image's USER is not root" "User '$SMOKE_USER'" ;;
*) pass "the image's USER is $SMOKE_USER" ;;
esac
SMOKE_VOLUME=$(jcfg '(.Volumes // {}) | keys | .[0] // ""')
if [ -n "$SMOKE_VOLUME" ]; then pass "the image declares the volume $SMOKE_VOLUME"; else
    fail "the image declares a volume" "$(jcfg '.Volumes')"
fi
ports=$(jcfg '(.ExposedPorts // {}) | keys | join(" ")')
case " $ports " in *" 8080/tcp "*) pass "the image exposes 8080/tcp" ;; *) fail "the image exposes 8080/tcp" "'$ports'" ;; esac
sig=$(jcfg '.StopSignal // ""')
case $sig in SIGTERM | TERM | 15 | "") pass "the stop signal is SIGTERM${sig:+ ($sig)}" ;; *) fail "the stop signal is SIGTERM" "$sig" ;; esac
size=$(jq -r '.[0].Size // 0' "$W/image.json")
note "image size $((size / 1048576)) MiB"

# ---- the image's root file system
mkdir -p "$W/rootfs"
if ! timeout 120 $POD create --name gpserve-smoke --no-healthcheck localhost/gpserve >"$W/export.log" 2>&1 ||
    ! timeout 300 $POD export gpserve-smoke 2>>"$W/export.log" | tar --numeric-owner -xpf - -C "$W/rootfs" 2>>"$W/export.log" ||
    [ ! -x "$W/rootfs/usr/local/bin/gpserve" ]; then
    fail "export of the image's root file system" "$(tail -n 3 "$W/export.log" | tr '\n' ' ')"
    finish
fi
timeout 120 $POD rm -f -v gpserve-smoke >/dev/null 2>&1
pass "the image's root file system exported ($(du -sm "$W/rootfs" | cut -f1) MiB)"

# The user and group of USER (NAME, NAME:GROUP, UID or UID:GID) from the image's files.
u=${SMOKE_USER%%:*}
g=""
case $SMOKE_USER in *:*) g=${SMOKE_USER#*:} ;; esac
pw=$(awk -F: -v u="$u" '$1 == u || $3 == u { print $3 ":" $4 ":" $6; exit }' "$W/rootfs/etc/passwd")
case $u in *[!0-9]*) [ -n "$pw" ] || { fail "user $u in the image's /etc/passwd"; finish; } ;; esac
SMOKE_UID=${pw%%:*}
[ -n "$SMOKE_UID" ] || SMOKE_UID=$u
rest=${pw#*:}
SMOKE_GID=${rest%%:*}
SMOKE_HOME=${rest#*:}
if [ -n "$g" ]; then
    SMOKE_GID=$(awk -F: -v g="$g" '$1 == g || $3 == g { print $3; exit }' "$W/rootfs/etc/group")
    [ -n "$SMOKE_GID" ] || SMOKE_GID=$g
fi
[ -n "$SMOKE_GID" ] || SMOKE_GID=$SMOKE_UID
[ -n "$SMOKE_HOME" ] || SMOKE_HOME=/
# Supplementary groups: the image's /etc/group lines that list the user (as a runtime does).
SMOKE_GROUPS=$(awk -F: -v u="$u" -v g="$SMOKE_GID" 'BEGIN { out = g }
    { n = split($4, m, ","); for (i = 1; i <= n; i++) if (m[i] == u && $3 != g) out = out "," $3 }
    END { print out }' "$W/rootfs/etc/group")

# The volume: a fresh directory of the image user's (a named volume starts with
# the image's content and ownership at that path: empty, the user's).
mkdir -p "$W/data"
chown "$SMOKE_UID:$SMOKE_GID" "$W/data"
chmod 755 "$W/data"

# The command, environment and working directory, shell-quoted for the run phase.
SMOKE_CMD=$(jcfg '((.Entrypoint // []) + (.Cmd // [])) | @sh')
SMOKE_CMD_TEXT=$(jcfg '((.Entrypoint // []) + (.Cmd // [])) | join(" ")')
envs=$(jcfg '(.Env // [])')
SMOKE_ENV=$(printf '%s' "$envs" | jq -r --arg h "$SMOKE_HOME" \
    'if any(.[]; startswith("HOME=")) then . else . + ["HOME=" + $h] end | @sh')
SMOKE_PATH=$(printf '%s' "$envs" | jq -r 'map(select(startswith("PATH="))) | .[0] // "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" | sub("^PATH="; "")')
SMOKE_WORKDIR=$(jcfg '.WorkingDir // ""')
[ -n "$SMOKE_WORKDIR" ] || SMOKE_WORKDIR=/
SMOKE_HEALTH=$(jq -r '(.[0].Healthcheck.Test // .[0].HealthCheck.Test // .[0].Config.Healthcheck.Test // []) | @sh' "$W/image.json")
# What the daemon will listen on: --bind/--port of the command, else GPSERVE_BIND/PORT, else its defaults.
SMOKE_DB=$(jq -r '.[0].Config | ((.Entrypoint // []) + (.Cmd // [])) as $a
    | ([range(0; $a | length - 1) | select($a[.] == "--db") | $a[. + 1]] | last)
      // ((.Env // []) | map(select(startswith("GPSERVE_DB="))) | .[0] // "" | sub("^GPSERVE_DB="; ""))' "$W/image.json")
SMOKE_LISTEN=$(jq -r '.[0].Config | ((.Entrypoint // []) + (.Cmd // [])) as $a | (.Env // []) as $e
    | def flag(f): [range(0; $a | length - 1) | select($a[.] == f) | $a[. + 1]] | last;
      def var(v): $e | map(select(startswith(v + "="))) | .[0] // null | if . then sub("^[^=]*="; "") else null end;
      ((flag("--bind") // var("GPSERVE_BIND") // "127.0.0.1") + ":" + (flag("--port") // var("GPSERVE_PORT") // "8080"))' \
    "$W/image.json")
SMOKE_PORT=${SMOKE_LISTEN##*:}
# The restart runs as `docker compose -f docker/compose.yaml up` would: the
# service's environment over the image's, its command instead of the CMD.
DC=docker/compose.yaml
SMOKE_ENV2=$SMOKE_ENV
SMOKE_CMD2=$SMOKE_CMD
SMOKE_HOW2="the image's command"
if [ -f "$DC" ]; then
    # Only the service gpserve (the file's other services are the profile "scale").
    dc_svc=$(awk '/^  gpserve:/ { on = 1; next } on && /^  [^ #]/ { on = 0 } on && /^[^ #]/ { on = 0 }
        on' "$DC")
    dc_env=$(printf '%s\n' "$dc_svc" | awk '/^    environment:/ { on = 1; next }
        on && /^      [A-Za-z_][A-Za-z0-9_]*:/ { k = $1; sub(/:$/, "", k); v = $0
            sub(/^[^:]*:[[:space:]]*/, "", v); gsub(/^"|"$/, "", v); print k "=" v; next }
        on { on = 0 }' | jq -R . | jq -s -c .)
    dc_cmd=$(printf '%s\n' "$dc_svc" | sed -n 's/^    command:[[:space:]]*//p' | jq -c 'select(type == "array")' 2>/dev/null)
    if [ -n "$dc_cmd" ]; then
        SMOKE_CMD2=$(jcfg '((.Entrypoint // []) + $c) | @sh' --argjson c "$dc_cmd")
        SMOKE_HOW2="compose.yaml's command $(printf '%s' "$dc_cmd" | jq -r 'join(" ")')"
    else
        note "no command: [...] line in $DC: the restart uses the image's CMD"
    fi
    SMOKE_ENV2=$(jcfg '(.Env // []) as $i | ($e | map(sub("=.*"; ""))) as $k
        | ($i | map(select((sub("=.*"; "")) as $n | $k | index([$n]) | not))) + $e
        | if any(.[]; startswith("HOME=")) then . else . + ["HOME=" + $h] end | @sh' \
        --argjson e "${dc_env:-[]}" --arg h "$SMOKE_HOME")
    SMOKE_HOW2="$SMOKE_HOW2 and environment ($(printf '%s' "${dc_env:-[]}" | jq -r 'join(" ")'))"
fi
val=""
{
    for v in SMOKE_USER SMOKE_UID SMOKE_GID SMOKE_GROUPS SMOKE_VOLUME SMOKE_CMD_TEXT SMOKE_PATH \
        SMOKE_WORKDIR SMOKE_DB SMOKE_LISTEN SMOKE_PORT SMOKE_HOW2; do
        eval "val=\$$v"
        printf "%s='%s'\n" "$v" "$(printf '%s' "$val" | sed "s/'/'\\\\''/g")"
    done
    # Already shell-quoted word lists (jq's @sh).
    printf "SMOKE_CMD=%s\n" "$(printf '%s' "$SMOKE_CMD" | sed "s/'/'\\\\''/g; s/^/'/; s/\$/'/")"
    printf "SMOKE_ENV=%s\n" "$(printf '%s' "$SMOKE_ENV" | sed "s/'/'\\\\''/g; s/^/'/; s/\$/'/")"
    printf "SMOKE_CMD2=%s\n" "$(printf '%s' "$SMOKE_CMD2" | sed "s/'/'\\\\''/g; s/^/'/; s/\$/'/")"
    printf "SMOKE_ENV2=%s\n" "$(printf '%s' "$SMOKE_ENV2" | sed "s/'/'\\\\''/g; s/^/'/; s/\$/'/")"
    printf "SMOKE_HEALTH=%s\n" "$(printf '%s' "$SMOKE_HEALTH" | sed "s/'/'\\\\''/g; s/^/'/; s/\$/'/")"
} >"$W/run.env"

# ---- the run phase, in its own network and mount namespaces (bounded)
t0=$(date +%s)
timeout -k 10 300 unshare --net --mount sh "$SELF" --inside "$W" >"$W/inside.out" 2>&1 9>&-
rc=$?
cat "$W/inside.out"
ip=$(grep -c '^ok ' "$W/inside.out")
if_=$(grep -c '^FAIL' "$W/inside.out")
np=$((np + ip))
nf=$((nf + if_))
if [ "$ip" -eq 0 ] || [ $rc -ne 0 ] && [ "$if_" -eq 0 ]; then
    fail "the run phase" "exit $rc after $(($(date +%s) - t0)) s without a verdict"
fi
note "build $BUILD_SECS s, run phase $(($(date +%s) - t0)) s, $(($(date +%s) - T_START)) s in all (logs in $W)"
finish
