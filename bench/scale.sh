#!/bin/sh
# Scale-out figures (a benchmark: it prints figures and asserts nothing, but
# exits 1 when a request it needs fails); bench/results/scale.md.
#   1. the cost of PostgreSQL against SQLite, one daemon each (alternated):
#      a sync fit end to end (the save included), single-point predicts at 1
#      and 16 connections (each request looks the latest version up in the
#      store), GET /v1/models/{name}, and the first predict after a restart
#      (the model loaded from the store);
#   2. replicas on one PostgreSQL behind haproxy (roundrobin, health checks on
#      /readyz): single-point predict throughput through haproxy with 1, 2 and
#      3 replicas at 16 and 64 connections, and 1 replica without haproxy;
#   3. the fit queue across replicas: FITS small async fits submitted through
#      haproxy at once; the time until each succeeded (median, max) with 1, 2
#      and 3 replicas (one fit worker each).
# On the 2-core VM the replicas, haproxy, PostgreSQL and wrk share the cores:
# the point is correctness and overhead, not speed-up.
# Usage: sh bench/scale.sh BUILD_DIR [--quick]   (from the repository root)
# Durations: DUR=5 ROUNDS=3 RUNS=20 FITS=12 (about 4 minutes); --quick or
# QUICK=1: DUR=2 ROUNDS=1 RUNS=8 FITS=6.
# Needs wrk, haproxy, curl, jq and PostgreSQL 15 (tests/support/pgtmp.sh
# starts a throw-away cluster; GPSERVE_SCALE_PG_URL names another database
# instead); skipped with a message without them or the concrete dataset.

ROOT=$(cd "$(dirname "$0")/.." && pwd) || exit 1
# bench_setup, wait_port, wrk_run, curl_once, curl_times, stats, median, split_rows,
# fit_json, points_json
. "$ROOT/bench/http/lib.sh"
bench_setup "$@"
if [ -n "$QUICK" ]; then
    : "${DUR:=2}" "${ROUNDS:=1}" "${RUNS:=8}" "${FITS:=6}"
else
    : "${DUR:=5}" "${ROUNDS:=3}" "${RUNS:=20}" "${FITS:=12}"
fi

echo "## Scale-out: PostgreSQL against SQLite, replicas behind haproxy"
echo
for tool in wrk haproxy curl jq; do
    command -v $tool >/dev/null 2>&1 || { echo "skipped: $tool is not installed"; exit 0; }
done
[ -x "$BIN" ] || { echo "skipped: $BIN is not built"; exit 1; }
CSV=$DATASETS/concrete.csv
SPLIT=$DATASETS/splits/concrete_test20.txt
if [ ! -f "$CSV" ] || [ ! -f "$SPLIT" ]; then
    echo "skipped: $CSV or $SPLIT not found (set GPSERVE_DATASETS)"
    exit 0
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/gpserve-bench-scale.XXXXXX") || exit 1
PIDS=""
PG_STARTED=""
cleanup() {
    for p in $PIDS; do kill -TERM "$p" 2>/dev/null; done
    for p in $PIDS; do
        i=0
        while kill -0 "$p" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
        kill -KILL "$p" 2>/dev/null
    done
    [ -n "$PG_STARTED" ] && sh tests/support/pgtmp.sh stop "$PGDIR/pg" >/dev/null 2>&1
    rm -rf "$T" ${PGDIR:+"$PGDIR"}
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

PG=${GPSERVE_SCALE_PG_URL:-}
if [ -z "$PG" ]; then
    # postgres (the cluster's owner when we are root) must reach the directory.
    PGDIR=$(mktemp -d "${TMPDIR:-/tmp}/gpserve-pg.XXXXXX") && chmod 755 "$PGDIR"
    if ! PG=$(sh tests/support/pgtmp.sh start "$PGDIR/pg" 2>"$T/pg.err"); then
        echo "skipped: no PostgreSQL cluster could be started: $(tail -n 1 "$T/pg.err")"
        exit 0
    fi
    PG_STARTED=yes
fi

split_rows "$CSV" "$SPLIT"
fit_json concrete exact y "" >"$T/fit.json"
points_json 1 "" >"$T/p1.json"
# The queue's fits: 200 rows of concrete, exact, distinct names (fit_body K).
head -n 200 "$T/train.csv" >"$T/small.csv"
fit_body() {
    awk -F, -v name="q$1" '{ row = "[" $1; for (j = 2; j < NF; j++) row = row "," $j; row = row "]";
        X = X (NR > 1 ? "," : "") row; y = y (NR > 1 ? "," : "") $NF }
        END { printf "{\"name\":\"%s\",\"method\":\"exact\",\"seed\":0,\"async\":true,\"X\":[%s],\"y\":[%s]}", name, X, y }' \
        "$T/small.csv"
}

# start_gpserve TAG DB [ARGS...]: a daemon; its port in $T/TAG.port, pid in $T/TAG.pid.
start_gpserve() {
    tag=$1
    db=$2
    shift 2
    "$BIN" --bind 127.0.0.1 --port 0 --db "$db" "$@" >"$T/$tag.log" 2>&1 &
    pid=$!
    PIDS="$PIDS $pid"
    echo "$pid" >"$T/$tag.pid"
    if ! port=$(wait_port "$T/$tag.log" "$pid"); then
        echo "gpserve ($tag) did not start: $(tail -n 3 "$T/$tag.log" | sed 's#://[^@]*@#://***@#g')"
        exit 1
    fi
    echo "$port" >"$T/$tag.port"
}
# stop_gpserve TAG: SIGTERM, and wait for the exit (the daemon is our child).
stop_gpserve() {
    _pid=$(cat "$T/$1.pid")
    kill -TERM "$_pid" 2>/dev/null
    wait "$_pid" 2>/dev/null
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 == 0) print "-"; else printf "%.2f", b / a }'; }

# ---- 1. PostgreSQL against SQLite
echo "   1. one daemon on SQLite, one on PostgreSQL..." >&2
start_gpserve sq "$T/sqlite.db"
start_gpserve pg "$PG"
SQ=http://127.0.0.1:$(cat "$T/sq.port")
PQ=http://127.0.0.1:$(cat "$T/pg.port")
: >"$T/sq.fit"
: >"$T/pg.fit"
i=0
while [ $i -lt 3 ]; do
    curl_once "$SQ/v1/models" "$T/fit.json" "$T/sq.fit" || exit 1
    curl_once "$PQ/v1/models" "$T/fit.json" "$T/pg.fit" || exit 1
    i=$((i + 1))
done
for c in 1 16; do
    : >"$T/sq.c$c"
    : >"$T/pg.c$c"
    r=0
    while [ $r -lt "$ROUNDS" ]; do
        for s in sq pg; do
            [ $s = sq ] && base=$SQ || base=$PQ
            wrk_run "$base/v1/models/concrete/predict" "$T/p1.json" $c "$T/w" "$DUR"
            echo "$rps $p99" >>"$T/$s.c$c"
        done
        r=$((r + 1))
    done
done
for s in sq pg; do
    [ $s = sq ] && base=$SQ || base=$PQ
    wrk -t 2 -c 16 -d "${DUR}s" --latency "$base/v1/models/concrete" >"$T/$s.get.wrk" 2>&1
    awk '/^Requests\/sec:/ { printf "%.0f\n", $2 }' "$T/$s.get.wrk" >"$T/$s.get"
done
# The first predict after a restart loads the model (3 versions kept: the latest).
: >"$T/sq.cold"
: >"$T/pg.cold"
run=0
while [ $run -lt "$RUNS" ]; do
    for s in sq pg; do
        [ $s = sq ] && db=$T/sqlite.db || db=$PG
        stop_gpserve $s
        start_gpserve $s "$db"
        curl_once "http://127.0.0.1:$(cat "$T/$s.port")/v1/models/concrete/predict" "$T/p1.json" "$T/$s.cold" ||
            exit 1
    done
    run=$((run + 1))
done
stop_gpserve sq
stop_gpserve pg

# ---- 2 and 3. replicas behind haproxy
# haproxy_for N: haproxy over replicas r1..rN (ports in $T/rK.port); HP_PORT.
# The port is the kernel's pick for port 0, which another socket may take
# before haproxy binds it: then another, 5 times.
haproxy_for() {
    tries=0
    while [ $tries -lt 5 ]; do
        tries=$((tries + 1))
        haproxy_try "$1" && return 0
    done
    echo "haproxy did not start: $(tail -n 3 "$T/haproxy.log")"
    exit 1
}
haproxy_try() {
    HP_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    {
        echo "global"
        echo "    maxconn 4096"
        echo "defaults"
        echo "    mode http"
        echo "    timeout connect 2s"
        echo "    timeout client 120s"
        echo "    timeout server 300s"
        echo "frontend gpserve"
        echo "    bind 127.0.0.1:$HP_PORT"
        echo "    default_backend replicas"
        echo "backend replicas"
        echo "    balance roundrobin"
        echo "    option httpchk GET /readyz"
        echo "    http-check expect status 200"
        echo "    default-server inter 1s fall 2 rise 1"
        k=1
        while [ $k -le "$1" ]; do
            echo "    server r$k 127.0.0.1:$(cat "$T/r$k.port") check"
            k=$((k + 1))
        done
    } >"$T/haproxy.cfg"
    haproxy -db -f "$T/haproxy.cfg" >"$T/haproxy.log" 2>&1 &
    HP_PID=$!
    PIDS="$PIDS $HP_PID"
    i=0
    until curl -sS --max-time 2 -o /dev/null "http://127.0.0.1:$HP_PORT/healthz" 2>/dev/null; do
        kill -0 "$HP_PID" 2>/dev/null || return 1
        i=$((i + 1))
        [ $i -lt 50 ] || return 1
        sleep 0.1
    done
    sleep 1.2 # every server checked up once
}

# now_ms: wall-clock milliseconds.
now_ms() { date +%s%3N; }

echo "   2-3. replicas behind haproxy..." >&2
for n in 1 2 3; do
    k=1
    while [ $k -le $n ]; do
        start_gpserve r$k "$PG" --job-lease 5 --fit-workers 1
        k=$((k + 1))
    done
    haproxy_for $n
    HP=http://127.0.0.1:$HP_PORT
    # warm every replica's cache with the model (roundrobin: n requests).
    k=0
    while [ $k -lt $((n * 2)) ]; do
        curl -sS -o /dev/null -H 'Content-Type: application/json' --data-binary @"$T/p1.json" \
            "$HP/v1/models/concrete/predict"
        k=$((k + 1))
    done
    for c in 16 64; do
        : >"$T/n$n.c$c"
        r=0
        while [ $r -lt "$ROUNDS" ]; do
            wrk_run "$HP/v1/models/concrete/predict" "$T/p1.json" $c "$T/w" "$DUR"
            echo "$rps $p99 $errors" >>"$T/n$n.c$c"
            r=$((r + 1))
        done
    done
    if [ $n = 1 ]; then
        : >"$T/direct.c16"
        r=0
        while [ $r -lt "$ROUNDS" ]; do
            wrk_run "http://127.0.0.1:$(cat "$T/r1.port")/v1/models/concrete/predict" "$T/p1.json" 16 "$T/w" "$DUR"
            echo "$rps $p99 $errors" >>"$T/direct.c16"
            r=$((r + 1))
        done
    fi
    # the fit queue: FITS async fits at once, each timed to succeeded
    : >"$T/q$n"
    t0=$(now_ms)
    k=1
    while [ $k -le "$FITS" ]; do
        fit_body "$n-$k" >"$T/qfit.json"
        curl -sS --max-time 30 -H 'Content-Type: application/json' --data-binary @"$T/qfit.json" \
            "$HP/v1/models" | jq -r '.job' >"$T/qjob$k"
        k=$((k + 1))
    done
    pending=$FITS
    i=0
    while [ "$pending" -gt 0 ] && [ $i -lt 6000 ]; do
        pending=0
        k=1
        while [ $k -le "$FITS" ]; do
            if [ ! -f "$T/qdone$n.$k" ]; then
                st=$(curl -sS --max-time 10 "$HP/v1/jobs/$(cat "$T/qjob$k")" | jq -r '.status')
                case $st in
                succeeded) echo $(($(now_ms) - t0)) >>"$T/q$n"; : >"$T/qdone$n.$k" ;;
                failed | cancelled) echo "queue fit $k $st" >&2; : >"$T/qdone$n.$k" ;;
                *) pending=$((pending + 1)) ;;
                esac
            fi
            k=$((k + 1))
        done
        sleep 0.05
        i=$((i + 1))
    done
    kill -TERM "$HP_PID" 2>/dev/null
    wait "$HP_PID" 2>/dev/null
    k=1
    while [ $k -le $n ]; do
        stop_gpserve r$k
        k=$((k + 1))
    done
done

# ---- the tables
echo "$(date -u +%Y-%m-%d), $(nproc) CPUs, load: $(cut -d' ' -f1-3 /proc/loadavg); exact on $ntrain concrete rows; PostgreSQL $(psql --version 2>/dev/null | awk '{ print $3 }') on loopback"
echo
echo "### PostgreSQL against SQLite (one daemon each, alternated)"
echo
echo "| request | SQLite | PostgreSQL | PostgreSQL / SQLite |"
echo "|---|---:|---:|---:|"
a=$(median "$T/sq.fit" 1 %.1f); b=$(median "$T/pg.fit" 1 %.1f)
echo "| sync fit of exact, 927 rows, end to end incl. the save (median of 3, ms) | $a | $b | $(ratio "$a" "$b") |"
for c in 1 16; do
    a=$(median "$T/sq.c$c" 1 %.0f); b=$(median "$T/pg.c$c" 1 %.0f)
    echo "| single-point predict, $c conn (req/s, median of $ROUNDS) | $a | $b | $(ratio "$a" "$b") |"
    a=$(median "$T/sq.c$c" 2 %.2f); b=$(median "$T/pg.c$c" 2 %.2f)
    echo "| the same, p99 (ms) | $a | $b | $(ratio "$a" "$b") |"
done
a=$(cat "$T/sq.get"); b=$(cat "$T/pg.get")
echo "| GET /v1/models/concrete, 16 conn (req/s) | $a | $b | $(ratio "$a" "$b") |"
a=$(median "$T/sq.cold" 1 %.1f); b=$(median "$T/pg.cold" 1 %.1f)
echo "| first predict after a restart: the model loaded (median of $RUNS, ms) | $a | $b | $(ratio "$a" "$b") |"
echo
echo "### Replicas on one PostgreSQL behind haproxy"
echo
echo "| replicas | path | 16 conn: req/s | p99 ms | 64 conn: req/s | p99 ms | errors |"
echo "|---:|---|---:|---:|---:|---:|---:|"
a=$(median "$T/direct.c16" 1 %.0f); ap=$(median "$T/direct.c16" 2 %.2f)
echo "| 1 | direct, no haproxy | $a | $ap | | | $(awk '{ n += $3 } END { print n + 0 }' "$T/direct.c16") |"
for n in 1 2 3; do
    a=$(median "$T/n$n.c16" 1 %.0f); ap=$(median "$T/n$n.c16" 2 %.2f)
    b=$(median "$T/n$n.c64" 1 %.0f); bp=$(median "$T/n$n.c64" 2 %.2f)
    e=$(cat "$T/n$n.c16" "$T/n$n.c64" | awk '{ n += $3 } END { print n + 0 }')
    echo "| $n | haproxy | $a | $ap | $b | $bp | $e |"
done
echo
echo "### The fit queue across replicas ($FITS async exact fits of 200 rows, submitted at once through haproxy)"
echo
echo "| replicas (1 fit worker each) | succeeded | median ms to succeeded | last ms |"
echo "|---:|---:|---:|---:|"
for n in 1 2 3; do
    echo "| $n | $(grep -c . "$T/q$n") of $FITS | $(median "$T/q$n" 1 %.0f) | $(sort -n "$T/q$n" | tail -n 1) |"
done
