#!/bin/sh
# Check the Debian packages gpserve needs; as root install the missing ones,
# otherwise print the exact command and fail.
#   sh mk/deps.sh        the packages the daemon needs to build and run (make run,
#                        make deps): compiler, libmicrohttpd, jansson, OpenBLAS,
#                        LAPACKE, SQLite, libpq
#   sh mk/deps.sh test   only what the tests and benchmarks add to build and run
#                        (cmocka; curl, jq and the sqlite3 shell of the
#                        integration scripts); make, make test and make bench run it
#   sh mk/deps.sh fuzz   only the extra ones of make fuzz and of the fuzz targets
#                        make test runs (clang and libFuzzer's runtime, which Debian
#                        bookworm ships in libclang-rt-14-dev); make deps runs it, and
#                        without them make test skips the fuzz targets with a message
#   sh mk/deps.sh bench  only the peers of make bench (scikit-learn, statsmodels,
#                        pandas: check_estimator runs its DataFrame check only with it
#                        for /usr/bin/python3; wrk, Flask and gunicorn for the
#                        HTTP benchmark, bench/http); without root a missing one
#                        is a warning, not a failure: those comparisons are skipped
#   sh mk/deps.sh node   the test tools (mk/deps_node.sh): Debian's chromium and
#                        Node.js, the pinned npm packages of tests/js and
#                        clients/typescript (npm ci from their package-lock.json
#                        files), PostgreSQL 15 (the store's tests on PostgreSQL)
#                        and haproxy (the multi-replica test); anything that
#                        cannot be had is a warning, and those tests skip with a
#                        message
# nettle-dev: SHA-256 of the model file and of idempotency keys (api/sha256.c).
# libgnutls28-dev: TLS (--tls-cert); libmicrohttpd runs it, the daemon loads the
# certificate and key itself to re-read them on SIGHUP (server/tls.c).
# libpq-dev: the daemon links libpq, the client library of its PostgreSQL back
# end (--db postgresql://...).
# libopenmpi-dev, openmpi-bin: mpicc and mpirun for gpserve-fit, the program
# each rank of a sharded fit runs (--mpi-launcher; docs/design/scale-out.md).
set -eu
if [ "${1:-}" = node ]; then
    exec sh "$(dirname "$0")/deps_node.sh"
fi
PKGS="build-essential libmicrohttpd-dev libgnutls28-dev libjansson-dev libopenblas-dev liblapacke-dev libsqlite3-dev libpq-dev nettle-dev pkg-config libopenmpi-dev openmpi-bin"
TEST_PKGS="libcmocka-dev curl jq sqlite3"
FUZZ_PKGS="clang libclang-rt-14-dev"
BENCH_PKGS="python3-sklearn python3-statsmodels python3-pandas wrk python3-flask gunicorn"
if [ "${1:-}" = test ]; then
    PKGS=$TEST_PKGS
elif [ "${1:-}" = fuzz ]; then
    PKGS=$FUZZ_PKGS
elif [ "${1:-}" = bench ]; then
    PKGS=$BENCH_PKGS
fi
missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ]; then
    echo "deps: installing:$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends $missing
else
    echo "deps: missing Debian packages:$missing" >&2
    echo "deps: run as root:  apt-get update && apt-get install -y$missing" >&2
    [ "${1:-}" = bench ] && exit 0
    exit 1
fi
