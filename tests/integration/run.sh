#!/bin/sh
# Integration tests: start the real daemon ($BUILD_DIR/gpserve) on free loopback
# ports with temporary databases, drive it with curl, and end with the line
# "N passed, N failed" (exit status non-zero when anything failed).
#
# Usage: tests/integration/run.sh BUILD_DIR        (from anywhere; BUILD_DIR is
#        relative to the repository root, e.g. build or build/san)
#
# POSIX sh (tests/run.sh runs it with `sh`); needs only curl, awk, sed, grep, tr,
# sort, cmp. Every request has a --max-time and every wait is bounded, so the
# suite cannot hang. Under the sanitizers (build/san, or GPSERVE_TEST_SLOW=N)
# every bound is multiplied. No test asserts on time.
#
# Cases, in order: health/readiness/methods; every curl example of README.md
# (between <!-- examples:begin/end -->, with their "# -> STATUS"); fits (JSON,
# closed form with fixed hyperparameters, CSV, concrete.csv), list/get/versions,
# predict (lengths, latent < observation variance, covariance, quantiles),
# concurrent predictions, sample (shape, seeds), async fit and job polling,
# every path+verb of /openapi.yaml, bad requests (status, code, field), a long
# fit with predictions meanwhile and its cancellation, /metrics, a second daemon
# on the same database, SIGTERM + restart with bit-identical bodies, delete, an
# API-key daemon, a full fit queue (429) and SIGTERM during a fit, the daemon
# logs, docker_check.sh, and the README configuration table against --help.
#
# Environment: GPSERVE_DATASETS (default ../shared/datasets) for concrete.csv;
# GPSERVE_TEST_VERBOSE=1 prints every response body of a failed case in full.

BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/../.." && pwd) || exit 1
cd "$ROOT" || exit 1
case $BUILD in /*) BIN=$BUILD/gpserve ;; *) BIN=$ROOT/$BUILD/gpserve ;; esac
DATASETS=${GPSERVE_DATASETS:-../shared/datasets}
case $DATASETS in /*) ;; *) DATASETS=$ROOT/$DATASETS ;; esac

# Slowness factor for every bound (the sanitizer build is several times slower).
SLOW=${GPSERVE_TEST_SLOW:-1}
case $BUILD in *san*) [ -n "$GPSERVE_TEST_SLOW" ] || SLOW=4 ;; esac
MT=$((30 * SLOW))        # --max-time of one request, seconds
STARTUP=$((20 * SLOW))   # seconds to wait for the "listening" line
STOPWAIT=$((30 * SLOW))  # seconds to wait for an exit after SIGTERM
JOBWAIT=$((60 * SLOW))   # seconds to wait for a job to reach a state

# Nothing from the caller's environment may configure the daemons under test.
unset GPSERVE_BIND GPSERVE_PORT GPSERVE_DB GPSERVE_THREADS GPSERVE_FIT_WORKERS \
      GPSERVE_QUEUE_SIZE GPSERVE_MAX_BODY_MB GPSERVE_MAX_TRAIN_POINTS GPSERVE_MAX_CONNECTIONS \
      GPSERVE_TIMEOUT GPSERVE_API_KEY_FILE GPSERVE_MODEL_CACHE GPSERVE_COMPUTE_THREADS
: "${OPENBLAS_THREAD_TIMEOUT:=16}"
export OPENBLAS_THREAD_TIMEOUT
# curl must talk to 127.0.0.1 directly.
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY

T=$(mktemp -d "${TMPDIR:-/tmp}/gpserve-it.XXXXXX") || exit 1
RESULTS=$T/results
: >"$RESULTS"
PIDS=""

cleanup() {
    for p in $PIDS; do
        kill -TERM "$p" 2>/dev/null
    done
    for p in $PIDS; do
        i=0
        while alive "$p" && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
        alive "$p" && kill -KILL "$p" 2>/dev/null
    done
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# ---------------------------------------------------------------- reporting

pass() {
    echo "PASS" >>"$RESULTS"
    echo "ok   $1"
}
fail() {
    echo "FAIL" >>"$RESULTS"
    echo "FAIL $1${2:+: $2}"
    if [ -s "$T/body" ] && [ -n "$3" ]; then
        if [ "${GPSERVE_TEST_VERBOSE:-0}" = 1 ]; then
            sed 's/^/     | /' "$T/body"
        else
            head -c 600 "$T/body" | sed 's/^/     | /'
            echo
        fi
    fi
}
# verdict NAME RC MESSAGE: pass when RC (the $? of a check just made) is 0, else fail with MESSAGE.
verdict() {
    if [ "$2" -eq 0 ]; then pass "$1"; else fail "$1" "$3" body; fi
}
note() { echo "note: $*"; }
T0=$(date +%s)
section() { echo "# $* (t=$(($(date +%s) - T0))s)"; }

finish() {
    np=$(grep -c '^PASS' "$RESULTS")
    nf=$(grep -c '^FAIL' "$RESULTS")
    echo "$np passed, $nf failed"
    [ "$nf" -eq 0 ] && [ "$np" -gt 0 ]
    exit $?
}

# ---------------------------------------------------------------- processes

# alive PID: the process exists and is not a zombie.
alive() {
    st=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)
    [ -n "$st" ] && [ "$st" != Z ]
}

# start_daemon LOG [flags...]: start gpserve on a free loopback port; sets DPID
# and DPORT. Fails (returns 1) when no "listening" line arrives in time.
start_daemon() {
    log=$1
    shift
    : >"$log"
    "$BIN" --bind 127.0.0.1 --port 0 "$@" >>"$log" 2>&1 &
    DPID=$!
    PIDS="$PIDS $DPID"
    DPORT=""
    i=0
    while [ $i -lt $((STARTUP * 10)) ]; do
        DPORT=$(sed -n 's/.*gpserve listening on 127\.0\.0\.1:\([0-9][0-9]*\).*/\1/p' "$log" | head -n 1)
        [ -n "$DPORT" ] && return 0
        alive "$DPID" || break
        sleep 0.1
        i=$((i + 1))
    done
    echo "     daemon did not start; its log:"
    tail -n 20 "$log" | sed 's/^/     | /'
    return 1
}

# stop_daemon PID: SIGTERM, wait up to STOPWAIT s; sets STOP_RC (the exit code,
# or "timeout" after a SIGKILL) and STOP_SECS.
stop_daemon() {
    kill -TERM "$1" 2>/dev/null
    i=0
    while alive "$1" && [ $i -lt $((STOPWAIT * 10)) ]; do
        sleep 0.1
        i=$((i + 1))
    done
    STOP_SECS=$((i / 10))
    if alive "$1"; then
        kill -KILL "$1" 2>/dev/null
        wait "$1" 2>/dev/null
        STOP_RC=timeout
    else
        wait "$1"
        STOP_RC=$?
    fi
}

# ---------------------------------------------------------------- HTTP

# req METHOD PATH [curl args...]: one request to 127.0.0.1:$PORT. Sets ST (the
# status, 000 when there was no HTTP answer); body in $T/body, headers in $T/hdr,
# the body without whitespace in $T/flat.
req() {
    _m=$1
    _p=$2
    shift 2
    rm -f "$T/body" "$T/hdr"
    ST=$(curl -sS --max-time "$MT" -o "$T/body" -D "$T/hdr" -w '%{http_code}' -X "$_m" \
        "$@" "http://127.0.0.1:$PORT$_p" 2>"$T/curlerr")
    [ -n "$ST" ] || ST=000
    [ -f "$T/body" ] || : >"$T/body"
    tr -d ' \t\r\n' <"$T/body" >"$T/flat"
}
# Shortcuts for JSON requests: jpost PATH BODY [curl args...]; the body may be
# @FILE like curl's.
jpost() {
    _p=$1
    _b=$2
    shift 2
    req POST "$_p" -H 'Content-Type: application/json' --data-binary "$_b" "$@"
}

# check NAME EXPECTED_STATUS METHOD PATH [curl args...]
check() {
    _n=$1
    _e=$2
    shift 2
    req "$@"
    if [ "$ST" = "$_e" ]; then
        pass "$_n"
        return 0
    fi
    fail "$_n" "status $ST, expected $_e $(head -c 200 "$T/curlerr")" body
    return 1
}
# check_json NAME EXPECTED_STATUS PATH BODY [curl args]: a JSON POST.
check_json() {
    _n=$1
    _e=$2
    _p=$3
    _b=$4
    shift 4
    check "$_n" "$_e" POST "$_p" -H 'Content-Type: application/json' --data-binary "$_b" "$@"
}

# jstr KEY: the first string value of KEY in the last body ("" when none).
jstr() {
    grep -o "\"$1\":\"[^\"]*\"" "$T/flat" | head -n 1 | sed 's/^"[^"]*":"\(.*\)"$/\1/'
}
# jnum KEY: the first number value of KEY in the last body.
jnum() {
    grep -o "\"$1\":-\{0,1\}[0-9][0-9.eE+-]*" "$T/flat" | head -n 1 | sed 's/^"[^"]*"://'
}
# jarr KEY [FILE]: the first flat array of numbers under KEY, one number a line.
jarr() {
    grep -o "\"$1\":\[[^][]*\]" "${2:-$T/flat}" | head -n 1 | sed 's/^"[^"]*":\[//; s/\]$//' |
        tr ',' '\n' | grep -v '^$'
}
# jmat KEY [FILE]: the first array of arrays under KEY, one row a line (comma separated).
jmat() {
    grep -o "\"$1\":\[\[[^]]*\]\(,\[[^]]*\]\)*\]" "${2:-$T/flat}" | head -n 1 |
        sed 's/^"[^"]*":\[\[//; s/\]\]$//; s/\],\[/\n/g'
}
# header NAME: value of a response header of the last request (case-insensitive).
header() {
    tr -d '\r' <"$T/hdr" | grep -i "^$1:" | tail -n 1 | sed 's/^[^:]*:[[:space:]]*//'
}

# check_err NAME STATUS CODE FIELD METHOD PATH [curl args...]: an error answer
# with this status and {"error": {"code": CODE, ...}}; FIELD is a grep -E
# pattern the "field" must match ("-": not checked, "none": no field).
check_err() {
    _n=$1
    _s=$2
    _c=$3
    _f=$4
    shift 4
    req "$@"
    _gc=$(jstr code)
    _gf=$(jstr field)
    _why=""
    [ "$ST" = "$_s" ] || _why="status $ST (expected $_s)"
    grep -q '^{"error":{' "$T/flat" || _why="$_why; not an error object"
    [ "$_gc" = "$_c" ] || _why="$_why; code '$_gc' (expected $_c)"
    case $_f in
    -) ;;
    none) [ -z "$_gf" ] || _why="$_why; field '$_gf' (expected none)" ;;
    *) printf '%s\n' "$_gf" | grep -Eq "$_f" || _why="$_why; field '$_gf' (expected /$_f/)" ;;
    esac
    if [ -z "$_why" ]; then
        pass "$_n"
        return 0
    fi
    fail "$_n" "${_why#; }" body
    return 1
}
# check_jerr NAME STATUS CODE FIELD PATH BODY [curl args]: the same for a JSON POST.
check_jerr() {
    _a1=$1
    _a2=$2
    _a3=$3
    _a4=$4
    _p=$5
    _b=$6
    shift 6
    check_err "$_a1" "$_a2" "$_a3" "$_a4" POST "$_p" -H 'Content-Type: application/json' \
        --data-binary "$_b" "$@"
}

# count_lines: number of non-empty lines on stdin.
count_lines() { grep -c . ; }

# wait_job ID STATE...: poll GET /v1/jobs/ID (at most JOBWAIT s) until its status
# is one of STATEs; sets JOB_STATUS.
wait_job() {
    _id=$1
    shift
    _i=0
    while [ $_i -lt $((JOBWAIT * 5)) ]; do
        req GET "/v1/jobs/$_id"
        JOB_STATUS=$(grep -o '"status":"\(queued\|running\|succeeded\|failed\|cancelled\)"' "$T/flat" |
            head -n 1 | sed 's/.*:"\(.*\)"/\1/')
        for _s in "$@"; do
            [ "$JOB_STATUS" = "$_s" ] && return 0
        done
        case $JOB_STATUS in succeeded | failed | cancelled) return 1 ;; esac
        sleep 0.2
        _i=$((_i + 1))
    done
    return 1
}

# ---------------------------------------------------------------- data

# Synthetic regression data with awk: gen_xy N D SEED -> "x1,...,xd,y" lines.
gen_xy() {
    awk -v n="$1" -v d="$2" -v seed="$3" 'BEGIN {
        srand(seed);
        for (i = 0; i < n; i++) {
            s = 0; line = "";
            for (j = 0; j < d; j++) {
                x = 4 * rand() - 2; s += sin((j + 1) * x);
                line = line sprintf("%.6f,", x);
            }
            printf "%s%.6f\n", line, s + 0.1 * (rand() - 0.5);
        }
    }'
}
# csv_to_json NAME EXTRA_JSON < "x..,y" lines: a fit body {"name":..., EXTRA, "X":..., "y":...}.
csv_to_json() {
    awk -F, -v name="$1" -v extra="$2" '{
        row = "[" $1; for (j = 2; j < NF; j++) row = row "," $j; row = row "]";
        X = X (NR > 1 ? "," : "") row; y = y (NR > 1 ? "," : "") $NF;
    } END { printf "{\"name\":\"%s\",%s\"X\":[%s],\"y\":[%s]}", name, extra, X, y }'
}

if [ ! -x "$BIN" ]; then
    fail "daemon binary" "$BIN is not built (make build-all)"
    finish
fi
if ! command -v curl >/dev/null 2>&1; then
    fail "curl" "curl is not installed"
    finish
fi

echo "# gpserve integration tests ($BIN, slowness x$SLOW)"

# Training data used below.
# sine: 21 points of sin(x) on [0, 5], one input dimension.
SINE_BODY='{"name":"sine","method":"exact","kernel":{"type":"rbf"},"seed":3,"X":[[0],[0.25],[0.5],[0.75],[1],[1.25],[1.5],[1.75],[2],[2.25],[2.5],[2.75],[3],[3.25],[3.5],[3.75],[4],[4.25],[4.5],[4.75],[5]],"y":[0,0.2474,0.4794,0.6816,0.8415,0.949,0.9975,0.984,0.9093,0.7781,0.5985,0.3817,0.1411,-0.1082,-0.3508,-0.5716,-0.7568,-0.895,-0.9775,-0.9993,-0.9589]}'
SINE_X='[[0.1],[1.3],[2.7],[4.9]]'
gen_xy 40 2 11 >"$T/plane.csv"
{
    echo "a,b,target"
    cat "$T/plane.csv"
} >"$T/plane_h.csv"
gen_xy 3000 4 5 | csv_to_json long '"method":"exact","kernel":{"type":"rbf"},"options":{"max_iterations":100000,"tolerance":1e-15},"async":true,' >"$T/long.json"

CONCRETE=$DATASETS/concrete.csv
if [ ! -f "$CONCRETE" ]; then
    CONCRETE=""
    note "$DATASETS/concrete.csv not found: the concrete cases are skipped" \
        "(the README examples use a synthetic 8-feature stand-in)"
fi

# ================================================================ main daemon
section "main daemon"
# --max-body-mb 1 for the body-limit cases.
if ! start_daemon "$T/main.log" --db "$T/main.db" --max-body-mb 1; then
    fail "main daemon starts" "no 'gpserve listening on 127.0.0.1:PORT' line within ${STARTUP}s"
    finish
fi
pass "main daemon starts (port $DPORT)"
MAIN_PID=$DPID
PORT=$DPORT

# ---------------------------------------------------------------- health
section "health"
check "GET /healthz" 200 GET /healthz
[ "$(jstr status)" = ok ]
verdict "/healthz body is {\"status\":\"ok\"}" $? 'wrong body'
check "GET /readyz" 200 GET /readyz
[ "$(jstr status)" = ready ]
verdict "/readyz body is {\"status\":\"ready\"}" $? 'wrong body'
check "GET /v1/methods" 200 GET /v1/methods
grep -q '"exact"' "$T/flat"
verdict "/v1/methods lists exact" $? 'no "exact" in the body'

# ---------------------------------------------------------------- README examples
section "README examples"
# The fenced ```sh blocks between <!-- examples:begin --> and <!-- examples:end -->
# run in order in one subshell, with localhost:8080 replaced by the daemon's
# address and curl wrapped so that each call's status is logged; each call must
# get the status its "# -> NNN" comment names.
run_readme_examples() {
    awk '/<!-- examples:begin -->/ { on = 1; next }
         /<!-- examples:end -->/   { on = 0 }
         on && /^```sh[[:space:]]*$/ { inb = 1; next }
         on && inb && /^```/ { inb = 0; next }
         on && inb { print }' README.md >"$T/examples.sh"
    if [ ! -s "$T/examples.sh" ]; then
        fail "README examples" "no \`\`\`sh block between the examples markers in README.md"
        return
    fi
    grep -o '# -> [0-9][0-9][0-9]' "$T/examples.sh" | sed 's/# -> //' >"$T/ex.expected"
    concrete=$CONCRETE
    if [ -z "$concrete" ]; then
        concrete=$T/concrete_standin.csv
        {
            echo "c1,c2,c3,c4,c5,c6,c7,c8,y"
            gen_xy 60 8 21
        } >"$concrete"
    fi
    sed -e "s#localhost:8080#127.0.0.1:$PORT#g" \
        -e "s#@\.\./shared/datasets/concrete\.csv#@$concrete#g" "$T/examples.sh" >"$T/ex.run.sh"
    : >"$T/ex.log"
    (
        curl() {
            rm -f "$T/ex.hdr"
            command curl --max-time "$MT" -D "$T/ex.hdr" "$@"
            _rc=$?
            _st=$(tr -d '\r' <"$T/ex.hdr" 2>/dev/null | sed -n 's/^HTTP\/[0-9.]* \([0-9][0-9][0-9]\).*/\1/p' | tail -n 1)
            _u=""
            _v=GET
            for _a in "$@"; do
                case $_a in *127.0.0.1:*) _u=${_a#*127.0.0.1:"$PORT"} ;; esac
                case $_a in -d | --data* | -d*) [ "$_v" = GET ] && _v=POST ;; DELETE) _v=DELETE ;; esac
            done
            echo "${_st:-000} $_v $_u (curl exit $_rc)" >>"$T/ex.log"
            return $_rc
        }
        . "$T/ex.run.sh"
    ) >"$T/ex.out" 2>&1
    nexp=$(count_lines <"$T/ex.expected")
    ngot=$(count_lines <"$T/ex.log")
    if [ "$nexp" -ne "$ngot" ]; then
        fail "README examples: $nexp '# -> STATUS' comments, $ngot curl calls made" "output:"
        sed 's/^/     | /' "$T/ex.out" | head -n 20
    fi
    i=1
    while [ $i -le "$ngot" ]; do
        got=$(sed -n "${i}p" "$T/ex.log")
        exp=$(sed -n "${i}p" "$T/ex.expected")
        st=${got%% *}
        what=${got#* }
        if [ "$st" = "$exp" ]; then
            pass "README example $i: ${what% (curl exit*} -> $exp"
        else
            fail "README example $i: ${what% (curl exit*}" "status $st, expected ${exp:-none} (${what##*(}"
        fi
        i=$((i + 1))
    done
}
run_readme_examples

# ---------------------------------------------------------------- fits
section "fits"
# An exact GP with every hyperparameter fixed: predictions have a closed form.
# rbf, lengthscale 1, variance 1, noise 0.1, no standardisation, X = {0, 1}, y = {1, -1}.
check_json "fit JSON, fixed hyperparameters (closed form)" 201 /v1/models \
    '{"name":"closed","method":"exact","standardize":false,"kernel":{"type":"rbf","lengthscale":1.0,"variance":1.0,"fixed":true},"noise":{"variance":0.1,"fixed":true},"X":[[0],[1]],"y":[1,-1]}'
check_json "predict closed form" 200 /v1/models/closed/predict '{"X":[[0.25],[0.5],[2.0]],"include_noise":false}'
jarr mean >"$T/cf.mean"
jarr variance >"$T/cf.var"
awk 'function k(a, b) { return exp(-0.5 * (a - b) * (a - b)) }
     BEGIN {
        e = k(0, 1); a = 1.1; det = a * a - e * e;          # A = [[a, e], [e, a]]
        split("0.25 0.5 2.0", xs, " "); bad = 0;
        while ((getline m < ARGV[1]) > 0 && (getline v < ARGV[2]) > 0) {
            i++; x = xs[i]; k0 = k(x, 0); k1 = k(x, 1);
            w0 = (a * 1 - e * -1) / det; w1 = (-e * 1 + a * -1) / det;  # A^-1 y
            mu = k0 * w0 + k1 * w1;
            q = (k0 * (a * k0 - e * k1) + k1 * (-e * k0 + a * k1)) / det;
            va = 1 - q;
            if ((m - mu) ^ 2 > 1e-20 + 1e-18 * mu * mu || (v - va) ^ 2 > 1e-20 + 1e-18 * va * va) {
                printf "     point %s: got mean %s var %s, expected %.17g %.17g\n", x, m, v, mu, va; bad = 1
            }
        }
        if (i != 3) { print "     expected 3 means and variances, got " i; bad = 1 }
        exit bad
     }' "$T/cf.mean" "$T/cf.var"
verdict "closed-form mean and latent variance match to 1e-9" $? "wrong numbers"

check_json "fit JSON sine" 201 /v1/models "$SINE_BODY"
ok=0
[ "$(jstr name)" = sine ] && [ "$(jnum version)" = 1 ] && [ "$(jstr method)" = exact ] &&
    [ "$(jstr status)" = ready ] && [ "$(jnum n_train)" = 21 ] && [ "$(jnum input_dim)" = 1 ] &&
    grep -q '"kernel":{' "$T/flat" && grep -q '"noise_variance":' "$T/flat" &&
    grep -q '"diagnostics":{' "$T/flat" && grep -q '"objective_name":"log_marginal_likelihood"' "$T/flat" &&
    grep -q '"created_at":"' "$T/flat" || ok=1
verdict "fit response: name, version 1, method, status ready, n_train, input_dim, kernel, noise, diagnostics" $ok "missing or wrong fields"
check "fit CSV (header row, target last)" 201 POST '/v1/models?name=plane&method=exact' \
    -H 'Content-Type: text/csv' --data-binary @"$T/plane_h.csv"
[ "$(jnum n_train)" = 40 ] && [ "$(jnum input_dim)" = 2 ]
verdict "fit CSV: n_train 40, input_dim 2" $? "wrong n_train / input_dim"
# The target named explicitly (?target=a): then b and target are the inputs.
check "fit CSV with ?target=COL" 201 POST '/v1/models?name=plane-t&target=a' \
    -H 'Content-Type: text/csv' --data-binary @"$T/plane_h.csv"
if [ -n "$CONCRETE" ]; then
    check "fit CSV concrete.csv (1030 x 8)" 201 POST '/v1/models?name=concrete&method=exact' \
        -H 'Content-Type: text/csv' --data-binary @"$CONCRETE"
    [ "$(jnum n_train)" = 1030 ] && [ "$(jnum input_dim)" = 8 ]
    verdict "concrete: n_train 1030, input_dim 8" $? "wrong n_train / input_dim"
    check_json "predict concrete" 200 /v1/models/concrete/predict \
        '{"X":[[540,0,0,162,2.5,1040,676,28],[332.5,142.5,0,228,0,932,594,270]]}'
    awk '{ if ($1 < 20 || $1 > 100) exit 1 }' <<EOF
$(jarr mean)
EOF
    verdict "concrete predictions are plausible strengths (20..100 MPa)" $? "implausible means"
else
    note "concrete cases skipped: no $DATASETS/concrete.csv"
fi

# ---------------------------------------------------------------- list, get, versions
section "list, get, versions"
check "GET /v1/models" 200 GET /v1/models
grep -q '"name":"sine"' "$T/flat" && grep -q '"name":"plane"' "$T/flat"
verdict "list has sine and plane" $? "missing models"
check "GET /v1/models/sine" 200 GET /v1/models/sine
grep -q '"versions":\[1\]' "$T/flat"
verdict "sine has versions [1]" $? "no \"versions\":[1]"
check_json "fit sine again (version 2)" 201 /v1/models "$SINE_BODY"
[ "$(jnum version)" = 2 ]
verdict "second fit is version 2" $? "version $(jnum version)"
check "GET /v1/models/sine after refit" 200 GET /v1/models/sine
grep -q '"versions":\[1,2\]' "$T/flat" && [ "$(jnum version)" = 2 ]
verdict "latest is version 2 with versions [1,2]" $? "wrong versions"
check "GET /v1/models/sine/versions/1" 200 GET /v1/models/sine/versions/1
[ "$(jnum version)" = 1 ] && [ "$(jstr name)" = sine ]
verdict "version 1 metadata" $? "wrong version"
check_json "predict with \"version\": 1" 200 /v1/models/sine/predict "{\"X\":$SINE_X,\"version\":1}"
[ "$(jnum version)" = 1 ]
verdict "predict answers version 1" $? "version $(jnum version)"

# ---------------------------------------------------------------- predict
section "predict"
check_json "predict sine" 200 /v1/models/sine/predict "{\"X\":$SINE_X}"
cp "$T/body" "$T/pred_noise.json"
[ "$(jarr mean | count_lines)" = 4 ] && [ "$(jarr variance | count_lines)" = 4 ] &&
    [ "$(jstr name)" = sine ] && [ "$(jnum version)" = 2 ]
verdict "predict: 4 means, 4 variances, name, version 2" $? "wrong lengths"
jarr mean >"$T/m.txt"
jarr variance >"$T/vn.txt"
awk 'BEGIN { split("0.0998 0.9636 0.4274 -0.9825", t, " ") }
     { i++; if ($1 - t[i] > 0.05 || t[i] - $1 > 0.05) exit 1 } END { exit i != 4 }' "$T/m.txt"
verdict "predict sine: means within 0.05 of sin(x)" $? "wrong means"
check_json "predict include_noise false" 200 /v1/models/sine/predict "{\"X\":$SINE_X,\"include_noise\":false}"
jarr variance >"$T/vl.txt"
awk 'NR == FNR { vn[FNR] = $1; n = FNR; next }
     { if (!($1 >= 0 && $1 < vn[FNR])) bad = 1; m = FNR }
     END { exit bad || m != n || n != 4 }' "$T/vn.txt" "$T/vl.txt"
verdict "latent variance < observation variance, every point" $? "not smaller"
check_json "predict full_covariance" 200 /v1/models/sine/predict "{\"X\":$SINE_X,\"full_covariance\":true,\"include_noise\":false}"
jmat covariance >"$T/cov.txt"
awk -F, '{ if (NF != 4) bad = 1; n++ } END { exit bad || n != 4 }' "$T/cov.txt"
verdict "covariance is 4 x 4" $? "shape $(count_lines <"$T/cov.txt") rows"
jarr variance >"$T/vl2.txt"
# The diagonal of the covariance is the latent variance; symmetric.
awk -F, 'NR == FNR { v[FNR] = $1; next }
         { for (j = 1; j <= NF; j++) c[FNR, j] = $j; d = $FNR - v[FNR];
           if (d * d > 1e-20 + 1e-16 * v[FNR] * v[FNR]) bad = 1 }
         END { for (i = 1; i <= 4; i++) for (j = 1; j <= 4; j++) {
                 d = c[i, j] - c[j, i]; if (d * d > 1e-24 + 1e-20 * c[i, j] * c[i, j]) bad = 1 }
               exit bad }' "$T/vl2.txt" "$T/cov.txt"
verdict "covariance symmetric, diagonal = variance" $? "not consistent"
check_json "predict quantiles" 200 /v1/models/sine/predict "{\"X\":$SINE_X,\"quantiles\":[0.05,0.5,0.95]}"
jarr mean >"$T/qm.txt"
ok=0
for q in 0.05 0.5 0.95; do
    jarr "$q" >"$T/q$q.txt"
    [ "$(count_lines <"$T/q$q.txt")" = 4 ] || ok=1
done
[ $ok = 0 ] && awk 'BEGIN { while ((getline a < ARGV[1]) > 0) { getline b < ARGV[2]; getline c < ARGV[3]; getline m < ARGV[4];
        if (!(a < b && b < c)) exit 1; d = b - m; if (d * d > 1e-18 + 1e-18 * m * m) exit 1 } }' \
    "$T/q0.05.txt" "$T/q0.5.txt" "$T/q0.95.txt" "$T/qm.txt"
verdict "quantiles 0.05 < 0.5 < 0.95, 4 each, median = mean" $? "wrong quantiles"

# ---------------------------------------------------------------- concurrent requests
section "concurrent requests"
# 16 predictions at once (request threads, model cache): all 200, all the same body.
cpids=""
i=0
while [ $i -lt 16 ]; do
    curl -sS --max-time "$MT" -o "$T/par$i.json" -w '%{http_code}' -H 'Content-Type: application/json' \
        --data-binary "{\"X\":$SINE_X}" "http://127.0.0.1:$PORT/v1/models/sine/predict" >"$T/par$i.st" 2>/dev/null &
    cpids="$cpids $!"
    i=$((i + 1))
done
for p in $cpids; do wait "$p"; done
n_ok=0
i=0
while [ $i -lt 16 ]; do
    [ "$(cat "$T/par$i.st" 2>/dev/null)" = 200 ] && cmp -s "$T/par$i.json" "$T/pred_noise.json" && n_ok=$((n_ok + 1))
    i=$((i + 1))
done
[ "$n_ok" = 16 ]
verdict "16 concurrent predictions: all 200 with the same body" $? "$n_ok of 16"

# ---------------------------------------------------------------- sample
section "sample"
check_json "sample" 200 /v1/models/sine/sample "{\"X\":$SINE_X,\"n_samples\":5,\"seed\":7}"
cp "$T/body" "$T/sample7.json"
jmat samples >"$T/samples.txt"
awk -F, '{ if (NF != 4) bad = 1; n++ } END { exit bad || n != 5 }' "$T/samples.txt"
verdict "samples: 5 draws of 4 points" $? "shape $(count_lines <"$T/samples.txt") rows"
check_json "sample again, same seed" 200 /v1/models/sine/sample "{\"X\":$SINE_X,\"n_samples\":5,\"seed\":7}"
cmp -s "$T/body" "$T/sample7.json"
verdict "same seed -> identical body" $? "bodies differ"
check_json "sample, another seed" 200 /v1/models/sine/sample "{\"X\":$SINE_X,\"n_samples\":5,\"seed\":8}"
! cmp -s "$T/body" "$T/sample7.json"
verdict "different seed -> different samples" $? "bodies are identical"

# ---------------------------------------------------------------- async fit and jobs
section "async fit and jobs"
gen_xy 50 3 17 | csv_to_json asyncm '"async":true,"seed":1,' >"$T/async.json"
check_json "async fit -> 202" 202 /v1/models @"$T/async.json"
JOB=$(jstr job)
loc=$(header Location)
[ -n "$JOB" ] && [ "$loc" = "/v1/jobs/$JOB" ] && [ "$(jstr status)" = queued ]
verdict "202 body {\"job\",\"status\":\"queued\"}, Location /v1/jobs/ID" $? "job '$JOB', Location '$loc'"
if wait_job "$JOB" succeeded; then pass "job $JOB reaches succeeded"; else fail "job reaches succeeded" "status '$JOB_STATUS' after polling" body; fi
grep -q '"model":{' "$T/flat" && grep -q '"progress":{' "$T/flat"
verdict "succeeded job carries progress and model" $? "no model/progress object"
check "GET the model the job fitted" 200 GET /v1/models/asyncm

# ---------------------------------------------------------------- ssgp
section "ssgp (sparse-spectrum GP)"
M=/v1/models
check "GET /v1/methods (ssgp listed)" 200 GET /v1/methods
grep -q '"name":"ssgp"' "$T/flat" && grep -q '"features"' "$T/flat" && grep -q '"learn_frequencies"' "$T/flat" &&
    grep -q 'auto|mc|qmc|orf|stein\|"auto","mc","qmc","orf","stein"' "$T/flat"
verdict "/v1/methods lists ssgp with features, frequencies choices, learn_frequencies" $? "not listed"
gen_xy 200 2 23 >"$T/ss.csv"
SSX='[[0.1,-0.3],[1.2,0.4],[-1.5,1.9],[0.0,0.0]]'
csv_to_json ssgp2d '"method":"ssgp","kernel":{"type":"rbf","ard":true},"seed":5,"options":{"features":40},' <"$T/ss.csv" >"$T/ss.json"
check_json "fit ssgp (frequencies auto)" 201 /v1/models @"$T/ss.json"
case $(jstr frequencies) in mc | qmc | orf | stein) true ;; *) false ;; esac
verdict "method_info.frequencies names the sampler auto chose" $? "frequencies '$(jstr frequencies)'"
[ "$(jnum features)" = 40 ] && [ "$(jstr method)" = ssgp ]
verdict "fitted model reports method ssgp and 40 features" $? "method '$(jstr method)' features '$(jnum features)'"
check_json "predict ssgp" 200 /v1/models/ssgp2d/predict "{\"X\":$SSX,\"full_covariance\":true,\"quantiles\":[0.1,0.9]}"
cp "$T/body" "$T/ref_ssgp.json"
[ "$(jarr mean | count_lines)" = 4 ] && [ "$(jarr variance | count_lines)" = 4 ]
verdict "ssgp predict: 4 means and 4 variances" $? "wrong lengths"
check_json "predict ssgp latent" 200 /v1/models/ssgp2d/predict "{\"X\":$SSX,\"include_noise\":false}"
jarr variance >"$T/ss_lat.txt"
jarr variance "$T/ref_ssgp.json" >/dev/null
tr -d ' \t\r\n' <"$T/ref_ssgp.json" >"$T/ref_ssgp.flat"
jarr variance "$T/ref_ssgp.flat" | paste -d' ' - "$T/ss_lat.txt" |
    awk '{ if (!($2 > 0 && $1 > $2)) bad = 1; n++ } END { exit bad || n != 4 }'
verdict "ssgp: observation variance > latent variance > 0" $? "not ordered"
check_json "sample ssgp" 200 /v1/models/ssgp2d/sample "{\"X\":$SSX,\"n_samples\":6,\"seed\":3}"
cp "$T/body" "$T/ss_s3.json"
jmat samples | awk -F, '{ if (NF != 4) bad = 1; n++ } END { exit bad || n != 6 }'
verdict "ssgp samples: 6 draws of 4 points" $? "wrong shape"
check_json "sample ssgp again" 200 /v1/models/ssgp2d/sample "{\"X\":$SSX,\"n_samples\":6,\"seed\":3}"
cmp -s "$T/body" "$T/ss_s3.json"
verdict "ssgp: same seed -> identical samples" $? "bodies differ"
for f in mc qmc orf stein; do
    csv_to_json "ss-$f" "\"method\":\"ssgp\",\"kernel\":{\"type\":\"matern32\",\"ard\":true},\"options\":{\"features\":30,\"frequencies\":\"$f\",\"stein_iterations\":50}," <"$T/ss.csv" >"$T/ss_$f.json"
    check_json "fit ssgp frequencies=$f (matern32)" 201 /v1/models @"$T/ss_$f.json"
    [ "$(jstr frequencies)" = "$f" ]
    verdict "ssgp frequencies=$f reported" $? "frequencies '$(jstr frequencies)'"
done
csv_to_json ss-learn '"method":"ssgp","options":{"features":20,"frequencies":"qmc","learn_frequencies":true,"max_iterations":50},' <"$T/ss.csv" >"$T/ss_learn.json"
check_json "fit ssgp learn_frequencies" 201 /v1/models @"$T/ss_learn.json"
grep -q '"learn_frequencies":"true"' "$T/flat"
verdict "ssgp learn_frequencies reported" $? "not reported"
check_json "predict learned-frequency ssgp" 200 /v1/models/ss-learn/predict "{\"X\":$SSX}"
SSB='"X":[[0,1],[1,0],[2,2]],"y":[1,2,3]'
check_jerr "ssgp: periodic kernel" 422 unsupported '^kernel\.type$' $M "{\"name\":\"b\",\"method\":\"ssgp\",\"kernel\":{\"type\":\"periodic\"},$SSB}"
grep -q 'rbf, matern12, matern32, matern52' "$T/body"
verdict "unsupported kernel message names the kernels that work" $? "not named"
check_jerr "ssgp: sum kernel" 422 unsupported '^kernel\.type$' $M "{\"name\":\"b\",\"method\":\"ssgp\",\"kernel\":{\"type\":\"sum\",\"terms\":[{\"type\":\"rbf\"},{\"type\":\"rbf\"}]},$SSB}"
check_jerr "ssgp: rq kernel" 422 unsupported '^kernel\.type$' $M "{\"name\":\"b\",\"method\":\"ssgp\",\"kernel\":{\"type\":\"rq\"},$SSB}"
check_jerr "ssgp: features 0" 400 invalid_argument '^options\.features$' $M "{\"name\":\"b\",\"method\":\"ssgp\",\"options\":{\"features\":0},$SSB}"
check_jerr "ssgp: 20000 features (workspace above the budget)" 413 payload_too_large '^options\.features$' $M "{\"name\":\"b\",\"method\":\"ssgp\",\"options\":{\"features\":20000},$SSB}"
check_jerr "ssgp: features not an integer" 400 invalid_argument '^options\.features$' $M "{\"name\":\"b\",\"method\":\"ssgp\",\"options\":{\"features\":2.5},$SSB}"
check_jerr "ssgp: unknown sampler" 400 invalid_argument '^options\.frequencies$' $M "{\"name\":\"b\",\"method\":\"ssgp\",\"options\":{\"frequencies\":\"sobol\"},$SSB}"
check_jerr "ssgp: unknown bandwidth" 400 invalid_argument '^options\.bandwidth$' $M "{\"name\":\"b\",\"method\":\"ssgp\",\"options\":{\"bandwidth\":\"silverman\"},$SSB}"
check_jerr "ssgp: learn_frequencies not a bool" 400 invalid_argument '^options\.learn_frequencies$' $M "{\"name\":\"b\",\"method\":\"ssgp\",\"options\":{\"learn_frequencies\":\"yes\"},$SSB}"
check_jerr "ssgp: an exact-only option" 400 invalid_argument '^options\.restarts$' $M "{\"name\":\"b\",\"method\":\"ssgp\",\"options\":{\"restarts\":2},$SSB}"
check_jerr "ssgp: stein_step negative" 400 invalid_argument '^options\.stein_step$' $M "{\"name\":\"b\",\"method\":\"ssgp\",\"options\":{\"stein_step\":-1},$SSB}"
check_jerr "ssgp predict: wrong dimension" 422 invalid_data '^X' /v1/models/ssgp2d/predict '{"X":[[1,2,3]]}'
check_jerr "ssgp predict: NaN string" 422 invalid_data '^X\[0\]' /v1/models/ssgp2d/predict '{"X":[["NaN",1]]}'

# ---------------------------------------------------------------- msrfr
section "msrfr (mixture Stein random features)"
check "GET /v1/methods (msrfr listed)" 200 GET /v1/methods
grep -q '"name":"msrfr"' "$T/flat" && grep -q '"particles"' "$T/flat" && grep -q '"calibrate"' "$T/flat" &&
    grep -q 'per_dim|total|none\|"per_dim","total","none"' "$T/flat"
verdict "/v1/methods lists msrfr with particles, bandwidth choices, calibrate" $? "not listed"
MSO='"options":{"particles":3,"features":20,"iterations":60}'
csv_to_json ms2d "\"method\":\"msrfr\",\"kernel\":{\"type\":\"rbf\",\"ard\":true},\"seed\":5,$MSO," <"$T/ss.csv" >"$T/ms.json"
check_json "fit msrfr" 201 /v1/models @"$T/ms.json"
[ "$(jnum particles)" = 3 ] && [ "$(jnum features)" = 20 ] && [ "$(jstr bandwidth)" = per_dim ] &&
    [ "$(jstr method)" = msrfr ] && [ -n "$(jnum objective)" ]
verdict "msrfr model reports particles 3, features 20, bandwidth per_dim, objective" $? "particles '$(jnum particles)' features '$(jnum features)' bandwidth '$(jstr bandwidth)'"
check "GET the msrfr model" 200 GET /v1/models/ms2d
grep -q '"method_info":{' "$T/flat" && [ "$(jnum particles)" = 3 ]
verdict "GET /v1/models/ms2d carries method_info" $? "no method_info"
check_json "predict msrfr (components, quantiles, covariance)" 200 /v1/models/ms2d/predict "{\"X\":$SSX,\"components\":true,\"quantiles\":[0.05,0.5,0.95],\"full_covariance\":true}"
cp "$T/body" "$T/ref_ms.json"
grep -o '"components":{"mean":\[\[[^]]*\]\(,\[[^]]*\]\)*\]' "$T/flat" | sed 's/^"components":{"mean":\[\[//; s/\]\]$//; s/\],\[/\n/g' |
    awk -F, '{ if (NF != 4) bad = 1; n++ } END { exit bad || n != 3 }'
verdict "msrfr components: 3 mean arrays of 4 points" $? "wrong shape"
grep -q '"components":{"mean":\[\[.*\]\],"variance":\[\[' "$T/flat"
verdict "msrfr components carry variances" $? "no variances"
lo=$(grep -o '"0.05":\[[^]]*\]' "$T/flat" | sed 's/.*\[//; s/\]//' | tr ',' '\n')
hi=$(grep -o '"0.95":\[[^]]*\]' "$T/flat" | sed 's/.*\[//; s/\]//' | tr ',' '\n')
printf '%s\n' "$lo" | paste -d' ' - "$(printf '%s\n' "$hi" >"$T/ms_hi.txt"; echo "$T/ms_hi.txt")" |
    awk '{ if (!($1 < $2)) bad = 1; n++ } END { exit bad || n != 4 }'
verdict "msrfr quantiles: 0.05 below 0.95 at every point" $? "not ordered"
check_json "sample msrfr" 200 /v1/models/ms2d/sample "{\"X\":$SSX,\"n_samples\":5,\"seed\":8}"
cp "$T/body" "$T/ms_s8.json"
jmat samples | awk -F, '{ if (NF != 4) bad = 1; n++ } END { exit bad || n != 5 }'
verdict "msrfr samples: 5 draws of 4 points" $? "wrong shape"
check_json "sample msrfr again" 200 /v1/models/ms2d/sample "{\"X\":$SSX,\"n_samples\":5,\"seed\":8}"
cmp -s "$T/body" "$T/ms_s8.json"
verdict "msrfr: same seed -> identical samples" $? "bodies differ"
for bw in total none; do
    csv_to_json "ms-$bw" "\"method\":\"msrfr\",\"kernel\":{\"type\":\"matern52\"},\"options\":{\"particles\":2,\"features\":10,\"iterations\":20,\"bandwidth\":\"$bw\",\"init\":\"mc\",\"likelihood_weight\":\"1\"}," <"$T/ss.csv" >"$T/ms_$bw.json"
    check_json "fit msrfr bandwidth=$bw (matern52, shared lengthscale)" 201 /v1/models @"$T/ms_$bw.json"
    [ "$(jstr bandwidth)" = "$bw" ]
    verdict "msrfr bandwidth=$bw reported" $? "bandwidth '$(jstr bandwidth)'"
done
csv_to_json ms-cal '"method":"msrfr","noise":{"variance":0.01,"fixed":true},"options":{"particles":2,"features":10,"iterations":30,"calibrate":true},' <"$T/ss.csv" >"$T/ms_cal.json"
check_json "fit msrfr calibrate (fixed noise)" 201 /v1/models @"$T/ms_cal.json"
[ -n "$(jnum variance_scale)" ] && [ "$(jnum variance_scale)" != 1 ] && [ "$(jstr noise)" = fixed ]
verdict "msrfr calibrate reports its variance_scale" $? "variance_scale '$(jnum variance_scale)'"
check_jerr "predict ssgp with components" 422 unsupported '^components$' /v1/models/ssgp2d/predict "{\"X\":$SSX,\"components\":true}"
check_jerr "components not a bool" 400 invalid_argument '^components$' /v1/models/ms2d/predict "{\"X\":$SSX,\"components\":1}"
check_jerr "msrfr: particles 0" 400 invalid_argument '^options\.particles$' $M "{\"name\":\"b\",\"method\":\"msrfr\",\"options\":{\"particles\":0},$SSB}"
check_jerr "msrfr: unknown bandwidth" 400 invalid_argument '^options\.bandwidth$' $M "{\"name\":\"b\",\"method\":\"msrfr\",\"options\":{\"bandwidth\":\"silverman\"},$SSB}"
check_jerr "msrfr: likelihood_weight 2" 400 invalid_argument '^options\.likelihood_weight$' $M "{\"name\":\"b\",\"method\":\"msrfr\",\"options\":{\"likelihood_weight\":\"2\"},$SSB}"
check_jerr "msrfr: calibrate not a bool" 400 invalid_argument '^options\.calibrate$' $M "{\"name\":\"b\",\"method\":\"msrfr\",\"options\":{\"calibrate\":\"yes\"},$SSB}"
check_jerr "msrfr: negative step" 400 invalid_argument '^options\.step$' $M "{\"name\":\"b\",\"method\":\"msrfr\",\"options\":{\"step\":-0.1},$SSB}"
check_jerr "msrfr: calibrate on 3 rows" 400 invalid_argument '^options\.calibrate$' $M "{\"name\":\"b\",\"method\":\"msrfr\",\"options\":{\"calibrate\":true,\"iterations\":5},$SSB}"
check_jerr "msrfr: workspace above the budget" 413 payload_too_large '^options\.particles$' $M "{\"name\":\"b\",\"method\":\"msrfr\",\"options\":{\"particles\":200,\"features\":20000},$SSB}"
check_jerr "msrfr: sum kernel" 422 unsupported '^kernel\.type$' $M "{\"name\":\"b\",\"method\":\"msrfr\",\"kernel\":{\"type\":\"sum\",\"terms\":[{\"type\":\"rbf\"},{\"type\":\"rbf\"}]},$SSB}"
check_jerr "msrfr: an ssgp-only option" 400 invalid_argument '^options\.frequencies$' $M "{\"name\":\"b\",\"method\":\"msrfr\",\"options\":{\"frequencies\":\"qmc\"},$SSB}"
check_jerr "msrfr predict: wrong dimension" 422 invalid_data '^X' /v1/models/ms2d/predict '{"X":[[1,2,3]]}'
gen_xy 400 3 31 | csv_to_json mslong '"method":"msrfr","options":{"particles":4,"features":50,"iterations":1000000},"async":true,' >"$T/mslong.json"
check_json "long async msrfr fit" 202 $M @"$T/mslong.json"
MJOB=$(jstr job)
if [ -n "$MJOB" ] && wait_job "$MJOB" running; then
    sleep 0.5
    req GET "/v1/jobs/$MJOB"
    grep -q '"iteration":[1-9]' "$T/flat" && grep -q '"objective":-\{0,1\}[0-9]' "$T/flat"
    verdict "running msrfr job reports iteration and objective" $? "no progress"
    req DELETE "/v1/jobs/$MJOB"
    if wait_job "$MJOB" cancelled; then pass "msrfr job cancelled between iterations"; else fail "msrfr job cancelled between iterations" "status '$JOB_STATUS'" body; fi
else
    fail "long msrfr job is running" "status '$JOB_STATUS'" body
fi

# ---------------------------------------------------------------- sgpr
section "sgpr (inducing-point sparse variational GP)"
check "GET /v1/methods (sgpr listed)" 200 GET /v1/methods
grep -q '"name":"sgpr"' "$T/flat" && grep -q '"inducing_selection"' "$T/flat" &&
    grep -q '"greedy","kmeans","random"' "$T/flat" && grep -q '"optimize_inducing"' "$T/flat"
verdict "/v1/methods lists sgpr with inducing, selection choices, optimize_inducing" $? "not listed"
csv_to_json sg2d '"method":"sgpr","kernel":{"type":"rbf","ard":true},"seed":5,"options":{"inducing":20},' <"$T/ss.csv" >"$T/sg.json"
check_json "fit sgpr (20 inducing points, greedy)" 201 /v1/models @"$T/sg.json"
[ "$(jnum inducing)" = 20 ] && [ "$(jstr inducing_selection)" = greedy ] &&
    [ -n "$(jnum trace_term)" ] && [ -n "$(jnum exact_lml)" ] && [ -n "$(jnum gap)" ] &&
    grep -q '"objective_name":"elbo"' "$T/flat"
verdict "sgpr reports inducing 20, greedy, the bound, trace term, exact LML and gap" $? "inducing '$(jnum inducing)' gap '$(jnum gap)'"
awk -v g="$(jnum gap)" 'BEGIN { exit !(g >= -1e-6) }'
verdict "sgpr gap (exact LML - bound) is not negative" $? "gap $(jnum gap)"
check_json "predict sgpr" 200 /v1/models/sg2d/predict "{\"X\":$SSX,\"full_covariance\":true,\"quantiles\":[0.1,0.9]}"
cp "$T/body" "$T/ref_sg.json"
[ "$(jarr mean | count_lines)" = 4 ] && [ "$(jarr variance | count_lines)" = 4 ]
verdict "sgpr predict: 4 means and 4 variances" $? "wrong lengths"
check_json "predict sgpr latent" 200 /v1/models/sg2d/predict "{\"X\":$SSX,\"include_noise\":false}"
jarr variance >"$T/sg_lat.txt"
tr -d ' \t\r\n' <"$T/ref_sg.json" >"$T/ref_sg.flat"
jarr variance "$T/ref_sg.flat" | paste -d' ' - "$T/sg_lat.txt" |
    awk '{ if (!($2 > 0 && $1 > $2)) bad = 1; n++ } END { exit bad || n != 4 }'
verdict "sgpr: observation variance > latent variance > 0" $? "not ordered"
check_json "sample sgpr" 200 /v1/models/sg2d/sample "{\"X\":$SSX,\"n_samples\":6,\"seed\":3}"
cp "$T/body" "$T/sg_s3.json"
jmat samples | awk -F, '{ if (NF != 4) bad = 1; n++ } END { exit bad || n != 6 }'
verdict "sgpr samples: 6 draws of 4 points" $? "wrong shape"
check_json "sample sgpr again" 200 /v1/models/sg2d/sample "{\"X\":$SSX,\"n_samples\":6,\"seed\":3}"
cmp -s "$T/body" "$T/sg_s3.json"
verdict "sgpr: same seed -> identical samples" $? "bodies differ"
for sel in kmeans random; do
    csv_to_json "sg-$sel" "\"method\":\"sgpr\",\"kernel\":{\"type\":\"matern32\",\"ard\":true},\"options\":{\"inducing\":15,\"inducing_selection\":\"$sel\",\"optimize_inducing\":true,\"max_iterations\":40}," <"$T/ss.csv" >"$T/sg_$sel.json"
    check_json "fit sgpr $sel + optimize_inducing (matern32)" 201 /v1/models @"$T/sg_$sel.json"
    [ "$(jstr inducing_selection)" = "$sel" ] && [ "$(jnum optimize_inducing)" = 1 ]
    verdict "sgpr $sel with optimize_inducing reported" $? "selection '$(jstr inducing_selection)'"
done
check_jerr "sgpr: inducing 0" 400 invalid_argument '^options\.inducing$' $M "{\"name\":\"b\",\"method\":\"sgpr\",\"options\":{\"inducing\":0},$SSB}"
check_jerr "sgpr: unknown selection" 400 invalid_argument '^options\.inducing_selection$' $M "{\"name\":\"b\",\"method\":\"sgpr\",\"options\":{\"inducing_selection\":\"kdpp\"},$SSB}"
check_jerr "sgpr: optimize_inducing not a bool" 400 invalid_argument '^options\.optimize_inducing$' $M "{\"name\":\"b\",\"method\":\"sgpr\",\"options\":{\"optimize_inducing\":1},$SSB}"
check_jerr "sgpr: linear kernel" 422 unsupported '^kernel\.type$' $M "{\"name\":\"b\",\"method\":\"sgpr\",\"kernel\":{\"type\":\"linear\"},$SSB}"
check_jerr "sgpr: sum kernel" 422 unsupported '^kernel\.type$' $M "{\"name\":\"b\",\"method\":\"sgpr\",\"kernel\":{\"type\":\"sum\",\"terms\":[{\"type\":\"rbf\"},{\"type\":\"rbf\"}]},$SSB}"
check_jerr "sgpr predict: wrong dimension" 422 invalid_data '^X' /v1/models/sg2d/predict '{"X":[[1,2,3]]}'

# ---------------------------------------------------------------- renyi
section "renyi (Renyi alpha-divergence sparse GP)"
check "GET /v1/methods (renyi listed)" 200 GET /v1/methods
grep -q '"name":"renyi"' "$T/flat" && grep -q '"keywords":\["auto"\]' "$T/flat" &&
    grep -q '"dense_max_points"' "$T/flat"
verdict "/v1/methods lists renyi with alpha (keyword auto) and dense_max_points" $? "not listed"
csv_to_json re2d '"method":"renyi","kernel":{"type":"rbf","ard":true},"seed":5,"options":{"inducing":15,"alpha":0.5},' <"$T/ss.csv" >"$T/re.json"
check_json "fit renyi (alpha 0.5, 15 inducing points)" 201 /v1/models @"$T/re.json"
[ "$(jnum alpha)" = 0.5 ] && [ "$(jstr alpha_selection)" = fixed ] && [ -n "$(jnum exact_lml)" ] &&
    [ -n "$(jnum gap)" ] && [ -n "$(jnum certified_gap)" ] && [ -n "$(jnum upper_bound)" ] &&
    [ -n "$(jnum trace_term)" ] && grep -q '"objective_name":"renyi_bound"' "$T/flat"
verdict "renyi reports alpha, L_a, exact LML, gap, certified gap G(a), upper bound, trace term" $? "alpha '$(jnum alpha)' gap '$(jnum gap)'"
awk -v g="$(jnum gap)" -v c="$(jnum certified_gap)" 'BEGIN { exit !(g >= -1e-6 && g <= c) }'
verdict "renyi: 0 <= gap <= G(a)" $? "gap $(jnum gap), G $(jnum certified_gap)"
check_json "predict renyi" 200 /v1/models/re2d/predict "{\"X\":$SSX,\"full_covariance\":true,\"quantiles\":[0.1,0.9]}"
cp "$T/body" "$T/ref_re.json"
[ "$(jarr mean | count_lines)" = 4 ] && [ "$(jarr variance | count_lines)" = 4 ]
verdict "renyi predict: 4 means and 4 variances" $? "wrong lengths"
check_json "sample renyi" 200 /v1/models/re2d/sample "{\"X\":$SSX,\"n_samples\":4,\"seed\":3}"
jmat samples | awk -F, '{ if (NF != 4) bad = 1; n++ } END { exit bad || n != 4 }'
verdict "renyi samples: 4 draws of 4 points" $? "wrong shape"
csv_to_json re-auto '"method":"renyi","seed":2,"options":{"inducing":10,"alpha":"auto","max_iterations":30},' <"$T/ss.csv" >"$T/re_auto.json"
check_json "fit renyi alpha auto" 201 /v1/models @"$T/re_auto.json"
[ "$(jstr alpha_selection)" = auto ] && [ -n "$(jnum validation_rmse)" ] &&
    awk -v a="$(jnum alpha)" 'BEGIN { g = a * 20; exit !(a >= 0.3 - 1e-12 && a <= 0.7 + 1e-12 && (g - int(g + 0.5))^2 < 1e-18) }'
verdict "renyi auto: alpha on the grid 0.30..0.70, validation RMSE reported" $? "alpha '$(jnum alpha)'"
check_jerr "renyi: alpha 1" 400 invalid_argument '^options\.alpha$' $M "{\"name\":\"b\",\"method\":\"renyi\",\"options\":{\"alpha\":1},$SSB}"
check_jerr "renyi: alpha -0.1" 400 invalid_argument '^options\.alpha$' $M "{\"name\":\"b\",\"method\":\"renyi\",\"options\":{\"alpha\":-0.1},$SSB}"
check_jerr "renyi: alpha \"best\"" 400 invalid_argument '^options\.alpha$' $M "{\"name\":\"b\",\"method\":\"renyi\",\"options\":{\"alpha\":\"best\"},$SSB}"
grep -q 'auto' "$T/body"
verdict "bad alpha message names the keyword auto" $? "not named"
check_jerr "renyi: alpha true" 400 invalid_argument '^options\.alpha$' $M "{\"name\":\"b\",\"method\":\"renyi\",\"options\":{\"alpha\":true},$SSB}"
check_jerr "renyi: N above dense_max_points" 413 payload_too_large '^options\.dense_max_points$' $M "{\"name\":\"b\",\"method\":\"renyi\",\"options\":{\"dense_max_points\":2},$SSB}"
grep -q 'sgpr' "$T/body"
verdict "dense cap message names sgpr" $? "not named"
check_jerr "renyi: linear kernel" 422 unsupported '^kernel\.type$' $M "{\"name\":\"b\",\"method\":\"renyi\",\"kernel\":{\"type\":\"linear\"},$SSB}"
check_jerr "exact: a keyword for a plain number option" 400 invalid_argument '^options\.tolerance$' $M "{\"name\":\"b\",\"options\":{\"tolerance\":\"auto\"},$SSB}"

# ---------------------------------------------------------------- OpenAPI
section "OpenAPI"
check "GET /openapi.yaml" 200 GET /openapi.yaml
cp "$T/body" "$T/openapi.yaml"
grep -q '^openapi: *["'"'"']\{0,1\}3' "$T/openapi.yaml"
verdict "openapi.yaml declares openapi: 3.x" $? "no 'openapi: 3' line"
# Every path and verb of the document's paths: section, as "VERB PATH".
awk '/^paths:/ { on = 1; next }
     on && /^[^[:space:]#]/ { on = 0 }
     !on { next }
     /^[[:space:]]*["'"'"']?\// {
         p = $0; sub(/^[[:space:]]*["'"'"']?/, "", p); sub(/["'"'"']?[[:space:]]*:.*$/, "", p);
         match($0, /^[[:space:]]*/); pind = RLENGTH; vind = -1; next }
     p != "" && /^[[:space:]]*(get|put|post|delete|patch|options|head|trace):[[:space:]]*$/ {
         match($0, /^[[:space:]]*/);
         if (RLENGTH <= pind) next;
         if (vind < 0) vind = RLENGTH;
         if (RLENGTH == vind) { v = $0; gsub(/[[:space:]:]/, "", v); print toupper(v), p } }' \
    "$T/openapi.yaml" >"$T/routes.txt"
nroutes=$(count_lines <"$T/routes.txt")
[ "$nroutes" -ge 15 ]
verdict "openapi.yaml lists $nroutes path+verb pairs (DESIGN has 15)" $? "too few"
# Every route of the DESIGN table is documented (placeholders compared as {}).
sed 's/{[^}]*}/{}/g' "$T/routes.txt" | sort -u >"$T/routes.norm"
missing=""
for r in "GET /healthz" "GET /readyz" "GET /metrics" "GET /openapi.yaml" "GET /v1/methods" \
    "POST /v1/models" "GET /v1/models" "GET /v1/models/{}" "GET /v1/models/{}/versions/{}" \
    "DELETE /v1/models/{}" "POST /v1/models/{}/predict" "POST /v1/models/{}/sample" \
    "POST /v1/models/{}/observe" "GET /v1/jobs/{}" "DELETE /v1/jobs/{}"; do
    grep -qxF "$r" "$T/routes.norm" || missing="$missing, $r"
done
[ -z "$missing" ]
verdict "openapi.yaml documents every DESIGN route" $? "missing ${missing#, }"
# Each documented route answers (not a 404 for the route, not 405, not 5xx).
jpost /v1/models '{"name":"oa-del","X":[[0],[1],[2]],"y":[0,1,0]}' >/dev/null
while read -r verb path; do
    p=$(printf '%s\n' "$path" | sed -e 's#/v1/jobs/{[^}]*}#/v1/jobs/'"$JOB"'#' \
        -e 's#/versions/{[^}]*}#/versions/1#')
    case "$verb $p" in
    "DELETE /v1/models/{"*) p=$(printf '%s\n' "$p" | sed 's/{[^}]*}/oa-del/') ;;
    *) p=$(printf '%s\n' "$p" | sed 's/{[^}]*}/sine/') ;;
    esac
    case "$verb $p" in
    "POST /v1/models") set -- -H 'Content-Type: application/json' --data-binary '{"name":"oa-fit","X":[[0],[1],[2]],"y":[0,1,0]}' ;;
    "POST "*/observe) set -- -H 'Content-Type: application/json' --data-binary '{"X":[[0.5]],"y":[0.4]}' ;;
    "POST "*) set -- -H 'Content-Type: application/json' --data-binary '{"X":[[0.5]]}' ;;
    *) set -- ;;
    esac
    req "$verb" "$p" "$@"
    case $ST in
    404 | 405 | 5?? | 000) fail "openapi route $verb $path answers" "$verb $p -> $ST" body ;;
    *) pass "openapi route $verb $path answers ($verb $p -> $ST)" ;;
    esac
done <"$T/routes.txt"

# ---------------------------------------------------------------- bad requests
section "bad requests"
M=/v1/models
P=/v1/models/sine/predict
S=/v1/models/sine/sample
X2='[[0],[1],[2]]'
check_jerr "malformed JSON (fit)" 400 malformed_json - $M '{"name": "x", "X": [[1]'
check_jerr "malformed JSON (predict)" 400 malformed_json - $P '{"X": [[1]],}'
check_jerr "empty body" 400 malformed_json - $M ''
check_jerr "body is not an object" 400 invalid_argument - $M '[1,2,3]'
check_jerr "X is a string" 400 invalid_argument '^X$' $M '{"name":"b","X":"abc","y":[1,2]}'
check_jerr "y is an object" 400 invalid_argument '^y$' $M "{\"name\":\"b\",\"X\":$X2,\"y\":{\"a\":1}}"
check_jerr "missing X" 400 invalid_argument '^X$' $M '{"name":"b","y":[1,2,3]}'
check_jerr "missing y" 400 invalid_argument '^y$' $M "{\"name\":\"b\",\"X\":$X2}"
check_jerr "missing name" 400 invalid_argument '^name$' $M "{\"X\":$X2,\"y\":[1,2,3]}"
check_jerr "\"NaN\" string in X" 422 invalid_data '^X\[1\]' $M '{"name":"b","X":[[0],["NaN"],[2]],"y":[1,2,3]}'
check_jerr "\"Inf\" string in X" 422 invalid_data '^X\[2\]' $M '{"name":"b","X":[[0],[1],["Infinity"]],"y":[1,2,3]}'
check_jerr "NaN literal (not JSON)" 400 malformed_json - $M "{\"name\":\"b\",\"X\":$X2,\"y\":[1,NaN,3]}"
check_jerr "1e999 in y (overflows a double)" 422 invalid_data '^y\[1\]$' $M "{\"name\":\"b\",\"X\":$X2,\"y\":[1,1e999,3]}"
check_jerr "string cell in X" 422 invalid_data '^X\[0\]\[1\]$' $M '{"name":"b","X":[[0,"abc"],[1,2],[2,3]],"y":[1,2,3]}'
check_jerr "string in y" 422 invalid_data '^y\[2\]$' $M "{\"name\":\"b\",\"X\":$X2,\"y\":[1,2,\"3\"]}"
check_jerr "ragged rows" 422 invalid_data '^X\[1\]$' $M '{"name":"b","X":[[0,1],[1],[2,3]],"y":[1,2,3]}'
check_jerr "X/y length mismatch" 422 invalid_data '^(y|X)$' $M "{\"name\":\"b\",\"X\":$X2,\"y\":[1,2]}"
check_jerr "empty X" 422 invalid_data '^X$' $M '{"name":"b","X":[],"y":[]}'
check_jerr "dimension mismatch on predict" 422 invalid_data '^X' $P '{"X":[[1,2],[3,4]]}'
check_jerr "predict without X" 400 invalid_argument '^X$' $P '{"include_noise":true}'
check_jerr "include_noise not a bool" 400 invalid_argument '^include_noise$' $P "{\"X\":$SINE_X,\"include_noise\":\"yes\"}"
check_jerr "unknown model (predict)" 404 not_found - /v1/models/nosuchmodel/predict "{\"X\":$SINE_X}"
check_err "unknown model (GET)" 404 not_found - GET /v1/models/nosuchmodel
check_err "unknown model (DELETE)" 404 not_found - DELETE /v1/models/nosuchmodel
check_err "unknown version (GET)" 404 not_found - GET /v1/models/sine/versions/99
check_jerr "unknown version (predict)" 404 not_found - $P "{\"X\":$SINE_X,\"version\":99}"
check_err "unknown route" 404 not_found - GET /v1/nosuchroute
check_err "unknown route under a model" 404 not_found - POST /v1/models/sine/nosuchaction \
    -H 'Content-Type: application/json' --data-binary '{}'
check_jerr "unknown method name" 400 invalid_argument '^method$' $M "{\"name\":\"b\",\"method\":\"nosuch\",\"X\":$X2,\"y\":[1,2,3]}"
check_err "wrong verb PUT /v1/models" 405 method_not_allowed - PUT /v1/models
allow=$(header Allow)
case ",$(printf '%s' "$allow" | tr -d ' ')," in
*,GET,*POST,* | *,POST,*GET,*) pass "405 has Allow: $allow" ;;
*) fail "405 has Allow: GET, POST" "Allow: '$allow'" ;;
esac
check_err "wrong verb GET predict" 405 method_not_allowed - GET $P
allow=$(header Allow)
[ "$(printf '%s' "$allow" | tr -d ' ')" = POST ]
verdict "405 on predict has Allow: POST" $? "Allow: '$allow'"
check_err "wrong verb POST /healthz" 405 method_not_allowed - POST /healthz -H 'Content-Type: application/json' --data-binary '{}'
check_err "wrong content type (text/plain)" 415 unsupported_media_type - POST $M -H 'Content-Type: text/plain' --data-binary "$SINE_BODY"
check_err "form content type" 415 unsupported_media_type - POST $P --data-binary "{\"X\":$SINE_X}"
check_jerr "bad name characters" 400 invalid_argument '^name$' $M "{\"name\":\"a b/c\",\"X\":$X2,\"y\":[1,2,3]}"
long_name=$(awk 'BEGIN { for (i = 0; i < 65; i++) printf "n" }')
check_jerr "name too long (65)" 400 invalid_argument '^name$' $M "{\"name\":\"$long_name\",\"X\":$X2,\"y\":[1,2,3]}"
check_json "name of 64 characters accepted" 201 $M "{\"name\":\"${long_name#n}\",\"X\":$X2,\"y\":[1,2,3]}"
check_jerr "unknown kernel type" 400 invalid_argument '^kernel' $M "{\"name\":\"b\",\"kernel\":{\"type\":\"nosuch\"},\"X\":$X2,\"y\":[1,2,3]}"
check_jerr "negative lengthscale" 400 invalid_argument '^kernel' $M "{\"name\":\"b\",\"kernel\":{\"type\":\"rbf\",\"lengthscale\":-1},\"X\":$X2,\"y\":[1,2,3]}"
check_jerr "negative noise variance" 400 invalid_argument '^noise' $M "{\"name\":\"b\",\"noise\":{\"variance\":-0.1},\"X\":$X2,\"y\":[1,2,3]}"
check_jerr "unknown option" 400 invalid_argument '^options' $M "{\"name\":\"b\",\"options\":{\"nosuch\":1},\"X\":$X2,\"y\":[1,2,3]}"
check_jerr "option out of range" 400 invalid_argument '^options' $M "{\"name\":\"b\",\"options\":{\"max_iterations\":-5},\"X\":$X2,\"y\":[1,2,3]}"
check_jerr "unknown top-level field" 400 invalid_argument - $M "{\"name\":\"b\",\"nosuchfield\":1,\"X\":$X2,\"y\":[1,2,3]}"
check_jerr "seed is a string" 400 invalid_argument '^seed$' $M "{\"name\":\"b\",\"seed\":\"x\",\"X\":$X2,\"y\":[1,2,3]}"
check_jerr "bad quantile (1.5)" 400 invalid_argument '^quantiles' $P "{\"X\":$SINE_X,\"quantiles\":[0.5,1.5]}"
check_jerr "bad quantile (0)" 400 invalid_argument '^quantiles' $P "{\"X\":$SINE_X,\"quantiles\":[0]}"
check_jerr "n_samples 0" 400 invalid_argument '^n_samples$' $S "{\"X\":$SINE_X,\"n_samples\":0,\"seed\":1}"
check_jerr "observe on exact" 422 unsupported - /v1/models/sine/observe '{"X":[[0.5]],"y":[0.4]}'
check_err "CSV with a text cell" 422 invalid_data - POST "$M?name=b" -H 'Content-Type: text/csv' \
    --data-binary "$(printf 'a,y\n1,2\nzz,3\n4,5\n')"
check_err "CSV with an unknown ?target" 400 invalid_argument '^target$' POST "$M?name=b&target=nosuch" \
    -H 'Content-Type: text/csv' --data-binary @"$T/plane_h.csv"
check_err "cancel a finished job" 409 conflict - DELETE "/v1/jobs/$JOB"
check_err "unknown job (GET)" 404 not_found - GET /v1/jobs/nosuchjob
check_err "unknown job (DELETE)" 404 not_found - DELETE /v1/jobs/nosuchjob
# Body limits (the daemon runs with --max-body-mb 1).
awk 'BEGIN { printf "{\"name\":\"big\",\"X\":["; for (i = 0; i < 100000; i++) printf "%s[%d.123456789]", (i ? "," : ""), i; printf "],\"y\":[0]}" }' >"$T/big.json"
check_err "2 MB body (limit 1 MB)" 413 payload_too_large - POST $M -H 'Content-Type: application/json' --data-binary @"$T/big.json"
check_err "2 MB body without Expect: 100-continue" 413 payload_too_large - POST $M -H 'Content-Type: application/json' -H 'Expect:' --data-binary @"$T/big.json"
check_err "Content-Length above the cap" 413 payload_too_large - POST $M -H 'Content-Type: application/json' \
    -H 'Content-Length: 5000000' --data-binary '{"name":"x"}'
check "daemon still healthy after the bad requests" 200 GET /healthz
check "model sine still predicts after the bad requests" 200 POST $P -H 'Content-Type: application/json' --data-binary "{\"X\":$SINE_X}"
cmp -s "$T/body" "$T/pred_noise.json"
verdict "same prediction as before the bad requests" $? "body changed"

# ---------------------------------------------------------------- long fit, concurrent predicts, cancel
section "long fit, concurrent predicts, cancel"
check_json "long async fit (3000 x 4)" 202 $M @"$T/long.json"
LJOB=$(jstr job)
if [ -n "$LJOB" ] && wait_job "$LJOB" running; then
    pass "long job is running"
    n_ok=0
    i=0
    while [ $i -lt 8 ]; do
        req POST $P -H 'Content-Type: application/json' --data-binary "{\"X\":$SINE_X}"
        [ "$ST" = 200 ] && cmp -s "$T/body" "$T/pred_noise.json" && n_ok=$((n_ok + 1))
        i=$((i + 1))
    done
    req GET "/v1/jobs/$LJOB"
    still=$(grep -c '"status":"running"' "$T/flat")
    if [ "$n_ok" = 8 ] && [ "$still" -ge 1 ]; then
        pass "8 predictions answered while the long fit runs"
    else
        fail "8 predictions answered while the long fit runs" "$n_ok of 8 ok; job running after them: $still" body
    fi
    grep -q '"progress":{"iteration":' "$T/flat" || grep -q '"iteration":' "$T/flat"
    verdict "running job reports progress.iteration" $? "no iteration in progress"
    req DELETE "/v1/jobs/$LJOB"
    case $ST in 200 | 202 | 204) pass "DELETE running job -> $ST" ;; *) fail "DELETE running job" "status $ST" body ;; esac
    if wait_job "$LJOB" cancelled; then pass "cancelled job reports cancelled"; else fail "cancelled job reports cancelled" "status '$JOB_STATUS'" body; fi
    check_err "cancel it again -> 409" 409 conflict - DELETE "/v1/jobs/$LJOB"
    check_err "a cancelled fit stores nothing" 404 not_found - GET /v1/models/long
else
    fail "long job is running" "status '$JOB_STATUS'" body
fi

# ---------------------------------------------------------------- metrics (after the fits)
section "metrics (after the fits)"
check "GET /metrics" 200 GET /metrics
cp "$T/body" "$T/metrics.txt"
ct=$(header Content-Type)
case $ct in text/plain*) pass "metrics Content-Type $ct" ;; *) fail "metrics Content-Type text/plain" "'$ct'" ;; esac
for m in gpserve_http_requests_total gpserve_http_request_duration_seconds_bucket gpserve_fits_total \
    gpserve_jobs_queued gpserve_jobs_running gpserve_models_loaded gpserve_jitter_escalations_total \
    gpserve_variance_clamps_total; do
    grep -Eq "^$m(\{[^}]*\})? [-+0-9.eEInfa]+\$" "$T/metrics.txt"
    verdict "metric $m" $? "no sample line"
done
grep -q '^# TYPE gpserve_http_request_duration_seconds histogram' "$T/metrics.txt" &&
    grep -q '^gpserve_http_request_duration_seconds_bucket{.*le="+Inf"' "$T/metrics.txt"
verdict "request duration is a histogram with a +Inf bucket" $? "no TYPE histogram / +Inf bucket"
awk '/^gpserve_fits_total/ { s += $NF } END { exit !(s >= 5) }' "$T/metrics.txt"
verdict "gpserve_fits_total counts the fits (>= 5)" $? "sum below 5"

# ---------------------------------------------------------------- a second daemon on the same db
section "a second daemon on the same db"
check_json "predict sine (reference for other daemons)" 200 $P "{\"X\":$SINE_X,\"quantiles\":[0.1,0.9],\"full_covariance\":true}"
cp "$T/body" "$T/ref_pred.json"
check_json "sample sine (reference)" 200 $S "{\"X\":$SINE_X,\"n_samples\":3,\"seed\":99}"
cp "$T/body" "$T/ref_sample.json"
if [ -n "$CONCRETE" ]; then
    check_json "predict concrete (reference)" 200 /v1/models/concrete/predict '{"X":[[540,0,0,162,2.5,1040,676,28]]}'
    cp "$T/body" "$T/ref_concrete.json"
fi
if start_daemon "$T/second.log" --db "$T/main.db"; then
    pass "second daemon on the same db starts"
    SECOND_PID=$DPID
    MPORT=$PORT
    PORT=$DPORT
    check_json "second daemon: predict sine" 200 $P "{\"X\":$SINE_X,\"quantiles\":[0.1,0.9],\"full_covariance\":true}"
    cmp -s "$T/body" "$T/ref_pred.json"
    verdict "second daemon: identical predict body" $? "bodies differ"
    check "second daemon: list models" 200 GET /v1/models
    grep -q '"name":"asyncm"' "$T/flat"
    verdict "second daemon sees the models" $? "asyncm missing"
    check "second daemon: job of the first" 200 GET "/v1/jobs/$JOB"
    PORT=$MPORT
    # A model the first daemon fits now is served by the second at once.
    check_json "first daemon fits 'fresh'" 201 $M "{\"name\":\"fresh\",\"X\":$X2,\"y\":[1,2,3]}"
    PORT=$DPORT
    check_json "second daemon serves 'fresh'" 200 /v1/models/fresh/predict '{"X":[[1.5]]}'
    stop_daemon "$SECOND_PID"
    [ "$STOP_RC" = 0 ]
    verdict "second daemon exits 0 on SIGTERM" $? "exit $STOP_RC"
    PORT=$MPORT
else
    fail "second daemon on the same db starts"
fi

# ---------------------------------------------------------------- restart
section "restart"
stop_daemon "$MAIN_PID"
if [ "$STOP_RC" = 0 ]; then pass "SIGTERM: main daemon exits 0 (${STOP_SECS}s)"; else
    fail "SIGTERM: main daemon exits 0" "exit $STOP_RC"
    tail -n 5 "$T/main.log" | sed 's/^/     | /'
fi
if start_daemon "$T/main2.log" --db "$T/main.db" --max-body-mb 1; then
    pass "restart on the same db"
    PORT=$DPORT
    check_json "after restart: predict sine" 200 $P "{\"X\":$SINE_X,\"quantiles\":[0.1,0.9],\"full_covariance\":true}"
    cmp -s "$T/body" "$T/ref_pred.json"
    verdict "after restart: predict body bit-identical" $? "bodies differ"
    check_json "after restart: sample sine" 200 $S "{\"X\":$SINE_X,\"n_samples\":3,\"seed\":99}"
    cmp -s "$T/body" "$T/ref_sample.json"
    verdict "after restart: sample body bit-identical" $? "bodies differ"
    if [ -n "$CONCRETE" ]; then
        check_json "after restart: predict concrete" 200 /v1/models/concrete/predict '{"X":[[540,0,0,162,2.5,1040,676,28]]}'
        cmp -s "$T/body" "$T/ref_concrete.json"
        verdict "after restart: concrete predict bit-identical" $? "bodies differ"
    fi
    check_json "after restart: predict ssgp" 200 /v1/models/ssgp2d/predict "{\"X\":$SSX,\"full_covariance\":true,\"quantiles\":[0.1,0.9]}"
    cmp -s "$T/body" "$T/ref_ssgp.json"
    verdict "after restart: ssgp predict body bit-identical" $? "bodies differ"
    check_json "after restart: predict sgpr" 200 /v1/models/sg2d/predict "{\"X\":$SSX,\"full_covariance\":true,\"quantiles\":[0.1,0.9]}"
    cmp -s "$T/body" "$T/ref_sg.json"
    verdict "after restart: sgpr predict body bit-identical" $? "bodies differ"
    check_json "after restart: predict renyi" 200 /v1/models/re2d/predict "{\"X\":$SSX,\"full_covariance\":true,\"quantiles\":[0.1,0.9]}"
    cmp -s "$T/body" "$T/ref_re.json"
    verdict "after restart: renyi predict body bit-identical" $? "bodies differ"
    check_json "after restart: predict msrfr" 200 /v1/models/ms2d/predict "{\"X\":$SSX,\"components\":true,\"quantiles\":[0.05,0.5,0.95],\"full_covariance\":true}"
    cmp -s "$T/body" "$T/ref_ms.json"
    verdict "after restart: msrfr predict body bit-identical" $? "bodies differ"
    check "after restart: versions kept" 200 GET /v1/models/sine
    grep -q '"versions":\[1,2\]' "$T/flat"
    verdict "after restart: sine has versions [1,2]" $? "wrong versions"
    check "after restart: finished job still reported" 200 GET "/v1/jobs/$JOB"
    # Delete: 204, then 404 everywhere.
    check "DELETE /v1/models/sine" 204 DELETE /v1/models/sine
    [ ! -s "$T/body" ]
    verdict "204 has an empty body" $? "body not empty"
    check_err "GET deleted model" 404 not_found - GET /v1/models/sine
    check_err "GET deleted model's version" 404 not_found - GET /v1/models/sine/versions/1
    check_jerr "predict deleted model" 404 not_found - $P "{\"X\":$SINE_X}"
    check_err "DELETE it again" 404 not_found - DELETE /v1/models/sine
    check "after everything: /healthz" 200 GET /healthz
    stop_daemon "$DPID"
    [ "$STOP_RC" = 0 ]
    verdict "restarted daemon exits 0 on SIGTERM" $? "exit $STOP_RC"
else
    fail "restart on the same db"
fi

# ================================================================ API key daemon
section "API key daemon"
printf 'test-key-0123456789\n' >"$T/keyfile"
if start_daemon "$T/key.log" --db "$T/key.db" --api-key-file "$T/keyfile" --max-train-points 10; then
    pass "daemon with --api-key-file starts"
    PORT=$DPORT
    KEY='test-key-0123456789'
    check "api key: /healthz without a key" 200 GET /healthz
    check_err "api key: missing -> 401" 401 unauthorized - GET /v1/models
    check_err "api key: wrong Bearer -> 401" 401 unauthorized - GET /v1/models -H 'Authorization: Bearer wrong-key'
    check_err "api key: key prefix -> 401" 401 unauthorized - GET /v1/models -H "Authorization: Bearer ${KEY%?}"
    check "api key: Authorization: Bearer KEY -> 200" 200 GET /v1/models -H "Authorization: Bearer $KEY"
    check "api key: /readyz without a key" 200 GET /readyz
    check_err "api key: other scheme -> 401" 401 unauthorized - GET /v1/models -H "Authorization: Basic $KEY"
    check_err "api key: fit without key -> 401" 401 unauthorized - POST $M -H 'Content-Type: application/json' --data-binary "$SINE_BODY"
    check_err "--max-train-points 10: 21 points -> 413" 413 payload_too_large - POST $M \
        -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' --data-binary "$SINE_BODY"
    stop_daemon "$DPID"
    [ "$STOP_RC" = 0 ]
    verdict "api key daemon exits 0 on SIGTERM" $? "exit $STOP_RC"
else
    fail "daemon with --api-key-file starts"
fi

# ================================================================ queue full, SIGTERM during a fit
section "queue full, SIGTERM during a fit"
if start_daemon "$T/busy.log" --db "$T/busy.db" --fit-workers 1 --queue-size 1; then
    pass "daemon with --fit-workers 1 --queue-size 1 starts"
    PORT=$DPORT
    jpost $M @"$T/long.json"
    BJOB=$(jstr job)
    if [ "$ST" = 202 ] && [ -n "$BJOB" ] && wait_job "$BJOB" running; then
        pass "busy daemon: long fit running"
        got429=""
        i=0
        while [ $i -lt 4 ]; do
            jpost $M @"$T/async.json"
            if [ "$ST" = 429 ]; then
                got429=yes
                break
            fi
            i=$((i + 1))
        done
        if [ -n "$got429" ] && [ "$(jstr code)" = overloaded ] && [ -n "$(header Retry-After)" ]; then
            pass "full queue -> 429 overloaded with Retry-After ($(header Retry-After))"
        else
            fail "full queue -> 429 overloaded with Retry-After" "last status $ST, code '$(jstr code)', Retry-After '$(header Retry-After)'" body
        fi
        check "busy daemon still answers /healthz" 200 GET /healthz
        stop_daemon "$DPID"
        if [ "$STOP_RC" = 0 ]; then pass "SIGTERM during a running fit: exit 0 (${STOP_SECS}s)"; else
            fail "SIGTERM during a running fit: exit 0 within ${STOPWAIT}s" "exit $STOP_RC"
            tail -n 5 "$T/busy.log" | sed 's/^/     | /'
        fi
        # The interrupted job must not stay "running" in the store for ever.
        if start_daemon "$T/busy2.log" --db "$T/busy.db"; then
            PORT=$DPORT
            check "after the shutdown: GET the interrupted job" 200 GET "/v1/jobs/$BJOB"
            st=$(grep -o '"status":"\(queued\|running\|succeeded\|failed\|cancelled\)"' "$T/flat" | head -n 1)
            case $st in
            *cancelled* | *failed*) pass "interrupted job is reported ${st#*:}" ;;
            *) fail "interrupted job is reported cancelled or failed" "$st" body ;;
            esac
            check_err "the interrupted fit stored no model" 404 not_found - GET /v1/models/long
            stop_daemon "$DPID"
        else
            fail "restart of the busy daemon's db"
        fi
    else
        fail "busy daemon: long fit running" "status $ST, job '$JOB_STATUS'" body
        stop_daemon "$DPID"
    fi
else
    fail "daemon with --fit-workers 1 --queue-size 1 starts"
fi

# ================================================================ daemon logs
section "daemon logs"
# One line per request on stderr; no 500 anywhere; no sanitizer report.
grep -Eq 'GET /healthz 200' "$T/main.log"
verdict "request log line (method, path, status) on stderr" $? "no 'GET /healthz 200' in the log"
if grep -Eq '(GET|POST|PUT|DELETE|PATCH) [^ ]* 5[0-9][0-9] ' "$T"/*.log; then
    fail "no request was answered 5xx" "$(grep -Eh '(GET|POST|PUT|DELETE|PATCH) [^ ]* 5[0-9][0-9] ' "$T"/*.log | head -n 3 | tr '\n' ';')"
else
    pass "no request was answered 5xx"
fi
if grep -Eq 'AddressSanitizer|LeakSanitizer|runtime error:' "$T"/*.log; then
    fail "no sanitizer report in the daemon logs" "$(grep -Eh -m 3 'AddressSanitizer|LeakSanitizer|runtime error:' "$T"/*.log | tr '\n' ';')"
else
    pass "no sanitizer report in the daemon logs"
fi

# ================================================================ Docker files
section "Docker files"
if [ -f "$ROOT/tests/integration/docker_check.sh" ]; then
    sh "$ROOT/tests/integration/docker_check.sh" "$BUILD" >"$T/docker.out" 2>&1
    grep -E '^(ok |FAIL|note)' "$T/docker.out"
    sed -n 's/^ok .*/PASS/p; s/^FAIL.*/FAIL/p' "$T/docker.out" >>"$RESULTS"
    grep -Eq '^(ok |FAIL)' "$T/docker.out" || fail "docker_check.sh ran" "$(tail -n 3 "$T/docker.out")"
fi

# ================================================================ README configuration table
section "README configuration table"
# Every flag of `gpserve --help` is in the README's configuration table, with
# its environment variable, and the table names no flag the daemon lacks.
"$BIN" --help >"$T/help.txt" 2>&1
sed -n 's/^[[:space:]]*\(--[a-z][a-z0-9-]*\).*/\1/p' "$T/help.txt" | grep -v -- '^--help$' | sort -u >"$T/help.flags"
sed -n '/^### Configuration/,/^## /p' README.md | grep '^| `--' >"$T/readme.table"
sed 's/^| `\(--[a-z0-9-]*\).*/\1/' "$T/readme.table" | sort -u >"$T/readme.flags"
if [ -s "$T/help.flags" ] && cmp -s "$T/help.flags" "$T/readme.flags"; then
    pass "README configuration table has exactly the flags of --help ($(count_lines <"$T/help.flags"))"
else
    fail "README configuration table has exactly the flags of --help" \
        "only in --help: $(comm -23 "$T/help.flags" "$T/readme.flags" | tr '\n' ' ')only in README: $(comm -13 "$T/help.flags" "$T/readme.flags" | tr '\n' ' ')"
fi
bad=""
baddef=""
while read -r f; do
    env=$(grep -A1 -- "^ *$f " "$T/help.txt" | grep -o 'GPSERVE_[A-Z_]*' | head -n 1)
    dflt=$(grep -A1 -- "^ *$f " "$T/help.txt" | sed -n 's/.*default \([^ ,]*\).*/\1/p' | head -n 1)
    rrow=$(grep -- "^| \`$f" "$T/readme.table")
    printf '%s\n' "$rrow" | grep -q "\`$env\`" || bad="$bad $f/$env"
    case $dflt in
    none) printf '%s\n' "$rrow" | grep -q '| none |' || baddef="$baddef $f=none" ;;
    *) printf '%s\n' "$rrow" | awk -F'|' -v d="\`$dflt\`" 'index($4, d) == 0 { exit 1 }' || baddef="$baddef $f=$dflt" ;;
    esac
done <"$T/help.flags"
[ -z "$bad" ]
verdict "README table: each flag's environment variable as in --help" $? "mismatch:$bad"
[ -z "$baddef" ]
verdict "README table: each flag's default as in --help" $? "--help says:$baddef"

finish
