#!/bin/sh
# What the other doors of the daemon cost next to POST /v1/models/{name}/predict
# (a benchmark: it prints figures and asserts nothing, but exits 1 when a
# request it needs fails):
#   1. the Open Inference Protocol V2 (POST /v2/models/{name}/infer) against v1
#      predict for the same points: single-point requests at 1 and 16
#      connections (wrk DUR s a row, ROUNDS rounds, v1 and v2 alternated, the
#      first of a round alternating too), and a 1000-point request (RUNS
#      sequential curl runs each, alternated);
#   2. the Python client (clients/python, Debian's /usr/bin/python3):
#      Client.predict and GPServeRegressor.predict of one point, sequential,
#      against bare http.client on one kept-alive connection (CALLS calls each);
#   3. the browser view: GET / and GET /ui/vendor/chart.umd.min.js (the
#      largest file) at 16 connections.
# One daemon (the defaults: dynamic batching on), exact on the 927 concrete
# training rows (test20 split 0), the points from its test rows.
# Usage: sh bench/http/protocols.sh BUILD_DIR [--quick]   (from the repository root)
# Durations: DUR=5 ROUNDS=3 RUNS=40 CALLS=500 (about 2 minutes); --quick or
# QUICK=1: DUR=2 ROUNDS=2 RUNS=15 CALLS=200.
# Needs wrk, curl and jq; skipped with a message without wrk or the dataset.

ROOT=$(cd "$(dirname "$0")/../.." && pwd) || exit 1
# bench_setup, wait_port, wrk_run, curl_once, curl_times, stats, median, split_rows,
# fit_json, points_json
. "$ROOT/bench/http/lib.sh"
bench_setup "$@"
if [ -n "$QUICK" ]; then
    : "${DUR:=2}" "${ROUNDS:=2}" "${RUNS:=15}" "${CALLS:=200}"
else
    : "${DUR:=5}" "${ROUNDS:=3}" "${RUNS:=40}" "${CALLS:=500}"
fi

echo "## HTTP: the Open Inference Protocol V2, the Python client and the browser view against v1"
echo
for tool in wrk curl jq; do
    if ! command -v $tool >/dev/null 2>&1; then
        echo "skipped: $tool is not installed"
        exit 0
    fi
done
[ -x "$BIN" ] || { echo "skipped: $BIN is not built"; exit 1; }
CSV=$DATASETS/concrete.csv
SPLIT=$DATASETS/splits/concrete_test20.txt
if [ ! -f "$CSV" ] || [ ! -f "$SPLIT" ]; then
    echo "skipped: $CSV or $SPLIT not found (set GPSERVE_DATASETS)"
    exit 0
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/gpserve-bench-proto.XXXXXX") || exit 1
PID=""
cleanup() {
    [ -n "$PID" ] && kill -TERM "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

split_rows "$CSV" "$SPLIT"
fit_json concrete exact y "" >"$T/fit.json"
points_json 1 "" >"$T/p1.json"
points_json 1000 "" >"$T/p1000.json"
# infer_json FILE: the v2 body of the points of a v1 body (flat row-major data).
infer_json() {
    jq -c '{inputs: [{name: "X", datatype: "FP64", shape: [(.X | length), (.X[0] | length)],
            data: [.X[][]]}]}' "$1"
}
infer_json "$T/p1.json" >"$T/i1.json"
infer_json "$T/p1000.json" >"$T/i1000.json"

"$BIN" --bind 127.0.0.1 --port 0 --db "$T/gpserve.db" >"$T/daemon.log" 2>&1 &
PID=$!
port=$(wait_port "$T/daemon.log" "$PID") || { echo "gpserve did not start"; exit 1; }
BASE=http://127.0.0.1:$port
: >"$T/fit.ms"
curl_once "$BASE/v1/models" "$T/fit.json" "$T/fit.ms" || exit 1
V1=$BASE/v1/models/concrete/predict
V2=$BASE/v2/models/concrete/infer

# The two doors give the same numbers (the integration tests prove it bit for
# bit; here a guard that the figures compare like with like).
curl -sS -H 'Content-Type: application/json' --data-binary @"$T/p1000.json" "$V1" >"$T/v1.out"
curl -sS -H 'Content-Type: application/json' --data-binary @"$T/i1000.json" "$V2" >"$T/v2.out"
if ! jq -e --slurpfile a "$T/v1.out" '(.outputs[] | select(.name == "mean") | .data) == $a[0].mean' \
    "$T/v2.out" >/dev/null; then
    echo "v2 infer and v1 predict disagree: $(head -c 200 "$T/v2.out")"
    exit 1
fi

echo "   v1 predict and v2 infer, single point (wrk ${DUR}s, $ROUNDS rounds)..." >&2
for c in 1 16; do
    : >"$T/v1.c$c"
    : >"$T/v2.c$c"
    r=0
    while [ $r -lt "$ROUNDS" ]; do
        if [ $((r % 2)) -eq 0 ]; then order="v1 v2"; else order="v2 v1"; fi
        for door in $order; do
            if [ $door = v1 ]; then wrk_run "$V1" "$T/p1.json" $c "$T/w" "$DUR"
            else wrk_run "$V2" "$T/i1.json" $c "$T/w" "$DUR"; fi
            [ "$errors" = 0 ] || echo "   $door at $c connections: $errors errors" >&2
            echo "$rps $p99" >>"$T/$door.c$c"
        done
        r=$((r + 1))
    done
done

echo "   1000-point requests ($RUNS runs each, alternated)..." >&2
: >"$T/v1.p1000"
: >"$T/v2.p1000"
i=0
while [ $i -lt "$RUNS" ]; do
    curl_once "$V1" "$T/p1000.json" "$T/v1.p1000" || exit 1
    curl_once "$V2" "$T/i1000.json" "$T/v2.p1000" || exit 1
    i=$((i + 1))
done

echo "   the Python client and bare http.client, $CALLS sequential single-point calls..." >&2
PYOUT=""
if [ -x /usr/bin/python3 ]; then
    PYOUT=$(PYTHONPATH=$ROOT/clients/python /usr/bin/python3 - "$port" "$CALLS" "$T/p1.json" <<'EOF' 2>"$T/py.err"
import http.client, json, sys, time
from gpserve_client import Client
from gpserve_client.estimator import GPServeRegressor
port, calls = int(sys.argv[1]), int(sys.argv[2])
raw = open(sys.argv[3], "rb").read()
x = json.loads(raw)["X"]
base = "http://127.0.0.1:%d" % port
conn = http.client.HTTPConnection("127.0.0.1", port)
def bare():
    conn.request("POST", "/v1/models/concrete/predict", raw, {"Content-Type": "application/json"})
    json.loads(conn.getresponse().read())
client = Client(base)
est = GPServeRegressor(base)
est.name_, est.version_ = "concrete", 1       # serve the fitted model, no fit
est.n_features_in_ = len(x[0])
est.model_ = client.get_model("concrete")
def rate(f):
    f()                                       # warm: connection, imports
    t = time.perf_counter()
    for _ in range(calls):
        f()
    return calls / (time.perf_counter() - t)
print("%.0f %.0f %.0f" % (rate(bare), rate(lambda: client.predict("concrete", x)),
                          rate(lambda: est.predict(x, return_std=True))))
EOF
)
fi

echo "   the browser view's files (wrk ${DUR}s)..." >&2
ui_rate() { # PATH: sets rps p99 of GETs at 16 connections
    wrk -t 2 -c 16 -d "${DUR}s" --latency "$BASE$1" >"$T/ui.wrk" 2>&1
    rps=$(awk '/^Requests\/sec:/ { print $2 }' "$T/ui.wrk")
    rps=$(printf %.0f "$rps")
    p99=$(awk '$1 == "99%" { print $2 }' "$T/ui.wrk" | to_ms)
}
ui_rate /
UI_INDEX="$rps $p99 $(curl -sS -o /dev/null -w '%{size_download}' "$BASE/")"
ui_rate /ui/vendor/chart.umd.min.js
UI_CHART="$rps $p99 $(curl -sS -o /dev/null -w '%{size_download}' "$BASE/ui/vendor/chart.umd.min.js")"

echo "$(date -u +%Y-%m-%d), $(nproc) CPUs, load before: $(cut -d' ' -f1-3 /proc/loadavg); exact on $ntrain rows"
echo
echo "| request | connections | v1 predict: req/s | p99 ms | v2 infer: req/s | p99 ms | v2 / v1 |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for c in 1 16; do
    a=$(median "$T/v1.c$c" 1 %.0f); ap=$(median "$T/v1.c$c" 2 %.2f)
    b=$(median "$T/v2.c$c" 1 %.0f); bp=$(median "$T/v2.c$c" 2 %.2f)
    echo "| 1 point (median of $ROUNDS rounds) | $c | $a | $ap | $b | $bp | $(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", b / a }') |"
done
stats "$T/v1.p1000" >"$T/st"
read -r a_med a_p99 <"$T/st"
stats "$T/v2.p1000" >"$T/st"
read -r b_med b_p99 <"$T/st"
echo
echo "| request | v1 predict: median ms | p99 ms | v2 infer: median ms | p99 ms | v2 / v1 |"
echo "|---|---:|---:|---:|---:|---:|"
echo "| 1000 points, $RUNS sequential runs | $a_med | $a_p99 | $b_med | $b_p99 | $(awk -v a="$a_med" -v b="$b_med" 'BEGIN { printf "%.2f", b / a }') |"
echo
echo "| Python, $CALLS sequential single-point v1 predicts | calls/s |"
echo "|---|---:|"
if [ -n "$PYOUT" ]; then
    set -- $PYOUT
    echo "| bare http.client, one kept-alive connection, json.loads | $1 |"
    echo "| gpserve_client.Client.predict | $2 |"
    echo "| GPServeRegressor.predict(X, return_std=True) (numpy out) | $3 |"
else
    echo "| not measured: $(head -c 160 "$T/py.err" 2>/dev/null | tr '\n|' '  ') | - |"
fi
echo
echo "| browser view file, 16 connections | bytes | req/s | p99 ms |"
echo "|---|---:|---:|---:|"
set -- $UI_INDEX
echo "| GET / (index.html) | $3 | $1 | $2 |"
set -- $UI_CHART
echo "| GET /ui/vendor/chart.umd.min.js | $3 | $1 | $2 |"
