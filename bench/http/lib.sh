#!/bin/sh
# Helpers of the HTTP benchmarks (bench/http/run.sh, bench/http/protocols.sh),
# sourced by them: they use the caller's $T (a temporary directory) and write
# nothing else. Needs wrk, curl and awk.

# bench_setup "$@" (with ROOT set): BUILD (the first argument, default build)
# and QUICK (--quick among the others, or QUICK=1 in the environment); cd to
# ROOT; BIN, DATASETS; OpenBLAS's idle threads stop spinning soon; no proxy,
# and none of the daemon's GPSERVE_* settings leak in from the environment.
bench_setup() {
    BUILD=${1:-build}
    [ $# -gt 0 ] && shift
    case ${QUICK:-} in "" | 0 | no) QUICK="" ;; *) QUICK=yes ;; esac
    for _a in "$@"; do [ "$_a" = --quick ] && QUICK=yes; done
    cd "$ROOT" || exit 1
    case $BUILD in /*) BIN=$BUILD/gpserve ;; *) BIN=$ROOT/$BUILD/gpserve ;; esac
    DATASETS=${GPSERVE_DATASETS:-../shared/datasets}
    : "${OPENBLAS_THREAD_TIMEOUT:=16}"
    export OPENBLAS_THREAD_TIMEOUT
    unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY
    unset GPSERVE_BIND GPSERVE_PORT GPSERVE_DB GPSERVE_API_KEY_FILE GPSERVE_MAX_BODY_MB
    unset GPSERVE_BATCH_DELAY_US GPSERVE_BATCH_MAX_POINTS
}
# median FILE COLUMN FORMAT: the median of a column of FILE, printed with FORMAT.
median() {
    awk -v c="$2" '{ print $c }' "$1" | sort -n | awk -v f="$3" '{ v[NR] = $1 } END {
        if (NR == 0) { print "-"; exit }
        printf f, (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
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
# wrk_run URL BODY CONNS OUTPREFIX SECONDS: sets rps p50 p99 (ms) and errors.
wrk_run() {
    th=2
    [ "$3" -lt 2 ] && th=1
    WRK_BODY=$2 wrk -t "$th" -c "$3" -d "${5}s" --timeout 10s --latency -s bench/http/post.lua "$1" >"$4.wrk" 2>&1
    rps=$(awk '/^Requests\/sec:/ { print $2 }' "$4.wrk")
    p50=$(awk '$1 == "50%" { print $2 }' "$4.wrk" | to_ms)
    p99=$(awk '$1 == "99%" { print $2 }' "$4.wrk" | to_ms)
    errors=$(awk '/Non-2xx or 3xx responses:/ { n += $NF } /Socket errors:/ { gsub(/[^0-9 ]/, " "); for (i = 1; i <= NF; i++) n += $i } END { print n + 0 }' "$4.wrk")
    [ -n "$rps" ] || rps=-
    [ -n "$p50" ] || p50=-
    [ -n "$p99" ] || p99=-
}
# wrk_get URL CONNS OUT DUR: wrk_run for a GET (no body); the same variables.
wrk_get() {
    th=2
    [ "$2" -lt 2 ] && th=1
    wrk -t "$th" -c "$2" -d "${4}s" --timeout 10s --latency "$1" >"$3.wrk" 2>&1
    rps=$(awk '/^Requests\/sec:/ { print $2 }' "$3.wrk")
    p50=$(awk '$1 == "50%" { print $2 }' "$3.wrk" | to_ms)
    p99=$(awk '$1 == "99%" { print $2 }' "$3.wrk" | to_ms)
    errors=$(awk '/Non-2xx or 3xx responses:/ { n += $NF } /Socket errors:/ { gsub(/[^0-9 ]/, " "); for (i = 1; i <= NF; i++) n += $i } END { print n + 0 }' "$3.wrk")
    [ -n "$rps" ] || rps=-
    [ -n "$p50" ] || p50=-
    [ -n "$p99" ] || p99=-
}
# to_ms: "635.91us" / "1.2ms" / "1.5s" -> milliseconds.
to_ms() {
    awk '{ v = $1; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v);
           f = (u == "us") ? 0.001 : (u == "ms") ? 1 : (u == "s") ? 1000 : (u == "m") ? 60000 : 1;
           printf "%.3f", v * f }'
}
# curl_once URL BODY OUT: one POST; its total time (ms) appended to OUT when
# answered 2xx; the answer in $T/last.json, "CODE SECONDS" in $last.
curl_once() {
    last=$(curl -sS --max-time 600 -o "$T/last.json" -w '%{http_code} %{time_total}' \
        -H 'Content-Type: application/json' --data-binary @"$2" "$1" 2>"$T/curl.err")
    case $last in
    2??\ *) echo "${last#* }" | awk '{ printf "%.3f\n", $1 * 1000 }' >>"$3" ;;
    *) echo "     request to $1 failed: $last $(head -c 200 "$T/last.json" 2>/dev/null)$(head -c 200 "$T/curl.err")" >&2
       return 1 ;;
    esac
}
# curl_times URL BODY RUNS OUT: RUNS sequential POSTs; total times (ms) in OUT, one a line.
curl_times() {
    : >"$4"
    i=0
    while [ $i -lt "$3" ]; do
        curl_once "$1" "$2" "$4"
        i=$((i + 1))
    done
}
# stats FILE: "median p99" of the numbers in FILE (nearest rank).
stats() {
    [ -f "$1" ] || { echo "- -"; return; }
    sort -n "$1" | awk '{ v[NR] = $1 } END {
        if (NR == 0) { print "- -"; exit }
        m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
        k = int(0.99 * NR); if (k < 0.99 * NR) k++; if (k < 1) k = 1;
        printf "%.2f %.2f\n", m, v[k] }'
}
# split_rows CSV SPLIT: the training rows (every row not on line 1 of the
# test20 file: split 0) into $T/train.csv, the test rows into $T/test.csv,
# without the header; sets ntrain, ntest and YMED (the median training target).
split_rows() {
    awk -F, 'NR == FNR { if (FNR == 1) for (i = 1; i <= NF; i++) test[$i] = 1; next }
             FNR == 1 { next }
             { r = FNR - 2; if (r in test) print > "/dev/stderr"; else print }' \
        FS=' ' "$2" FS=, "$1" >"$T/train.csv" 2>"$T/test.csv"
    ntrain=$(grep -c . "$T/train.csv")
    ntest=$(grep -c . "$T/test.csv")
    YMED=$(awk -F, '{ print $NF }' "$T/train.csv" | sort -n | awk '{ v[NR] = $1 } END {
        printf "%.6g", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
}
# fit_json NAME METHOD TARGET EXTRA: the fit body of the training rows, rbf ARD,
# seed 0; TARGET y (concrete strength), count (y rounded to an integer) or
# binary (1 when y > the median); EXTRA (",..." JSON members) after the seed.
fit_json() {
    awk -F, -v name="$1" -v method="$2" -v tgt="$3" -v extra="$4" -v med="$YMED" '
        { row = "[" $1; for (j = 2; j < NF; j++) row = row "," $j; row = row "]";
          v = $NF;
          if (tgt == "count") v = sprintf("%d", v + 0.5);
          else if (tgt == "binary") v = (v + 0 > med + 0) ? 1 : 0;
          X = X (NR > 1 ? "," : "") row; y = y (NR > 1 ? "," : "") v }
        END { printf "{\"name\":\"%s\",\"method\":\"%s\",\"kernel\":{\"type\":\"rbf\",\"ard\":true},\"seed\":0%s,\"X\":[%s],\"y\":[%s]}", name, method, extra, X, y }' \
        "$T/train.csv"
}
# points_json N: the first N test-set rows, cycled, as {"X": [...]}; EXTRA appended.
points_json() {
    awk -F, -v n="$1" -v extra="$2" '{ row = "[" $1; for (j = 2; j < NF; j++) row = row "," $j; rows[NR] = row "]" }
        END { printf "{\"X\":["; for (i = 0; i < n; i++) printf "%s%s", (i ? "," : ""), rows[i % NR + 1]; printf "]%s}", extra }' \
        "$T/test.csv"
}
