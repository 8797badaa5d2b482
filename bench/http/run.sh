#!/bin/sh
# HTTP benchmark (a benchmark, not a test: it prints figures and asserts nothing).
# Usage: bench/http/run.sh BUILD_DIR [--quick]        (from the repository root)
#
# Starts BUILD_DIR/gpserve on a free loopback port with a temporary database,
# fits an `exact` model of concrete (test20 split 0: the 927 training rows),
# then measures over HTTP on 127.0.0.1:
#   - single-point predict with wrk at 1, 16 and 64 connections (requests/s,
#     p50, p99 from wrk --latency), each run bounded (-d 10s; --quick: 3s);
#   - a 1000-point predict request, a 100-sample request over 100 points and a
#     fit request end to end: curl time over sequential runs (median, p99);
# and the same against scikit-learn's GaussianProcessRegressor behind Flask
# under gunicorn -w 2 (bench/http/sklearn_service.py), when Debian's
# python3-sklearn, python3-flask and gunicorn are installed. Prints a markdown
# table with both sides and the ratio on stdout.
# Then, on the same gpserve daemon, an `ssgp` model of the same training rows
# (options features 100, frequencies qmc: sparse-spectrum GP, O(R^2) per
# predicted point instead of exact's O(N^2)) under the name concrete_ssgp,
# measured the same way (fits, wrk at 1/16/64 connections, the 1000-point
# predict and the sample request), printed as a second table against exact.
# Then, on the same daemon again, an `msrfr` model of the same training rows
# (mixture Stein random feature regression: options particles 6, features 100,
# iterations 100, i.e. M = 6 sparse-spectrum GPs of R = 100 frequencies moved
# jointly by SVGD, predicting a mixture of M Gaussians: O(M·R^2) per point;
# iterations low on purpose, as this measures serving cost, not accuracy: a fit
# at the default 1000 iterations takes ~12 s on concrete) under the name concrete_msrfr,
# measured as ssgp is, plus one msrfr-only request: the 1000-point predict with
# "quantiles": [0.05, 0.95] and "components": true (the mixture quantiles are
# found by root finding per point); printed as a third table beside ssgp and
# exact.
# Needs wrk (Debian package wrk) and curl; skipped with a message without wrk.

BUILD=${1:-build}
[ $# -gt 0 ] && shift
QUICK=""
for a in "$@"; do [ "$a" = --quick ] && QUICK=yes; done
ROOT=$(cd "$(dirname "$0")/../.." && pwd) || exit 1
cd "$ROOT" || exit 1
case $BUILD in /*) BIN=$BUILD/gpserve ;; *) BIN=$ROOT/$BUILD/gpserve ;; esac
DATASETS=${GPSERVE_DATASETS:-../shared/datasets}
: "${OPENBLAS_THREAD_TIMEOUT:=16}"
export OPENBLAS_THREAD_TIMEOUT
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY
unset GPSERVE_BIND GPSERVE_PORT GPSERVE_DB GPSERVE_API_KEY_FILE GPSERVE_MAX_BODY_MB

DUR=10
RUNS=50   # sequential curl runs of the big predict / sample requests
FITS=5    # fit requests
if [ -n "$QUICK" ]; then
    DUR=3
    RUNS=15
    FITS=2
fi
PY=/usr/bin/python3

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

# ---- request bodies (the same for both services)
# Training rows: every row not on line 1 of the test20 file (split 0).
awk -F, 'NR == FNR { if (FNR == 1) for (i = 1; i <= NF; i++) test[$i] = 1; next }
         FNR == 1 { next }
         { r = FNR - 2; if (r in test) print > "/dev/stderr"; else print }' \
    FS=' ' "$SPLIT" FS=, "$CSV" >"$T/train.csv" 2>"$T/test.csv"
ntrain=$(grep -c . "$T/train.csv")
ntest=$(grep -c . "$T/test.csv")
awk -F, '{ row = "[" $1; for (j = 2; j < NF; j++) row = row "," $j; row = row "]";
           X = X (NR > 1 ? "," : "") row; y = y (NR > 1 ? "," : "") $NF }
         END { printf "{\"name\":\"concrete\",\"method\":\"exact\",\"kernel\":{\"type\":\"rbf\",\"ard\":true},\"seed\":0,\"X\":[%s],\"y\":[%s]}", X, y }' \
    "$T/train.csv" >"$T/fit.json"
# points_json N: the first N test-set rows, cycled, as {"X": [...]}; EXTRA appended.
points_json() {
    awk -F, -v n="$1" -v extra="$2" '{ row = "[" $1; for (j = 2; j < NF; j++) row = row "," $j; rows[NR] = row "]" }
        END { printf "{\"X\":["; for (i = 0; i < n; i++) printf "%s%s", (i ? "," : ""), rows[i % NR + 1]; printf "]%s}", extra }' \
        "$T/test.csv"
}
points_json 1 "" >"$T/p1.json"
points_json 1000 "" >"$T/p1000.json"
points_json 100 ',"n_samples":100,"seed":7,"include_noise":true' >"$T/s100.json"
points_json 1000 ',"quantiles":[0.05,0.95],"components":true' >"$T/p1000qc.json"

# ---- helpers
# wait_port LOGFILE PID: the port of gpserve's "listening" line.
wait_port() {
    i=0
    while [ $i -lt 300 ]; do
        port=$(sed -n 's/.*gpserve listening on 127\.0\.0\.1:\([0-9][0-9]*\).*/\1/p' "$1" | head -n 1)
        [ -n "$port" ] && { echo "$port"; return 0; }
        kill -0 "$2" 2>/dev/null || return 1
        sleep 0.1
        i=$((i + 1))
    done
    return 1
}
# wrk_run URL BODY CONNS OUTPREFIX: sets rps p50 p99 (ms) and errors.
wrk_run() {
    th=2
    [ "$3" -lt 2 ] && th=1
    WRK_BODY=$2 wrk -t "$th" -c "$3" -d "${DUR}s" --timeout 10s --latency -s bench/http/post.lua "$1" >"$4.wrk" 2>&1
    rps=$(awk '/^Requests\/sec:/ { print $2 }' "$4.wrk")
    p50=$(awk '$1 == "50%" { print $2 }' "$4.wrk" | to_ms)
    p99=$(awk '$1 == "99%" { print $2 }' "$4.wrk" | to_ms)
    errors=$(awk '/Non-2xx or 3xx responses:/ { n += $NF } /Socket errors:/ { gsub(/[^0-9 ]/, " "); for (i = 1; i <= NF; i++) n += $i } END { print n + 0 }' "$4.wrk")
}
# to_ms: "635.91us" / "1.2ms" / "1.5s" -> milliseconds.
to_ms() {
    awk '{ v = $1; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v);
           f = (u == "us") ? 0.001 : (u == "ms") ? 1 : (u == "s") ? 1000 : (u == "m") ? 60000 : 1;
           printf "%.3f", v * f }'
}
# curl_times URL BODY RUNS OUT: RUNS sequential POSTs; total times (ms) in OUT, one a line.
curl_times() {
    : >"$4"
    i=0
    while [ $i -lt "$3" ]; do
        r=$(curl -sS --max-time 600 -o "$T/last.json" -w '%{http_code} %{time_total}' \
            -H 'Content-Type: application/json' --data-binary @"$2" "$1")
        case $r in 2??\ *) echo "${r#* }" | awk '{ printf "%.3f\n", $1 * 1000 }' >>"$4" ;;
        *) echo "     request to $1 failed: $r $(head -c 200 "$T/last.json")" >&2 ;;
        esac
        i=$((i + 1))
    done
}
# stats FILE: "median p99" of the numbers in FILE (nearest rank).
stats() {
    sort -n "$1" | awk '{ v[NR] = $1 } END {
        if (NR == 0) { print "- -"; exit }
        m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
        k = int(0.99 * NR); if (k < 0.99 * NR) k++; if (k < 1) k = 1;
        printf "%.2f %.2f\n", m, v[k] }'
}

# measure NAME BASEURL [FITBODY MODEL]: every figure of one service into $T/NAME.*
# (FITBODY defaults to $T/fit.json, MODEL, the model name in it, to concrete).
measure() {
    name=$1
    base=$2
    body=${3:-$T/fit.json}
    model=${4:-concrete}
    curl_times "$base/v1/models" "$body" "$FITS" "$T/$name.fit"
    if [ ! -s "$T/$name.fit" ]; then
        echo "     $name: the fit failed; nothing measured" >&2
        return 1
    fi
    cp "$T/last.json" "$T/$name.fitresponse"
    for c in 1 16 64; do
        wrk_run "$base/v1/models/$model/predict" "$T/p1.json" "$c" "$T/$name.c$c"
        echo "$rps $p50 $p99 $errors" >"$T/$name.c$c"
    done
    curl_times "$base/v1/models/$model/predict" "$T/p1000.json" "$RUNS" "$T/$name.p1000"
    curl_times "$base/v1/models/$model/sample" "$T/s100.json" "$RUNS" "$T/$name.s100"
}

# ---- gpserve
"$BIN" --bind 127.0.0.1 --port 0 --db "$T/gpserve.db" >"$T/gpserve.log" 2>&1 &
GPID=$!
PIDS="$PIDS $GPID"
if ! GPORT=$(wait_port "$T/gpserve.log" "$GPID"); then
    echo "gpserve did not start:"
    tail -n 5 "$T/gpserve.log"
    exit 1
fi
# gpserve's request log would grow with every wrk request: it goes to the file.
measure gpserve "http://127.0.0.1:$GPORT" || exit 1
threads=$(nproc 2>/dev/null || echo "?")

# ---- ssgp on the same daemon: the same rows, features 100, qmc frequencies
SSGP_R=100
SSGP_FREQ=qmc
sed "s/\"name\":\"concrete\",\"method\":\"exact\"/\"name\":\"concrete_ssgp\",\"method\":\"ssgp\",\"options\":{\"features\":$SSGP_R,\"frequencies\":\"$SSGP_FREQ\"}/" \
    "$T/fit.json" >"$T/fit_ssgp.json"
SS=""
if measure gpserve_ssgp "http://127.0.0.1:$GPORT" "$T/fit_ssgp.json" concrete_ssgp; then
    SS=yes
    ss_used=$(sed -n 's/.*"frequencies": *"\([a-z]*\)".*/\1/p' "$T/gpserve_ssgp.fitresponse" | head -n 1)
fi

# ---- msrfr on the same daemon: the same rows, particles 6, features 100,
# iterations 100 (serving cost, not accuracy: the default 1000 takes ~20 s a fit)
MS_M=6
MS_R=100
MS_IT=100
sed "s/\"name\":\"concrete\",\"method\":\"exact\"/\"name\":\"concrete_msrfr\",\"method\":\"msrfr\",\"options\":{\"particles\":$MS_M,\"features\":$MS_R,\"iterations\":$MS_IT}/" \
    "$T/fit.json" >"$T/fit_msrfr.json"
MS=""
if measure gpserve_msrfr "http://127.0.0.1:$GPORT" "$T/fit_msrfr.json" concrete_msrfr; then
    MS=yes
    # msrfr only: the mixture's quantiles (root finding per point) and every component.
    curl_times "http://127.0.0.1:$GPORT/v1/models/concrete_msrfr/predict" "$T/p1000qc.json" "$RUNS" \
        "$T/gpserve_msrfr.p1000qc"
fi

# ---- scikit-learn behind Flask under gunicorn
SK=""
if ! "$PY" -c 'import sklearn, flask' >/dev/null 2>&1; then
    SKIP="skipped: $PY cannot import sklearn and flask (Debian packages python3-sklearn, python3-flask)"
elif ! command -v gunicorn >/dev/null 2>&1; then
    SKIP="skipped: gunicorn is not installed (Debian package gunicorn)"
else
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
        if measure sklearn "http://127.0.0.1:$SPORT"; then SK=yes; else SKIP="skipped: the scikit-learn fit failed"; fi
    fi
fi

# ---- table
ver=$("$PY" -c 'import sklearn; print(sklearn.__version__)' 2>/dev/null)
echo "concrete, exact GP (rbf ARD + noise), $ntrain training rows (test20 split 0), $ntest test rows;"
echo "loopback 127.0.0.1, $threads CPUs; wrk ${DUR}s per row, $RUNS sequential curl runs per big request,"
echo "$FITS fits. gpserve with its defaults; scikit-learn ${ver:-?} GaussianProcessRegressor under"
echo "Flask + gunicorn -w 2 (sync workers). Times in ms; \"ratio\" = how many times better gpserve is."
echo
echo "| measure | gpserve | scikit-learn + Flask | ratio |"
echo "|---|---:|---:|---:|"
row() { # LABEL OURS THEIRS KIND(higher|lower)
    r=$(awk -v a="$2" -v b="$3" -v k="$4" 'BEGIN {
        if (a == "" || b == "" || a == "-" || b == "-" || a + 0 == 0 || b + 0 == 0) { print "-"; exit }
        printf "%.1f×", (k == "higher") ? a / b : b / a }')
    echo "| $1 | $2 | ${3:--} | $r |"
}
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
echo
[ -n "$SK" ] || echo "scikit-learn side $SKIP"

# ---- table 2: ssgp against exact on the same daemon
echo
echo "## HTTP: gpserve ssgp against gpserve exact (same daemon, same rows)"
echo
if [ -z "$SS" ]; then
    echo "skipped: the ssgp fit failed (see the messages above)"
    echo
else
    echo "concrete, $ntrain training rows: method ssgp with features $SSGP_R, frequencies $SSGP_FREQ"
    echo "(used: ${ss_used:-?}), rbf ARD + noise, on the daemon that served the exact rows above;"
    echo "same requests and runs. \"ratio\" = how many times better ssgp is than exact."
    echo
    echo "| measure | gpserve ssgp (R=$SSGP_R) | gpserve exact | ratio |"
    echo "|---|---:|---:|---:|"
    for c in 1 16 64; do
        read -r a_rps a_p50 a_p99 a_err <"$T/gpserve_ssgp.c$c"
        read -r g_rps g_p50 g_p99 g_err <"$T/gpserve.c$c"
        row "predict 1 point, $c conn: requests/s" "$a_rps" "$g_rps" higher
        row "predict 1 point, $c conn: p50 ms" "$a_p50" "$g_p50" lower
        row "predict 1 point, $c conn: p99 ms" "$a_p99" "$g_p99" lower
        [ "${a_err:-0}" != 0 ] && echo "| (ssgp: $a_err non-2xx or socket errors at $c conn) | | | |"
    done
    for m in p1000:"predict 1000 points" s100:"sample 100 × 100 points" fit:"fit $ntrain points end to end"; do
        key=${m%%:*}
        label=${m#*:}
        stats "$T/gpserve_ssgp.$key" >"$T/st"
        read -r a_med a_p99 <"$T/st"
        stats "$T/gpserve.$key" >"$T/st"
        read -r g_med g_p99 <"$T/st"
        row "$label: median ms" "$a_med" "$g_med" lower
        row "$label: p99 ms" "$a_p99" "$g_p99" lower
    done
    echo
fi

# ---- table 3: msrfr beside ssgp and exact on the same daemon
echo
echo "## HTTP: gpserve msrfr against gpserve ssgp and exact (same daemon, same rows)"
echo
if [ -z "$MS" ]; then
    echo "skipped: the msrfr fit failed (see the messages above)"
    exit 0
fi
# wrk_fields NAME C: "rps p50 p99 errors" of NAME at C connections ("- - - 0" if not measured).
wrk_fields() { if [ -f "$T/$1.c$2" ]; then cat "$T/$1.c$2"; else echo "- - - 0"; fi; }
# stat_fields NAME KEY: "median p99" of $T/NAME.KEY ("- -" if not measured).
stat_fields() { if [ -f "$T/$1.$2" ]; then stats "$T/$1.$2"; else echo "- -"; fi; }
row3() { # LABEL MSRFR SSGP EXACT
    echo "| $1 | ${2:--} | ${3:--} | ${4:--} |"
}
echo "concrete, $ntrain training rows: method msrfr with particles $MS_M, features $MS_R, iterations"
echo "$MS_IT (M = $MS_M sparse-spectrum GPs of R = $MS_R frequencies, prediction a mixture of M Gaussians),"
echo "rbf ARD + noise, on the daemon that served the rows above; same requests and runs. Iterations are"
echo "kept low on purpose (default 1000): this table is about serving cost, not accuracy, and a fit at"
echo "1000 iterations takes ~12 s (bench/results/msrfr.md). The msrfr-only rows add \"quantiles\": [0.05, 0.95] and"
echo "\"components\": true to the 1000-point predict: the mixture's quantiles are found by root finding"
echo "on its CDF per point. Times in ms."
echo
echo "| measure | gpserve msrfr (M=$MS_M, R=$MS_R) | gpserve ssgp (R=$SSGP_R) | gpserve exact |"
echo "|---|---:|---:|---:|"
for c in 1 16 64; do
    wrk_fields gpserve_msrfr "$c" >"$T/st"
    read -r m_rps m_p50 m_p99 m_err <"$T/st"
    wrk_fields gpserve_ssgp "$c" >"$T/st"
    read -r a_rps a_p50 a_p99 a_err <"$T/st"
    read -r g_rps g_p50 g_p99 g_err <"$T/gpserve.c$c"
    row3 "predict 1 point, $c conn: requests/s" "$m_rps" "$a_rps" "$g_rps"
    row3 "predict 1 point, $c conn: p50 ms" "$m_p50" "$a_p50" "$g_p50"
    row3 "predict 1 point, $c conn: p99 ms" "$m_p99" "$a_p99" "$g_p99"
    [ "${m_err:-0}" != 0 ] && echo "| (msrfr: $m_err non-2xx or socket errors at $c conn) | | | |"
done
for m in p1000:"predict 1000 points" p1000qc:"predict 1000 points, quantiles 0.05/0.95 + components (msrfr only)" \
         s100:"sample 100 × 100 points" fit:"fit $ntrain points end to end"; do
    key=${m%%:*}
    label=${m#*:}
    stat_fields gpserve_msrfr "$key" >"$T/st"
    read -r m_med m_p99 <"$T/st"
    a_med=""
    a_p99=""
    g_med=""
    g_p99=""
    if [ "$key" != p1000qc ]; then
        stat_fields gpserve_ssgp "$key" >"$T/st"
        read -r a_med a_p99 <"$T/st"
        stat_fields gpserve "$key" >"$T/st"
        read -r g_med g_p99 <"$T/st"
    fi
    row3 "$label: median ms" "$m_med" "$a_med" "$g_med"
    row3 "$label: p99 ms" "$m_p99" "$a_p99" "$g_p99"
done
echo
exit 0
