#!/bin/sh
# HTTP benchmark (a benchmark, not a test: it prints figures and asserts nothing,
# but exits 1 when a gpserve fit or predict it needs fails).
# Usage: bench/http/run.sh BUILD_DIR [--quick]        (from the repository root)
#        QUICK=1 sh bench/http/run.sh BUILD_DIR       (the same as --quick)
#
# Starts two BUILD_DIR/gpserve daemons on free loopback ports, serving one
# temporary database (so both serve the very same fitted models):
#   "on"  with dynamic batching of concurrent predicts at the daemon's defaults
#         (GPSERVE_BATCH_DELAY_US and GPSERVE_BATCH_MAX_POINTS unset; set
#         BATCH_DELAY_US / BATCH_MAX_POINTS in this script's environment to
#         pass other values to it),
#   "off" with GPSERVE_BATCH_DELAY_US=0 (batching off; BATCH_MAX_POINTS too),
# and, when Debian's python3-sklearn, python3-flask and gunicorn are installed,
# scikit-learn's GaussianProcessRegressor behind Flask under gunicorn -w 2
# (bench/http/sklearn_service.py). Every model is fitted on the same concrete
# rows (test20 split 0: the 927 training rows; predictions on its test rows).
# Measured over HTTP on 127.0.0.1 (wrk with bench/http/post.lua, each run
# bounded by -d; curl for single requests):
#   1. exact on the "on" daemon against scikit-learn: single-point predict at
#      1, 16 and 64 connections (requests/s, p50, p99; wrk DUR1 s a row), a
#      1000-point predict, a 100-sample request over 100 points and a fit end
#      to end (curl time over RUNS / FITS sequential requests: median, p99); and
#      in the same run, at 16 connections, GET /healthz (the daemon's HTTP
#      ceiling) and GET /v1/models/concrete against it;
#   2. every method GET /v1/methods lists (exact ssgp msrfr sgpr renyi svgp
#      pls hkd rfgp gwi), each fitted once with options that keep the fit short
#      (this is about serving cost, not accuracy; see method_config below):
#      single-point predict requests/s and p99 at 1, 16 and 64 connections on
#      both daemons (wrk DUR s a row; the on and off runs of a cell back to
#      back, alternately on or off first), the ratio 16-conn/1-conn, on/off,
#      and the scikit-learn service's row from the same run. A method whose
#      fit or first predict fails is reported as such in the table;
#   3. exact, a 1000-point predict on both daemons (RUNS runs each, alternated);
#   4. per method: the fit end to end, a 1000-point predict and a 100 x 100
#      sample request on the "on" daemon (RUNS_M runs each), plus msrfr's
#      1000-point predict with "quantiles": [0.05, 0.95], "components": true.
# Durations (override with DUR=, DUR1=, RUNS=, RUNS_M=, FITS= in the environment):
#   full:  DUR=5 DUR1=10 RUNS=50 RUNS_M=10 FITS=5: about 8 minutes on the 2-core VM
#          (the main table is 10 methods x 3 connection counts x 2 daemons x DUR:
#          5 of the 8 minutes; DUR=10 makes the run about 13 minutes);
#   quick: DUR=2 DUR1=3 RUNS=15 RUNS_M=5 FITS=2: about 3-4 minutes.
# Needs wrk (Debian package wrk) and curl; skipped with a message without wrk.
# jq (make deps) reads the method list; without it the list below is used.

START=$(date +%s)
ROOT=$(cd "$(dirname "$0")/../.." && pwd) || exit 1
# bench_setup, wait_port, wrk_run, wrk_get, curl_once, curl_times, stats, median, split_rows,
# fit_json, points_json
. "$ROOT/bench/http/lib.sh"
bench_setup "$@"

if [ -n "$QUICK" ]; then
    : "${DUR:=2}" "${DUR1:=3}" "${RUNS:=15}" "${RUNS_M:=5}" "${FITS:=2}"
else
    : "${DUR:=5}" "${DUR1:=10}" "${RUNS:=50}" "${RUNS_M:=10}" "${FITS:=5}"
fi
# DUR: wrk seconds a row of the all-methods table; DUR1: of table 1; RUNS:
# sequential curl runs of table 1's big requests and of the exact 1000-point
# predict on/off; RUNS_M: of each method's big requests; FITS: table 1's fits.
PY=/usr/bin/python3
# Methods measured when jq cannot read GET /v1/methods.
METHODS_KNOWN="exact ssgp msrfr sgpr renyi svgp pls hkd rfgp gwi"

echo "## HTTP: gpserve against scikit-learn behind Flask"
echo
if ! command -v wrk >/dev/null 2>&1; then
    echo "skipped: wrk is not installed (Debian package wrk)"
    exit 0
fi
if [ ! -x "$BIN" ]; then
    echo "skipped: $BIN is not built"
    exit 1
fi
CSV=$DATASETS/concrete.csv
SPLIT=$DATASETS/splits/concrete_test20.txt
if [ ! -f "$CSV" ] || [ ! -f "$SPLIT" ]; then
    echo "skipped: $CSV or $SPLIT not found (set GPSERVE_DATASETS)"
    exit 0
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/gpserve-bench-http.XXXXXX") || exit 1
PIDS=""
cleanup() {
    for p in $PIDS; do kill -TERM "$p" 2>/dev/null; done
    # gunicorn's master stops its workers on SIGTERM: give it time before SIGKILL.
    for p in $PIDS; do
        i=0
        while kill -0 "$p" 2>/dev/null && [ "$(awk '{ print $3 }' "/proc/$p/stat" 2>/dev/null)" != Z ] && [ $i -lt 50 ]; do
            sleep 0.1
            i=$((i + 1))
        done
        kill -KILL "$p" 2>/dev/null
    done
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)
status=0

# ---- request bodies (the same for every service)
split_rows "$CSV" "$SPLIT"
fit_json concrete exact y "" >"$T/fit.json"
points_json 1 "" >"$T/p1.json"
points_json 1000 "" >"$T/p1000.json"
points_json 100 ',"n_samples":100,"seed":7,"include_noise":true' >"$T/s100.json"
# Count likelihoods draw observations only on request: latent draws for them.
points_json 100 ',"n_samples":100,"seed":7' >"$T/s100latent.json"
points_json 1000 ',"quantiles":[0.05,0.95],"components":true' >"$T/p1000qc.json"

# method_config METHOD: sets EXTRA (fit members after the seed) and TARGET.
# Options keep each fit around a second or less: serving cost, not accuracy.
method_config() {
    TARGET=y
    case $1 in
    exact) EXTRA="" ;;
    ssgp) EXTRA=',"options":{"features":100,"frequencies":"qmc"}' ;;
    msrfr) EXTRA=',"options":{"particles":6,"features":100,"iterations":100}' ;;
    sgpr) EXTRA=',"options":{"inducing":100,"max_iterations":50}' ;;
    renyi) EXTRA=',"options":{"inducing":100,"alpha":0.5,"max_iterations":50}' ;;
    # svgp and pls: a Poisson count target, the strength rounded to an integer.
    svgp) EXTRA=',"likelihood":"poisson","options":{"inducing":100,"max_iterations":50}'; TARGET=count ;;
    pls) EXTRA=',"likelihood":"poisson","options":{"particles":50,"steps":50}'; TARGET=count ;;
    # hkd: the negation of the first input (cement) about the training mean, 2 blocks.
    hkd) EXTRA=',"options":{"inducing":100,"max_iterations":30,"symmetry":{"generators":[{"type":"negate","dims":[0]}],"center":"mean"}}' ;;
    # rfgp: 2 x 100 = 200 random features as ssgp's R = 100; warm-up 300 < 927
    # rows, so it is online (predicts a mean) once the fit returns.
    rfgp) EXTRA=',"options":{"features":200,"warmup":300}' ;;
    gwi) EXTRA=',"options":{"inducing":100,"epochs":50}' ;;
    *) EXTRA="" ;; # a method this script does not know: its defaults
    esac
}

# ---- helpers (the shared ones are in bench/http/lib.sh)
# error_text FILE: "code: message" of a gpserve error body, else its first 160 bytes.
error_text() {
    e=$(tr -d '\n' <"$1" | sed -n 's/.*"code": *"\([^"]*\)".*"message": *"\([^"]*\)".*/\1: \2/p' | cut -c1-160)
    [ -n "$e" ] || e=$(tr -d '\n' <"$1" | cut -c1-160)
    echo "$e" | tr '|' '/'
}

# measure NAME BASEURL: table 1's figures of one service into $T/NAME.*
measure() {
    name=$1
    base=$2
    curl_times "$base/v1/models" "$T/fit.json" "$FITS" "$T/$name.fit"
    if [ ! -s "$T/$name.fit" ]; then
        echo "     $name: the fit failed; nothing measured" >&2
        return 1
    fi
    for c in 1 16 64; do
        wrk_run "$base/v1/models/concrete/predict" "$T/p1.json" "$c" "$T/$name.c$c" "$DUR1"
        echo "$rps $p50 $p99 $errors" >"$T/$name.c$c"
    done
    curl_times "$base/v1/models/concrete/predict" "$T/p1000.json" "$RUNS" "$T/$name.p1000"
    curl_times "$base/v1/models/concrete/sample" "$T/s100.json" "$RUNS" "$T/$name.s100"
}

# ceiling BASEURL: gpserve's HTTP ceiling (GET /healthz) and GET /v1/models/concrete (no
# computation: what a request costs besides prediction) at 16 connections, into $T/ceiling.*
ceiling() {
    for k in healthz:/healthz get:/v1/models/concrete; do
        wrk_get "$1${k#*:}" 16 "$T/ceiling.${k%%:*}" "$DUR1"
        echo "$rps $p50 $p99 $errors" >"$T/ceiling.${k%%:*}"
    done
}

# start_gpserve TAG [VAR=VALUE...]: a daemon on the shared database, the
# variables in its environment; its port in $T/TAG.port, its pid in PIDS.
start_gpserve() {
    tag=$1
    shift
    : >"$T/$tag.log"
    env "$@" "$BIN" --bind 127.0.0.1 --port 0 --db "$T/gpserve.db" >"$T/$tag.log" 2>&1 &
    pid=$!
    PIDS="$PIDS $pid"
    if ! port=$(wait_port "$T/$tag.log" "$pid"); then
        echo "gpserve ($tag) did not start:"
        tail -n 5 "$T/$tag.log"
        exit 1
    fi
    echo "$port" >"$T/$tag.port"
}

# ---- the two daemons: batching on (defaults, or BATCH_DELAY_US /
# BATCH_MAX_POINTS) and off (delay 0); one after the other on one database.
ON_ENV=""
OFF_ENV="GPSERVE_BATCH_DELAY_US=0"
[ -n "${BATCH_DELAY_US:-}" ] && ON_ENV="GPSERVE_BATCH_DELAY_US=$BATCH_DELAY_US"
if [ -n "${BATCH_MAX_POINTS:-}" ]; then
    ON_ENV="$ON_ENV GPSERVE_BATCH_MAX_POINTS=$BATCH_MAX_POINTS"
    OFF_ENV="$OFF_ENV GPSERVE_BATCH_MAX_POINTS=$BATCH_MAX_POINTS"
fi
# shellcheck disable=SC2086
start_gpserve on $ON_ENV
# shellcheck disable=SC2086
start_gpserve off $OFF_ENV
ON="http://127.0.0.1:$(cat "$T/on.port")"
OFF="http://127.0.0.1:$(cat "$T/off.port")"
# gpserve's request logs would grow with every wrk request: they go to the files.

# ---- 1. exact on the batching-on daemon (scikit-learn's side below)
echo "   table 1: gpserve exact (wrk ${DUR1}s a row)..." >&2
G1=""
measure gpserve "$ON" && G1=yes
[ -n "$G1" ] || status=1
[ -n "$G1" ] && ceiling "$ON"

# ---- 2. every method: fit once (on the "on" daemon; both serve the database)
METHODS=""
if command -v jq >/dev/null 2>&1; then
    METHODS=$(curl -sS --max-time 10 "$ON/v1/methods" | jq -r '.methods[].name' 2>/dev/null | tr '\n' ' ')
fi
[ -n "$METHODS" ] || METHODS=$METHODS_KNOWN
NOT_SERVED=""
for m in $METHODS_KNOWN; do
    case " $METHODS " in *" $m "*) ;; *) NOT_SERVED="$NOT_SERVED $m" ;; esac
done
for m in $METHODS; do
    method_config "$m"
    fit_json "concrete_$m" "$m" "$TARGET" "$EXTRA" >"$T/fit_$m.json"
    echo "$EXTRA" | sed 's/^,//' >"$T/$m.options"
    : >"$T/$m.fit"
    echo "   $m: fit..." >&2
    if ! curl_once "$ON/v1/models" "$T/fit_$m.json" "$T/$m.fit"; then
        echo "fit failed: HTTP ${last%% *}, $(error_text "$T/last.json")" >"$T/$m.status"
        status=1
        continue
    fi
    cp "$T/last.json" "$T/$m.fitresponse"
    # The first predict on each daemon must answer a mean (rfgp: out of warm-up).
    st=ok
    for d in on off; do
        base=$ON
        [ $d = off ] && base=$OFF
        r=$(curl -sS --max-time 60 -o "$T/chk.json" -w '%{http_code}' -H 'Content-Type: application/json' \
            --data-binary @"$T/p1.json" "$base/v1/models/concrete_$m/predict" 2>/dev/null)
        if [ "$r" != 200 ]; then
            st="predict failed on the $d daemon: HTTP $r, $(error_text "$T/chk.json")"
            break
        elif ! tr -d ' \n' <"$T/chk.json" | grep -q '"mean":\[-\{0,1\}[0-9]'; then
            st="predict on the $d daemon answered no mean: $(error_text "$T/chk.json")"
            break
        fi
    done
    echo "$st" >"$T/$m.status"
    [ "$st" = ok ] || status=1
done
# wrk per method and connection count, the on and off runs of a cell back to
# back, which of them first alternating from cell to cell (against drift).
nm=$(echo "$METHODS" | wc -w)
cell=0
echo "   all-methods table: $nm methods x 3 x 2 wrk runs of ${DUR}s (~$((nm * 6 * DUR / 60 + 1)) min)..." >&2
for m in $METHODS; do
    [ "$(cat "$T/$m.status")" = ok ] || continue
    for c in 1 16 64; do
        order="on off"
        [ $((cell % 2)) = 1 ] && order="off on"
        cell=$((cell + 1))
        for d in $order; do
            base=$ON
            [ $d = off ] && base=$OFF
            wrk_run "$base/v1/models/concrete_$m/predict" "$T/p1.json" "$c" "$T/main.$m.$d.c$c" "$DUR"
            echo "$rps $p50 $p99 $errors" >"$T/main.$m.$d.c$c"
        done
    done
done

# ---- 3. exact, 1000-point predict on both daemons (runs alternated)
echo "   exact 1000-point predict, on and off..." >&2
: >"$T/p1000.on"
: >"$T/p1000.off"
if [ "$(cat "$T/exact.status" 2>/dev/null)" = ok ]; then
    i=0
    while [ $i -lt "$RUNS" ]; do
        curl_once "$ON/v1/models/concrete_exact/predict" "$T/p1000.json" "$T/p1000.on"
        curl_once "$OFF/v1/models/concrete_exact/predict" "$T/p1000.json" "$T/p1000.off"
        i=$((i + 1))
    done
fi

# ---- 4. per method: 1000-point predict and 100 x 100 sample (on daemon)
echo "   per-method 1000-point predicts and samples..." >&2
for m in $METHODS; do
    [ "$(cat "$T/$m.status")" = ok ] || continue
    sbody=$T/s100.json
    method_config "$m"
    [ "$TARGET" = y ] || sbody=$T/s100latent.json
    curl_times "$ON/v1/models/concrete_$m/predict" "$T/p1000.json" "$RUNS_M" "$T/$m.p1000"
    curl_times "$ON/v1/models/concrete_$m/sample" "$sbody" "$RUNS_M" "$T/$m.s100"
done
if [ "$(cat "$T/msrfr.status" 2>/dev/null)" = ok ]; then
    curl_times "$ON/v1/models/concrete_msrfr/predict" "$T/p1000qc.json" "$RUNS_M" "$T/msrfr.p1000qc"
fi
# Whatever the daemons count about batching (none before batching exists).
for d in on off; do
    base=$ON
    [ $d = off ] && base=$OFF
    curl -sS --max-time 10 "$base/metrics" 2>/dev/null | grep -i batch | grep -v '^#' | head -n 20 >"$T/$d.metrics"
done

# ---- scikit-learn behind Flask under gunicorn: table 1, then its all-methods row
SK=""
SKIP=""
if ! "$PY" -c 'import sklearn, flask' >/dev/null 2>&1; then
    SKIP="skipped: $PY cannot import sklearn and flask (Debian packages python3-sklearn, python3-flask)"
elif ! command -v gunicorn >/dev/null 2>&1; then
    SKIP="skipped: gunicorn is not installed (Debian package gunicorn)"
else
    echo "   scikit-learn: fits and wrk..." >&2
    SPORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    SKLEARN_SERVICE_DIR=$T/sklearn gunicorn -w 2 -b "127.0.0.1:$SPORT" --timeout 600 \
        --chdir "$ROOT/bench/http" sklearn_service:app >"$T/gunicorn.log" 2>&1 &
    SPID=$!
    PIDS="$PIDS $SPID"
    i=0
    until curl -fsS --max-time 2 "http://127.0.0.1:$SPORT/healthz" >/dev/null 2>&1; do
        i=$((i + 1))
        if [ $i -gt 150 ] || ! kill -0 "$SPID" 2>/dev/null; then
            SKIP="skipped: gunicorn did not start ($(tail -n 1 "$T/gunicorn.log"))"
            break
        fi
        sleep 0.2
    done
    if [ -z "$SKIP" ]; then
        if measure sklearn "http://127.0.0.1:$SPORT"; then
            SK=yes
            for c in 1 16 64; do
                wrk_run "http://127.0.0.1:$SPORT/v1/models/concrete/predict" "$T/p1.json" "$c" "$T/main.sklearn.c$c" "$DUR"
                echo "$rps $p50 $p99 $errors" >"$T/main.sklearn.c$c"
            done
        else
            SKIP="skipped: the scikit-learn fit failed"
        fi
    fi
fi
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)
ELAPSED=$(($(date +%s) - START))

# ---- header
ver=$("$PY" -c 'import sklearn; print(sklearn.__version__)' 2>/dev/null)
threads=$(nproc 2>/dev/null || echo "?")
cpu=$(sed -n 's/^model name[^:]*: *//p' /proc/cpuinfo 2>/dev/null | head -n 1)
# The batching variables' defaults as --help states them ("env VAR, default D, ...").
helpbatch=$("$BIN" --help 2>&1 | sed -n 's/.*env \(GPSERVE_BATCH_[A-Z_]*\), default \([^,]*\).*/\1 = \2/p' |
    tr '\n' ',' | sed 's/,$//; s/,/, /g')
echo "Machine: $threads CPUs (${cpu:-?}), loopback 127.0.0.1; load average ${LOAD0:-?} at the start,"
echo "${LOAD1:-?} at the end; this run took $((ELAPSED / 60)) min $((ELAPSED % 60)) s${QUICK:+ (quick)}."
echo "wrk: ${DUR1}s a row in table 1, ${DUR}s a row in the all-methods table (DUR; $nm methods x 3"
echo "connection counts x 2 daemons); $RUNS sequential curl runs of table 1's big requests and of the"
echo "exact 1000-point predict per daemon, $RUNS_M per method's big requests, $FITS fits in table 1."
echo "gpserve: two daemons of $BUILD/gpserve on one database (the same fitted models), otherwise defaults:"
on_desc=$ON_ENV
[ -n "$on_desc" ] || on_desc="GPSERVE_BATCH_DELAY_US and GPSERVE_BATCH_MAX_POINTS unset (the daemon defaults)"
echo "  batching on:  $on_desc"
echo "  batching off: $OFF_ENV"
if [ -n "$helpbatch" ]; then
    echo "  the daemon defaults (gpserve --help): $helpbatch"
else
    echo "  note: this build's --help has no --batch-* option: it does not batch, so both daemons"
    echo "  behave the same and their rows differ only by noise."
fi
echo "  start-up line (on):  $(head -n 1 "$T/on.log")"
echo "  start-up line (off): $(head -n 1 "$T/off.log")"
for d in on off; do
    [ -s "$T/$d.metrics" ] && echo "  /metrics batch lines ($d): $(tr '\n' ';' <"$T/$d.metrics" | sed 's/;$//')"
done
echo "scikit-learn ${ver:-(not installed)} GaussianProcessRegressor under Flask + gunicorn -w 2 (sync workers)."
echo

# ---- table 1
echo "concrete, exact GP (rbf ARD + noise), $ntrain training rows (test20 split 0), $ntest test rows;"
echo "gpserve: the batching-on daemon. Times in ms; \"ratio\" = how many times better gpserve is."
echo
row() { # LABEL OURS THEIRS KIND(higher|lower)
    r=$(awk -v a="$2" -v b="$3" -v k="$4" 'BEGIN {
        if (a == "" || b == "" || a == "-" || b == "-" || a + 0 == 0 || b + 0 == 0) { print "-"; exit }
        r = (k == "higher") ? a / b : b / a; printf (r < 1 ? "%.2f×" : "%.1f×"), r }')
    echo "| $1 | ${2:--} | ${3:--} | $r |"
}
if [ -z "$G1" ]; then
    echo "skipped: gpserve's exact fit failed (see the messages on stderr)"
else
    echo "| measure | gpserve | scikit-learn + Flask | ratio |"
    echo "|---|---:|---:|---:|"
    for c in 1 16 64; do
        read -r g_rps g_p50 g_p99 g_err <"$T/gpserve.c$c"
        s_rps=""
        s_p50=""
        s_p99=""
        s_err=""
        [ -n "$SK" ] && read -r s_rps s_p50 s_p99 s_err <"$T/sklearn.c$c"
        row "predict 1 point, $c conn: requests/s" "$g_rps" "$s_rps" higher
        row "predict 1 point, $c conn: p50 ms" "$g_p50" "$s_p50" lower
        row "predict 1 point, $c conn: p99 ms" "$g_p99" "$s_p99" lower
        [ "${g_err:-0}" != 0 ] && echo "| (gpserve: $g_err non-2xx or socket errors at $c conn) | | | |"
        [ -n "$SK" ] && [ "${s_err:-0}" != 0 ] && echo "| (scikit-learn: $s_err non-2xx or socket errors at $c conn) | | | |"
    done
    for m in p1000:"predict 1000 points" s100:"sample 100 × 100 points" fit:"fit $ntrain points end to end"; do
        key=${m%%:*}
        label=${m#*:}
        stats "$T/gpserve.$key" >"$T/st"
        read -r g_med g_p99 <"$T/st"
        s_med=""
        s_p99=""
        if [ -n "$SK" ]; then
            stats "$T/sklearn.$key" >"$T/st"
            read -r s_med s_p99 <"$T/st"
        fi
        row "$label: median ms" "$g_med" "$s_med" lower
        row "$label: p99 ms" "$g_p99" "$s_p99" lower
    done
fi
echo
[ -n "$SK" ] || echo "scikit-learn side $SKIP"
if [ -n "$G1" ]; then
    # The same run's ceiling: what a request costs besides prediction.
    read -r h_rps h_p50 h_p99 h_err <"$T/ceiling.healthz"
    read -r m_rps m_p50 m_p99 m_err <"$T/ceiling.get"
    read -r g_rps g_p50 g_p99 g_err <"$T/gpserve.c16"
    frac() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 == 0 || b + 0 == 0) print "-"; else printf "%.0f%%", 100 * a / b }'; }
    echo
    echo "| gpserve, 16 connections | requests/s | p99 ms | of /healthz |"
    echo "|---|---:|---:|---:|"
    echo "| GET /healthz (the HTTP ceiling) | $h_rps | $h_p99 | 100% |"
    echo "| GET /v1/models/concrete (no computation) | $m_rps | $m_p99 | $(frac "$m_rps" "$h_rps") |"
    echo "| predict 1 point (exact) | $g_rps | $g_p99 | $(frac "$g_rps" "$h_rps") |"
    [ "${h_err:-0}${m_err:-0}" != 00 ] && echo "| (errors: /healthz $h_err, GET model $m_err) | | | |"
fi

# ---- table 2: every method, single-point predict, batching on and off
echo
echo "## HTTP: every method, single-point predict, dynamic batching on and off"
echo
echo "Each method fitted once on the same $ntrain rows (options in the last table), served by both"
echo "daemons; wrk ${DUR}s a row, the on and off runs of each cell back to back (which first"
echo "alternating). req/s: requests per second; p99 in ms; 16/1: requests/s at 16 connections over 1."
[ -n "$NOT_SERVED" ] && echo "Not listed by GET /v1/methods (not measured):$NOT_SERVED."
echo
echo "| method | batching | 1 conn req/s | p99 ms | 16 conn req/s | p99 ms | 64 conn req/s | p99 ms | 16/1 |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
# cells FILEPREFIX: "| rps | p99 | ..." for 1, 16, 64 connections and the 16/1 ratio.
cells() {
    line=""
    r1=-
    r16=-
    for c in 1 16 64; do
        if [ -f "$1.c$c" ]; then read -r a_rps a_p50 a_p99 a_err <"$1.c$c"; else a_rps=-; a_p99=-; a_err=0; fi
        a_rps=$(awk -v v="$a_rps" 'BEGIN { if (v == "-" || v == "") print "-"; else printf "%.0f", v }')
        [ "${a_err:-0}" != 0 ] && a_rps="$a_rps ($a_err errors)"
        a_p99=$(awk -v v="$a_p99" 'BEGIN { if (v == "-" || v == "") print "-"; else printf "%.2f", v }')
        line="$line $a_rps | $a_p99 |"
        case $c in 1) r1=$a_rps ;; 16) r16=$a_rps ;; esac
    done
    q=$(awk -v a="$r16" -v b="$r1" 'BEGIN { if (a + 0 == 0 || b + 0 == 0) print "-"; else printf "%.2f", a / b }')
    echo "$line $q |"
}
for m in $METHODS; do
    st=$(cat "$T/$m.status" 2>/dev/null)
    if [ "$st" != ok ]; then
        echo "| $m | - | ${st:-not measured} | | | | | | |"
        continue
    fi
    echo "| $m | on |$(cells "$T/main.$m.on")"
    echo "| | off |$(cells "$T/main.$m.off")"
done
if [ -n "$SK" ]; then
    echo "| scikit-learn exact (Flask, gunicorn -w 2) | - |$(cells "$T/main.sklearn")"
else
    echo "| scikit-learn exact (Flask, gunicorn -w 2) | - | $SKIP | | | | | | |"
fi
echo
echo "Batching on ÷ off, requests/s (above 1: batching serves more):"
echo
echo "| method | 1 conn | 16 conn | 64 conn | p99 on ÷ off, 64 conn |"
echo "|---|---:|---:|---:|---:|"
for m in $METHODS; do
    [ "$(cat "$T/$m.status" 2>/dev/null)" = ok ] || continue
    line="| $m |"
    for c in 1 16 64; do
        read -r a_rps a_p50 a_p99 a_err <"$T/main.$m.on.c$c"
        read -r b_rps b_p50 b_p99 b_err <"$T/main.$m.off.c$c"
        line="$line $(awk -v a="$a_rps" -v b="$b_rps" 'BEGIN { if (a + 0 == 0 || b + 0 == 0) print "-"; else printf "%.2f", a / b }') |"
    done
    line="$line $(awk -v a="$a_p99" -v b="$b_p99" 'BEGIN { if (a + 0 == 0 || b + 0 == 0) print "-"; else printf "%.2f", a / b }') |"
    echo "$line"
done
echo

# ---- table 3: exact 1000-point predict, on and off
echo
echo "## HTTP: exact, a 1000-point predict request, batching on and off"
echo
echo "$RUNS sequential curl runs per daemon, alternated; times in ms."
echo
echo "| request | on: median | on: p99 | off: median | off: p99 |"
echo "|---|---:|---:|---:|---:|"
stats "$T/p1000.on" >"$T/st"
read -r a_med a_p99 <"$T/st"
stats "$T/p1000.off" >"$T/st"
read -r b_med b_p99 <"$T/st"
echo "| exact, predict 1000 points | $a_med | $a_p99 | $b_med | $b_p99 |"
echo

# ---- table 4: per method, the fit and the large requests
echo
echo "## HTTP: every method, fit and large requests (batching-on daemon)"
echo
echo "The options of each fit (all rbf ARD, seed 0; svgp and pls on the strength rounded to an"
echo "integer count, Poisson likelihood; kept short: serving cost, not accuracy). Fit: the one fit"
echo "the tables above served; 1000-point predict and 100 × 100 sample (latent draws for the count"
echo "methods): $RUNS_M sequential runs each. Times in ms."
echo
echo "| method | fit members | fit ms | predict 1000 points: median | p99 | sample 100 × 100: median | p99 |"
echo "|---|---|---:|---:|---:|---:|---:|"
for m in $METHODS; do
    opts=$(cat "$T/$m.options" 2>/dev/null)
    [ -n "$opts" ] || opts="(defaults)"
    st=$(cat "$T/$m.status" 2>/dev/null)
    f=$(head -n 1 "$T/$m.fit" 2>/dev/null)
    if [ "$st" != ok ]; then
        echo "| $m | \`$opts\` | ${f:--} | ${st:-not measured} | | | |"
        continue
    fi
    stats "$T/$m.p1000" >"$T/st"
    read -r a_med a_p99 <"$T/st"
    stats "$T/$m.s100" >"$T/st"
    read -r s_med s_p99 <"$T/st"
    echo "| $m | \`$opts\` | $(printf %.0f "$f") | $a_med | $a_p99 | $s_med | $s_p99 |"
done
if [ -f "$T/msrfr.p1000qc" ]; then
    stats "$T/msrfr.p1000qc" >"$T/st"
    read -r a_med a_p99 <"$T/st"
    echo "| msrfr, predict 1000 points with \"quantiles\": [0.05, 0.95], \"components\": true | | | $a_med | $a_p99 | | |"
fi
echo
if [ "$status" != 0 ]; then
    echo "Some gpserve fits or predicts failed (see the tables and the messages on stderr)."
    echo
fi
exit $status
