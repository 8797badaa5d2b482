#!/bin/sh
# The integration tests' library: settings, daemons, requests, JSON (jq),
# reporting and test data. Sourced by tests/integration/run.sh, which sets
# BUILD before; every area file (t_*.sh) uses only what is defined here.
#
# Environment: GPSERVE_DATASETS (default ../shared/datasets) for concrete.csv;
# GPSERVE_TEST_VERBOSE=1 prints every response body of a failed case in full;
# GPSERVE_TEST_SLOW=N multiplies every bound (default 4 under build/san);
# GPSERVE_TEST_DB_URL=postgresql://... runs the daemons of the main database
# and of the online area on that PostgreSQL database (a schema per database
# name, db_for below; needs psql) instead of SQLite files.

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
      GPSERVE_TIMEOUT GPSERVE_API_KEY_FILE GPSERVE_MODEL_CACHE GPSERVE_COMPUTE_THREADS \
      GPSERVE_MAX_INPUT_DIM GPSERVE_MAX_CONNECTIONS_PER_IP GPSERVE_REQUEST_TIMEOUT \
      GPSERVE_JOB_LEASE GPSERVE_JOB_ATTEMPTS GPSERVE_JOB_RETENTION_HOURS GPSERVE_IDEMPOTENCY_HOURS GPSERVE_AUDIT_RETENTION_DAYS \
      GPSERVE_SNAPSHOT_INTERVAL GPSERVE_BATCH_DELAY_US GPSERVE_BATCH_MAX_POINTS \
      GPSERVE_TLS_CERT GPSERVE_TLS_KEY GPSERVE_TLS_CLIENT_CA GPSERVE_MPI_LAUNCHER \
      GPSERVE_MPI_HOSTFILE GPSERVE_MPI_ARGS GPSERVE_FIT_PROGRAM GPSERVE_MPI_MAX_RANKS
: "${OPENBLAS_THREAD_TIMEOUT:=16}"
export OPENBLAS_THREAD_TIMEOUT
# curl must talk to 127.0.0.1 directly.
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY

T=$(mktemp -d "${TMPDIR:-/tmp}/gpserve-it.XXXXXX") || exit 1
RESULTS=$T/results
: >"$RESULTS"
PIDS=""
# Shell commands an area adds to run at exit before the processes are stopped
# (e.g. stopping a PostgreSQL cluster it started), each ending with ';'.
CLEANUP_CMDS=""

# ---------------------------------------------------------------- databases

DB_URL=${GPSERVE_TEST_DB_URL:-}
# db_for NAME: the --db of this run's database NAME: the file $T/NAME.db, or,
# with GPSERVE_TEST_DB_URL, that URL with its search_path set to the schema
# gpit<pid>_NAME (made here; this run's schemas are dropped at the end).
db_for() {
    if [ -z "$DB_URL" ]; then
        echo "$T/$1.db"
        return 0
    fi
    _s="gpit$$_$1"
    psql "$DB_URL" -qAt -c "CREATE SCHEMA IF NOT EXISTS $_s" >/dev/null 2>&1 || return 1
    case $DB_URL in *\?*) _sep='&' ;; *) _sep='?' ;; esac
    echo "$DB_URL${_sep}options=-csearch_path%3D$_s"
}
drop_db_schemas() {
    [ -n "$DB_URL" ] || return 0
    psql "$DB_URL" -qAt -c "SET client_min_messages = warning; DO \$\$ DECLARE r record; BEGIN
        FOR r IN SELECT nspname FROM pg_namespace WHERE starts_with(nspname, 'gpit$$_') LOOP
        EXECUTE 'DROP SCHEMA ' || quote_ident(r.nspname) || ' CASCADE'; END LOOP; END \$\$" \
        >/dev/null 2>&1
}

cleanup() {
    eval "$CLEANUP_CMDS"
    for p in $PIDS; do
        kill -TERM "$p" 2>/dev/null
    done
    for p in $PIDS; do
        i=0
        while alive "$p" && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
        alive "$p" && kill -KILL "$p" 2>/dev/null
    done
    drop_db_schemas
    # A tmpfs the resources area mounted, if a failure left it mounted.
    mountpoint -q "$T/tmpfs" 2>/dev/null && umount "$T/tmpfs" 2>/dev/null
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
# free_port: a loopback port nothing uses at this moment (the kernel's pick
# for port 0); another process may still take it before the caller binds it,
# so a caller retries on "address in use".
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
        echo $((20000 + ($$ * 7 + $(date +%s)) % 12000))
}

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
# status, 000 when there was no HTTP answer); body in $T/body, headers in $T/hdr.
req() {
    _m=$1
    _p=$2
    shift 2
    rm -f "$T/body" "$T/hdr"
    ST=$(curl -sS --max-time "$MT" -o "$T/body" -D "$T/hdr" -w '%{http_code}' -X "$_m" \
        "$@" "http://127.0.0.1:$PORT$_p" 2>"$T/curlerr")
    [ -n "$ST" ] || ST=000
    [ -f "$T/body" ] || : >"$T/body"
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

# ---- JSON, read with jq (never grep/sed on JSON). KEY is looked up at any
# depth, the first match in document order; FILE defaults to the last body.
# jq FILTER [FILE]: the raw output of a jq filter on the last body (nothing on
# a body that is not JSON).
jqb() {
    jq -r "$1" "${2:-$T/body}" 2>/dev/null
}
# jhas FILTER [FILE]: succeeds when the filter is true on the last body.
jhas() {
    jq -e "$1" "${2:-$T/body}" >/dev/null 2>&1
}
# jstr KEY [FILE]: the first string value of KEY ("" when none).
jstr() {
    jq -r --arg k "$1" 'first(.. | objects | .[$k]? | strings) // empty' "${2:-$T/body}" 2>/dev/null
}
# jnum KEY [FILE]: the first number value of KEY.
jnum() {
    jq -r --arg k "$1" 'first(.. | objects | .[$k]? | numbers) // empty' "${2:-$T/body}" 2>/dev/null
}
# jarr KEY [FILE]: the first array of numbers under KEY, one number a line.
jarr() {
    jq -r --arg k "$1" 'first(.. | objects | .[$k]? | arrays | select(all(.[]; type == "number"))) | .[]' \
        "${2:-$T/body}" 2>/dev/null
}
# jmat KEY [FILE]: the first array of arrays under KEY, one row a line (comma separated).
jmat() {
    jq -r --arg k "$1" 'first(.. | objects | .[$k]? | arrays | select(length > 0 and all(.[]; type == "array"))) | .[] | map(tostring) | join(",")' \
        "${2:-$T/body}" 2>/dev/null
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
    _gc=$(jqb '.error.code // empty')
    _gf=$(jqb '.error.field // empty')
    _why=""
    [ "$ST" = "$_s" ] || _why="status $ST (expected $_s)"
    jhas '.error | type == "object"' || _why="$_why; not an error object"
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
        JOB_STATUS=$(jqb '.status // empty')
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

# ---------------------------------------------------------------- test data

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

# async.json: 50 x 3 points for asynchronous fits (model asyncm).
gen_xy 50 3 17 | csv_to_json asyncm '"async":true,"seed":1,' >"$T/async.json"
# ss.csv: 200 x 2 points the per-method fits share; SSX their test points;
# SSB a tiny body for the requests that must be refused.
gen_xy 200 2 23 >"$T/ss.csv"
SSX='[[0.1,-0.3],[1.2,0.4],[-1.5,1.9],[0.0,0.0]]'
SSB='"X":[[0,1],[1,0],[2,2]],"y":[1,2,3]'
M=/v1/models
P=/v1/models/sine/predict
S=/v1/models/sine/sample
X2='[[0],[1],[2]]'
JOB=""

CONCRETE=$DATASETS/concrete.csv
if [ ! -f "$CONCRETE" ]; then
    CONCRETE=""
    note "$DATASETS/concrete.csv not found: the concrete cases are skipped" \
        "(the README examples use a synthetic 8-feature stand-in)"
fi

# ---------------------------------------------------------------- shared state
# What an area needs from another is made on demand, so that any area can run
# alone: a model is fitted when absent, a finished job is made when none is.

# need_fit NAME BODY: fit NAME with BODY (JSON, or @FILE) unless the daemon has it.
need_fit() {
    req GET "/v1/models/$1"
    [ "$ST" = 200 ] && return 0
    jpost /v1/models "$2"
    [ "$ST" = 201 ] || fail "fit $1 for this area" "status $ST" body
}
# need_sine: the model sine (exact GP on 21 points of sin x).
need_sine() { need_fit sine "$SINE_BODY"; }
# sine_reference: $T/pred_noise.json, the predict body of sine at SINE_X.
sine_reference() {
    [ -s "$T/pred_noise.json" ] && return 0
    need_sine
    jpost /v1/models/sine/predict "{\"X\":$SINE_X}"
    cp "$T/body" "$T/pred_noise.json"
}
# need_finished_job: JOB, the id of a job that has finished (succeeded).
need_finished_job() {
    [ -n "$JOB" ] && return 0
    jpost /v1/models @"$T/async.json"
    JOB=$(jstr job)
    [ -n "$JOB" ] && wait_job "$JOB" succeeded || fail "a finished job for this area" "job '$JOB' $JOB_STATUS" body
}
# remember NAME PATH BODY: keep the body of a prediction (or sample) request
# as a reference; the restart area replays every one and compares bytes.
remember() {
    mkdir -p "$T/refs"
    jpost "$2" "$3"
    if [ "$ST" = 200 ]; then
        cp "$T/body" "$T/refs/$1.body"
        printf '%s\n%s\n' "$2" "$3" >"$T/refs/$1.req"
    else
        fail "reference $1" "status $ST" body
    fi
}

# ---- replicas: a write on one daemon served by another within the bound

# CHANGE_BOUND_MS: how soon another daemon on the same database serves a
# write (docs/design/storage.md, "The change generation": the watch sees a
# commit within 5 ms plus the time its thread waits for a CPU; this allows a
# loaded 2-core machine's scheduling, where one request may take 100 ms,
# and curl's own start), times SLOW.
CHANGE_BOUND_MS=$((1000 * SLOW))

# seen_within NAME FILTER METHOD PATH [curl args...]: repeat the request on
# $PORT until the jq FILTER holds on its body; passes when it held within
# CHANGE_BOUND_MS of the call (the time taken is printed), fails after.
seen_within() {
    _sn=$1
    _sf=$2
    shift 2
    _st0=$(date +%s%N)
    while :; do
        req "$@"
        _sel=$((($(date +%s%N) - _st0) / 1000000))
        if jhas "$_sf"; then
            if [ "$_sel" -le "$CHANGE_BOUND_MS" ]; then
                pass "$_sn (after $_sel ms)"
                return 0
            fi
            fail "$_sn" "after $_sel ms, more than $CHANGE_BOUND_MS ms"
            return 1
        fi
        if [ "$_sel" -gt $((CHANGE_BOUND_MS * 8)) ]; then
            fail "$_sn" "not within $_sel ms: $(head -c 200 "$T/body")"
            return 1
        fi
        sleep 0.002
    done
}

# replica_changes A_PORT B_PORT LABEL: a fit (a new latest version), an alias
# set and moved, a version deleted, an observe and a delete on daemon A, each served by daemon B (which has the
# previous state cached: its resolved row and its model) within
# CHANGE_BOUND_MS. PORT is restored.
replica_changes() {
    _rcp=$PORT
    _ra=$1
    _rb=$2
    _rl=$3
    _rk='"kernel":{"type":"rbf","variance":1.3,"lengthscale":[0.7],"fixed":true},"noise":{"variance":0.01,"fixed":true},"standardize":false'
    _rfit="{\"name\":\"chg\",\"method\":\"exact\",$_rk,\"X\":[0,0.5,1,1.5],\"y\":[0.1,0.5,0.8,1.0]}"
    PORT=$_ra
    req DELETE /v1/models/chg
    check_json "$_rl: A fits chg version 1" 201 /v1/models "$_rfit"
    PORT=$_rb
    check "$_rl: B gets chg" 200 GET /v1/models/chg
    jhas '.version == 1'
    verdict "$_rl: B serves version 1" $? "$(jqb 'tostring' | head -c 200)"
    check_json "$_rl: B predicts chg (cached)" 200 /v1/models/chg/predict '{"X":[[0.7]]}'
    PORT=$_ra
    check_json "$_rl: A fits chg version 2" 201 /v1/models "$_rfit"
    PORT=$_rb
    seen_within "$_rl: B's GET shows A's new latest version" \
        '.version == 2 and .versions == [1,2]' GET /v1/models/chg
    seen_within "$_rl: B predicts with A's new latest version" '.version == 2' \
        POST /v1/models/chg/predict -H 'Content-Type: application/json' --data-binary '{"X":[[0.7]]}'
    PORT=$_ra
    check "$_rl: A points alias champion at chg version 1" 200 PUT /v1/models/chg/aliases/champion \
        -H 'Content-Type: application/json' --data-binary '{"version": 1}'
    PORT=$_rb
    seen_within "$_rl: B predicts through A's alias (version 1)" \
        '.version == 1 and .alias == "champion"' POST /v1/models/chg/predict \
        -H 'Content-Type: application/json' --data-binary '{"X":[[0.7]],"version":"champion"}'
    PORT=$_ra
    check "$_rl: A moves champion to version 2" 200 PUT /v1/models/chg/aliases/champion \
        -H 'Content-Type: application/json' --data-binary '{"version": 2}'
    PORT=$_rb
    seen_within "$_rl: B's alias list shows A's move" '.aliases == [.aliases[0]] and
        .aliases[0].alias == "champion" and .aliases[0].version == 2' \
        GET /v1/models/chg/aliases
    PORT=$_ra
    check "$_rl: A deletes chg version 1" 204 DELETE /v1/models/chg/versions/1
    PORT=$_rb
    seen_within "$_rl: B's GET shows A's version delete" '.version == 2 and .versions == [2]' \
        GET /v1/models/chg
    PORT=$_ra
    check_json "$_rl: A observes a row into chg version 2" 200 /v1/models/chg/observe \
        '{"X":[[2]],"y":[0.9]}'
    req POST /v1/models/chg/predict -H 'Content-Type: application/json' --data-binary '{"X":[[1.9]]}'
    cp "$T/body" "$T/chg_a.json"
    PORT=$_rb
    seen_within "$_rl: B's GET shows A's observation" '.online.observations == 1 and .n_train == 5' \
        GET /v1/models/chg
    req POST /v1/models/chg/predict -H 'Content-Type: application/json' --data-binary '{"X":[[1.9]]}'
    cmp -s "$T/body" "$T/chg_a.json"
    verdict "$_rl: B's predict after the observation is A's, byte for byte" $? "bodies differ"
    PORT=$_ra
    check "$_rl: A deletes chg" 204 DELETE /v1/models/chg
    PORT=$_rb
    seen_within "$_rl: B's GET answers A's delete" '.error.code == "not_found"' GET /v1/models/chg
    seen_within "$_rl: B's predict answers A's delete" '.error.code == "not_found"' \
        POST /v1/models/chg/predict -H 'Content-Type: application/json' --data-binary '{"X":[[0.7]]}'
    PORT=$_rcp
}
