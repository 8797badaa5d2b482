#!/bin/sh
# Soak test (issue 13; part of `make bench`): mixed traffic on loopback for
# 10 minutes with the daemon's RSS sampled every 10 s; no error allowed, RSS
# flat after warm-up. A test more than a benchmark: it exits non-zero on any
# error or on RSS growth beyond the threshold.
#
# Usage (from the repository root):
#   sh bench/soak.sh [BUILD_DIR [SECONDS]]
#   sh bench/run.sh BUILD_DIR soak [SECONDS]           (the same, through run.sh)
# BUILD_DIR defaults to build (it needs BUILD_DIR/gpserve and
# BUILD_DIR/bench/bench_soak, both built by `make build-all`); SECONDS to
# $SOAK_SECONDS, else 600 (the full soak; `SOAK_SECONDS=60 make bench` or
# `make bench SOAK_SECONDS=60` shortens the one `make bench` runs, and
# `bench/run.sh BUILD --quick` runs it for 60 s).
#
# Starts BUILD_DIR/gpserve with its defaults on a free loopback port (--port 0)
# with a fresh database in a temporary folder, then runs BUILD_DIR/bench/bench_soak
# (bench/bench_soak/: the load client and the RSS sampler; what it sends is
# described at its top) for SECONDS, stops the daemon with SIGTERM and checks
# that it exits with status 0.
#
# Writes markdown to stdout and to $SOAK_OUT, by default
# bench/results/soak.md for a run of 600 s or more and BUILD_DIR/soak.md for a
# shorter one (a short run never overwrites the committed figures).
# Other settings: SOAK_LOOPS (concurrent client loops, 4), SOAK_THINK_MS (pause
# of each loop between scenarios, 0), SOAK_MAX_SLOPE (KiB/min, 256) and
# SOAK_MAX_GROWTH (KiB, 1024): the RSS thresholds (see bench/bench_soak/main.c; a run
# shorter than 300 s is mostly warm-up and fails only on errors).

BUILD=${1:-build}
SECONDS_RUN=${2:-${SOAK_SECONDS:-600}}
LOOPS=${SOAK_LOOPS:-4}
THINK=${SOAK_THINK_MS:-0}
MAX_SLOPE=${SOAK_MAX_SLOPE:-256}
MAX_GROWTH=${SOAK_MAX_GROWTH:-1024}
ROOT=$(cd "$(dirname "$0")/.." && pwd) || exit 1
cd "$ROOT" || exit 1
case $BUILD in /*) BDIR=$BUILD ;; *) BDIR=$ROOT/$BUILD ;; esac
BIN=$BDIR/gpserve
CLIENT=$BDIR/bench/bench_soak
if [ -n "${SOAK_OUT:-}" ]; then
    OUT=$SOAK_OUT
elif [ "$SECONDS_RUN" -ge 600 ] 2>/dev/null; then
    OUT=$ROOT/bench/results/soak.md
else
    OUT=$BDIR/soak.md
fi
: "${OPENBLAS_THREAD_TIMEOUT:=16}"
export OPENBLAS_THREAD_TIMEOUT
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY
# The daemon runs with its defaults: no setting from the caller's environment.
for v in $(env | sed -n 's/^\(GPSERVE_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done

echo "## Soak: ${SECONDS_RUN} s of mixed traffic" >&2
case $SECONDS_RUN in
    '' | *[!0-9]*) echo "soak: SECONDS must be a whole number of seconds (got '$SECONDS_RUN')" >&2; exit 2 ;;
esac
if [ ! -x "$BIN" ] || [ ! -x "$CLIENT" ]; then
    echo "soak: $BIN or $CLIENT not built (make BUILD=$BUILD build-all)" >&2
    exit 1
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/gpserve-soak.XXXXXX") || exit 1
GPID=""
cleanup() {
    if [ -n "$GPID" ] && kill -0 "$GPID" 2>/dev/null; then
        kill -KILL "$GPID" 2>/dev/null
    fi
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
# Other engineers may have uncommitted changes in the working tree: name them.
tree=""
dirty=$(git diff --name-only HEAD -- core store api server mk Makefile 2>/dev/null | tr '\n' ' ')
if [ -n "$dirty" ]; then
    tree=" with the working tree's uncommitted changes to ${dirty% } (as they were when the soak started)"
fi
load_start=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)
started=$(date -u '+%Y-%m-%d %H:%M UTC')

: >"$T/gpserve.log"
"$BIN" --bind 127.0.0.1 --port 0 --db "$T/soak.db" >"$T/gpserve.log" 2>&1 &
GPID=$!
port=""
i=0
while [ $i -lt 300 ] && [ -z "$port" ]; do
    port=$(sed -n 's/.*gpserve listening on 127\.0\.0\.1:\([0-9][0-9]*\).*/\1/p' "$T/gpserve.log" | head -n 1)
    [ -n "$port" ] && break
    kill -0 "$GPID" 2>/dev/null || break
    sleep 0.1
    i=$((i + 1))
done
if [ -z "$port" ]; then
    echo "soak: gpserve did not start:" >&2
    tail -n 5 "$T/gpserve.log" >&2
    exit 1
fi
daemon_conf=$(sed -n 's/^gpserve: db [^,]*, //p' "$T/gpserve.log" | head -n 1)

"$CLIENT" --port "$port" --pid "$GPID" --seconds "$SECONDS_RUN" --loops "$LOOPS" \
    --think-ms "$THINK" --max-slope "$MAX_SLOPE" --max-growth "$MAX_GROWTH" \
    --db "$T/soak.db" >"$T/body.md"
crc=$?

# Stop the daemon as an operator would; it must exit by itself, with status 0.
drc=""
if kill -0 "$GPID" 2>/dev/null; then
    kill -TERM "$GPID"
    i=0
    while [ $i -lt 600 ] && [ "$(awk '{ print $3 }' "/proc/$GPID/stat" 2>/dev/null)" != Z ] &&
          kill -0 "$GPID" 2>/dev/null; do
        sleep 0.1
        i=$((i + 1))
    done
    if [ "$(awk '{ print $3 }' "/proc/$GPID/stat" 2>/dev/null)" = Z ] || ! kill -0 "$GPID" 2>/dev/null; then
        wait "$GPID"
        drc=$?
    else
        drc="still running 60 s after SIGTERM (killed)"
        kill -KILL "$GPID" 2>/dev/null
    fi
else
    wait "$GPID"
    drc="dead before the end of the soak (status $?)"
fi
GPID=""
load_end=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)
db_jobs=""
if command -v sqlite3 >/dev/null 2>&1; then
    db_jobs=$(sqlite3 "$T/soak.db" 'SELECT count(*) FROM jobs' 2>/dev/null)
fi
db_size=$(du -k "$T/soak.db" 2>/dev/null | cut -f1)
log_lines=$(grep -c . "$T/gpserve.log")

result=pass
[ "$crc" = 0 ] && [ "$drc" = 0 ] || result=FAIL
cpus=$(nproc 2>/dev/null || echo "?")
cpu_model=$(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo 2>/dev/null | head -n 1)
mem=$(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo 2>/dev/null)

{
    echo "<!-- generated: sh bench/soak.sh $BUILD $SECONDS_RUN -->"
    echo
    echo "# Soak: $SECONDS_RUN s of mixed traffic"
    echo
    echo "Command: \`sh bench/soak.sh $BUILD $SECONDS_RUN\` (the soak of \`make bench\`, which runs it for"
    echo "600 s; \`SOAK_SECONDS=N make bench\` or \`sh bench/soak.sh BUILD N\` shortens it). Started $started."
    echo
    echo "- daemon: \`$BUILD/gpserve\` built from commit \`$commit\`$tree, with its defaults"
    echo "  ($daemon_conf; model cache 32) on 127.0.0.1, port"
    echo "  picked by \`--port 0\`, a fresh database in a temporary folder;"
    echo "- machine: $cpus CPUs (${cpu_model:-?}), $mem of memory, Linux $(uname -r);"
    echo "  load average (1, 5, 15 min) $load_start at the start, $load_end at the end;"
    echo "- client: \`$BUILD/bench/bench_soak\` (bench/bench_soak/), $LOOPS loops over keep-alive HTTP/1.1"
    echo "  connections (one request in ~20 on a fresh connection), pause between scenarios ${THINK} ms."
    echo
    echo "The machine is shared with other engineers building and testing at the same time: that"
    echo "slows the traffic (fewer requests per second, longer tails) but not what a soak looks for,"
    echo "errors and memory that grows with the requests served."
    echo
    echo "What the loops send: five seed models (exact, ssgp, sgpr, msrfr, renyi on 40 points of one"
    echo "input) are fitted first; then each loop draws scenarios: predict (1-20 points; 10% of"
    echo "scenarios with full_covariance and quantiles, plus components on msrfr), sample, list, get a"
    echo "model and a version, observe (422 \`unsupported\` for every method today, counted as"
    echo "expected, as is any 2xx once a method updates online), /metrics, /healthz, /readyz,"
    echo "/v1/methods, a predict on a missing model (404) and one with malformed JSON (400), and fits of"
    echo "throwaway models of a random method on 15-55 points: synchronous (half of them fitted twice"
    echo "under one name, then version 2 read), asynchronous (the job polled every 10 ms until it"
    echo "ends), and asynchronous on 250-350 points cancelled at once; each fitted model is predicted"
    echo "on, deleted (204) and checked gone (404). Every request is bounded (60 s, fits 120 s)."
    echo
    cat "$T/body.md"
    echo "## Shutdown"
    echo
    echo "SIGTERM after the soak: the daemon exit status is $drc; it wrote $log_lines log lines."
    if [ -n "$db_jobs" ]; then
        echo "The database ends at ${db_size:-?} KiB (after the daemon's last checkpoint) with $db_jobs rows in"
        echo "its jobs table; every throwaway model was deleted, so the models are the five seeds."
    fi
    echo
    echo "## Result"
    echo
    if [ "$result" = pass ]; then
        if [ "$SECONDS_RUN" -ge 300 ]; then
            echo "**pass**: no error, RSS flat after warm-up, clean shutdown."
        else
            echo "**pass**: no error, clean shutdown (RSS not judged on a run shorter than 300 s)."
        fi
    else
        echo "**FAIL** (client exit status $crc, daemon exit status $drc)."
    fi
} >"$T/soak.md"

cat "$T/soak.md"
if [ "$(dirname "$OUT")" != "" ] && mkdir -p "$(dirname "$OUT")" && cp "$T/soak.md" "$OUT"; then
    echo "(written to $OUT)" >&2
fi
if [ "$result" != pass ]; then
    echo "soak: FAIL; the daemon log's last lines:" >&2
    tail -n 20 "$T/gpserve.log" >&2
    exit 1
fi
exit 0
