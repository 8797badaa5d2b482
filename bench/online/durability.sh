#!/bin/sh
# Observes per second under each durability (issue 30; bench/results/online.md,
# "Durability"): single-row observes at 16 connections against
#   full    BUILD_DIR/gpserve --durability full (the default: answered once the
#           WAL is synced, one fsync for the writes that committed meanwhile),
#   normal  BUILD_DIR/gpserve --durability normal (answered once committed),
#   base    BASE_BIN, when given: another build (e.g. main before the group
#           commit), with its own defaults,
# each on its own database file in TMPDIR (the disk decides what an fsync
# costs: say which one), in ROUNDS rounds of DUR seconds, the daemons taking
# turns within a round (so that a neighbour's load shifts all alike). Prints
# the median requests/s of each, p50/p99 of the median round, and the ratios.
# Usage: bench/online/durability.sh BUILD_DIR [BASE_BIN]     (from the repository root)
# Environment: DUR (default 10), ROUNDS (default 3), CONNS (default 16),
# ARGS (more daemon flags for all three, e.g. "--threads 16").
# Needs wrk and curl. Every daemon is rfgp on 1000 generated rows, d = 4
# (the model of bench/online/http.sh).

BUILD=${1:-build}
BASE_BIN=${2:-}
ROOT=$(cd "$(dirname "$0")/../.." && pwd) || exit 1
cd "$ROOT" || exit 1
# wait_port (lib.sh's other helpers are not used here; to_ms below is this
# script's own: two decimals).
. "$ROOT/bench/http/lib.sh"
case $BUILD in /*) BIN=$BUILD/gpserve ;; *) BIN=$ROOT/$BUILD/gpserve ;; esac
: "${DUR:=10}" "${ROUNDS:=3}" "${CONNS:=16}"
: "${OPENBLAS_THREAD_TIMEOUT:=16}"
export OPENBLAS_THREAD_TIMEOUT
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY
unset GPSERVE_BIND GPSERVE_PORT GPSERVE_DB GPSERVE_API_KEY_FILE GPSERVE_DURABILITY GPSERVE_THREADS
for tool in wrk curl; do
    command -v "$tool" >/dev/null 2>&1 || { echo "skipped: $tool is not installed"; exit 0; }
done

T=$(mktemp -d "${TMPDIR:-/tmp}/gpserve-bench-durable.XXXXXX") || exit 1
PIDS=""
cleanup() {
    for p in $PIDS; do kill -TERM "$p" 2>/dev/null; done
    for p in $PIDS; do wait "$p" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

awk 'BEGIN { srand(1); pi = 3.141592653589793;
    for (i = 0; i < 1000; i++) {
        for (j = 1; j <= 4; j++) { u = rand(); if (u < 1e-12) u = 1e-12; x[j] = sqrt(-2 * log(u)) * cos(2 * pi * rand()) }
        X = X (i ? "," : "") sprintf("[%.6f,%.6f,%.6f,%.6f]", x[1], x[2], x[3], x[4]);
        y = y (i ? "," : "") sprintf("%.6f", sin(2 * x[1]) + 0.5 * x[2] * x[3] - 0.3 * x[4]) }
    printf "{\"name\":\"obs\",\"method\":\"rfgp\",\"seed\":1,\"options\":{\"features\":800},\"X\":[%s],\"y\":[%s]}", X, y }' \
    >"$T/fit.json"

# start NAME BIN ARGS...: a daemon on $T/NAME.db; its port in $T/NAME.port
start() {
    name=$1
    bin=$2
    shift 2
    # shellcheck disable=SC2086 # ARGS: words
    "$bin" --bind 127.0.0.1 --port 0 --db "$T/$name.db" "$@" $ARGS >"$T/$name.log" 2>&1 &
    pid=$!
    PIDS="$PIDS $pid"
    port=$(wait_port "$T/$name.log" "$pid") || { echo "$name did not start: $(tail -n 3 "$T/$name.log")"; exit 1; }
    echo "$port" >"$T/$name.port"
    code=$(curl -sS --max-time 300 -o "$T/$name.fit" -w '%{http_code}' -H 'Content-Type: application/json' \
        --data-binary @"$T/fit.json" "http://127.0.0.1:$port/v1/models")
    [ "$code" = 201 ] || { echo "$name: the fit answered $code"; exit 1; }
}
NAMES="full normal"
start full "$BIN" --durability full
start normal "$BIN" --durability normal
if [ -n "$BASE_BIN" ]; then
    start base "$BASE_BIN"
    NAMES="base full normal"
fi

to_ms() {
    awk '{ v = $1; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v);
           f = (u == "us") ? 0.001 : (u == "ms") ? 1 : (u == "s") ? 1000 : 1; printf "%.2f", v * f }'
}
r=1
while [ $r -le "$ROUNDS" ]; do
    for name in $NAMES; do
        port=$(cat "$T/$name.port")
        WRK_KIND=point WRK_ROWS=1 wrk -t 2 -c "$CONNS" -d "${DUR}s" --timeout 10s --latency \
            -s bench/online/observe.lua "http://127.0.0.1:$port/v1/models/obs/observe" >"$T/$name.$r.wrk" 2>&1
        rps=$(awk '/^Requests\/sec:/ { print $2 }' "$T/$name.$r.wrk")
        bad=$(awk '/Non-2xx or 3xx responses:/ { print $NF }' "$T/$name.$r.wrk")
        p50=$(awk '$1 == "50%" { print $2 }' "$T/$name.$r.wrk" | to_ms)
        p99=$(awk '$1 == "99%" { print $2 }' "$T/$name.$r.wrk" | to_ms)
        echo "$rps $p50 $p99 ${bad:-0}" >>"$T/$name.rows"
    done
    r=$((r + 1))
done

echo "| daemon | observes/s (median of $ROUNDS x ${DUR} s, $CONNS connections) | each round | p50 ms | p99 ms | non-2xx |"
echo "|---|---|---|---|---|---|"
for name in $NAMES; do
    sort -n "$T/$name.rows" | awk -v n="$name" '{ r[NR] = $1; p50[NR] = $2; p99[NR] = $3; bad += $4; all = all (NR > 1 ? ", " : "") $1 }
        END { m = int((NR + 1) / 2); printf "| %s | %.0f | %s | %s | %s | %d |\n", n, r[m], all, p50[m], p99[m], bad }' |
        tee "$T/$name.median"
done
med() { awk -F'|' '{ print $3 + 0 }' "$T/$1.median"; }
echo
echo "full / normal = $(awk -v a="$(med full)" -v b="$(med normal)" 'BEGIN { printf "%.2f", a / b }')"
if [ -n "$BASE_BIN" ]; then
    echo "full / base = $(awk -v a="$(med full)" -v b="$(med base)" 'BEGIN { printf "%.2f", a / b }')"
    echo "normal / base = $(awk -v a="$(med normal)" -v b="$(med base)" 'BEGIN { printf "%.2f", a / b }')"
fi
