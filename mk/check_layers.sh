#!/bin/sh
# The include rules of the architecture (ARCHITECTURE.md), checked on the
# #include lines of the tree:
#   - layers point one way: server -> api -> {core, store}, store -> core, and
#     mpi -> api (mpi/: gpserve-fit, the program each rank of a sharded fit runs;
#     it sits beside server/ and includes no server/ header, nor the store's driver);
#   - only mpi/ includes <mpi.h> (core, store, api and server never do);
#   - core/ does no I/O: no jansson, SQLite, libpq or libmicrohttpd header;
#   - only store/ talks to a database: no sqlite3.h or libpq-fe.h in api/ or server/;
#   - a method (core/methods/X.c, or the folder core/methods/X/ when it holds
#     several concerns) includes only its own header or folder and the shared
#     layers, never another method; only the registry (core/methods/registry.c)
#     names them all;
#   - shared core code (every core/ folder but methods/) never includes a method;
#   - the plug-in interface core/model/method.h stays inside core/ (and tests/);
#   - in core/, headers match sources one to one (X.c beside X.h and back),
#     but for a method folder's internal.h.
# Usage: sh mk/check_layers.sh [ROOT]      (default: the repository root)
#        sh mk/check_layers.sh --self-test (each rule fails on an injected violation)
# Prints every violation as "file: rule" and exits 1 when there is any.
set -u
TAB=$(printf '\t')

# "file<TAB>header" for every quoted or angled include of the files under $1
# (one grep over the folder: the self-test runs the check on 17 copies).
includes() {
    [ -d "$1" ] || return 0
    grep -rH --include='*.[ch]' '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]' "$1" |
        sed -n 's/^\([^:]*\):[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]\([^>"]*\)[>"].*/\1\t\2/p' |
        LC_ALL=C sort -s -t "$(printf '\t')" -k1,1
}

check() {
    root=$1
    cd "$root" || exit 2
    bad=0
    report() { echo "check-layers: $1"; bad=1; }
    includes core >"$tmp/core"
    includes store >"$tmp/store"
    includes api >"$tmp/api"
    includes server >"$tmp/server"
    includes bench >"$tmp/bench"
    includes mpi >"$tmp/mpi"

    cat "$tmp/core" "$tmp/store" "$tmp/api" "$tmp/server" |
        while IFS="$TAB" read -r f h; do
            case $h in
            mpi.h | mpi/*) echo "check-layers: $f includes $h: only mpi/ talks MPI" ;;
            esac
        done >"$tmp/mpiuse"
    if [ -s "$tmp/mpiuse" ]; then
        cat "$tmp/mpiuse"
        bad=1
    fi

    while IFS="$TAB" read -r f h; do
        case $h in
        server/*) report "$f includes $h: mpi/ sits on api/, beside server/" ;;
        microhttpd.h) report "$f includes <$h>: only server/ speaks HTTP" ;;
        esac
    done <"$tmp/mpi"

    while IFS="$TAB" read -r f h; do
        case $h in
        api/* | store/* | server/*) report "$f includes $h: core/ includes no higher layer" ;;
        jansson.h | sqlite3.h | libpq-fe.h | microhttpd.h) report "$f includes <$h>: core/ does no I/O" ;;
        esac
        case $f in
        core/methods/registry.c) ;;
        core/methods/*/*)
            # a method that is a folder (core/methods/X/): its own folder only
            own=${f#core/methods/}
            own=${own%%/*}
            case $h in
            core/methods/"$own"/* | core/methods/registry.h) ;;
            core/methods/*) report "$f includes $h: a method includes only its own folder and the shared layers" ;;
            esac
            ;;
        core/methods/*)
            own=${f##*/}
            own=${own%.[ch]}
            case $h in
            core/methods/"$own".h | core/methods/registry.h) ;;
            core/methods/*) report "$f includes $h: a method includes only its own folder and the shared layers" ;;
            esac
            ;;
        core/*)
            case $h in
            core/methods/*) report "$f includes $h: shared core code never includes a method" ;;
            esac
            ;;
        esac
    done <"$tmp/core"

    while IFS="$TAB" read -r f h; do
        case $h in
        api/* | server/*) report "$f includes $h: store/ sits below api/ and server/" ;;
        microhttpd.h) report "$f includes <$h>: only server/ speaks HTTP" ;;
        esac
    done <"$tmp/store"

    while IFS="$TAB" read -r f h; do
        case $h in
        server/*) report "$f includes $h: api/ sits below server/" ;;
        microhttpd.h) report "$f includes <$h>: api/ knows nothing of sockets" ;;
        esac
    done <"$tmp/api"

    cat "$tmp/api" "$tmp/server" "$tmp/mpi" |
        while IFS="$TAB" read -r f h; do
            case $h in
            sqlite3.h | libpq-fe.h | store/db.h | store/store_internal.h)
                echo "check-layers: $f includes $h: only store/ talks to a database"
                ;;
            esac
        done >"$tmp/db"
    if [ -s "$tmp/db" ]; then
        cat "$tmp/db"
        bad=1
    fi

    cat "$tmp/store" "$tmp/api" "$tmp/server" "$tmp/bench" "$tmp/mpi" |
        while IFS="$TAB" read -r f h; do
            case $h in
            core/model/method.h)
                echo "check-layers: $f includes $h: the plug-in interface is for core/ (use core/model/model.h)"
                ;;
            esac
        done >"$tmp/plugin"
    if [ -s "$tmp/plugin" ]; then
        cat "$tmp/plugin"
        bad=1
    fi

    for c in $(find core -name '*.c' | sort); do
        [ -f "${c%.c}.h" ] || report "$c has no ${c%.c}.h: headers match sources one to one in core/"
    done
    # (but a method folder may have an internal.h: the declarations its own
    # files share, defined across them)
    for h in $(find core -name '*.h' ! -path 'core/methods/*/internal.h' | sort); do
        [ -f "${h%.h}.c" ] || report "$h has no ${h%.h}.c: headers match sources one to one in core/"
    done
    return $bad
}

# Copy the tree, break one rule, and expect check() to fail; then the intact
# copy must pass. Proves every rule can fail.
self_test() {
    failures=0
    here=$(pwd)
    expect_fail() { # description, shell command that breaks the copy
        copy=$tmp/copy
        rm -rf "$copy"
        mkdir -p "$copy"
        cp -R "$here/core" "$here/store" "$here/api" "$here/server" "$here/bench" "$copy/"
        [ -d "$here/mpi" ] && cp -R "$here/mpi" "$copy/"
        (cd "$copy" && eval "$2")
        if (check "$copy" >/dev/null); then
            echo "check-layers self-test: '$1' was not caught"
            failures=$((failures + 1))
        fi
    }
    add_include() { printf '#include "%s"\n' "$2" >>"$1"; }
    expect_fail "core includes api" 'add_include core/base/rng.c api/api.h'
    expect_fail "core includes jansson" 'printf "#include <jansson.h>\n" >>core/kernel/kernel.c'
    expect_fail "method includes method" 'add_include core/methods/sgpr.c core/methods/exact.h'
    expect_fail "method folder includes another method" 'mkdir -p core/methods/zz && printf "#include \"core/methods/sgpr.h\"\n" >core/methods/zz/zz.c && printf "\n" >core/methods/zz/zz.h'
    expect_fail "method includes another method's folder" 'add_include core/methods/sgpr.c core/methods/zz/zz.h'
    expect_fail "shared includes method" 'add_include core/inducing/inducing.c core/methods/sgpr.h'
    expect_fail "store includes api" 'add_include store/store.c api/api.h'
    expect_fail "api includes server" 'add_include api/fit.c server/http.h'
    expect_fail "api includes microhttpd" 'printf "#include <microhttpd.h>\n" >>api/json.c'
    expect_fail "server includes libpq" 'printf "#include <libpq-fe.h>\n" >>server/main.c'
    expect_fail "api includes the store's driver" 'add_include api/fit.c store/db.h'
    expect_fail "server includes the plug-in interface" 'add_include server/main.c core/model/method.h'
    expect_fail "core source without header" 'printf "int gp_x;\n" >core/base/orphan.c'
    expect_fail "core header without source" 'printf "int gp_y(void);\n" >core/linalg/orphan.h'
    expect_fail "api includes mpi.h" 'printf "#include <mpi.h>\n" >>api/json.c'
    expect_fail "server includes mpi.h" 'printf "#include <mpi.h>\n" >>server/main.c'
    expect_fail "mpi includes server" 'mkdir -p mpi && add_include mpi/zz.c server/http.h'
    expect_fail "mpi includes the store's driver" 'mkdir -p mpi && add_include mpi/zz.c store/db.h'
    copy=$tmp/copy
    rm -rf "$copy"
    mkdir -p "$copy"
    cp -R "$here/core" "$here/store" "$here/api" "$here/server" "$here/bench" "$copy/"
    [ -d "$here/mpi" ] && cp -R "$here/mpi" "$copy/"
    if ! (check "$copy"); then
        echo "check-layers self-test: the intact tree fails"
        failures=$((failures + 1))
    fi
    [ "$failures" -eq 0 ] && echo "check-layers self-test: 18 violations caught, the intact tree passes"
    return "$failures"
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gp-layers.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT INT TERM
if [ "${1:-}" = --self-test ]; then
    cd "$(dirname "$0")/.." || exit 2
    self_test
    exit $?
fi
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
if (check "$root"); then
    echo "check-layers: ok"
else
    exit 1
fi
