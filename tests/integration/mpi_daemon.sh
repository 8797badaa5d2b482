#!/bin/sh
# The mpi area's second half: the daemon's distributed jobs
# (docs/design/scale-out.md, "Fits beyond one machine", "Cancel, progress,
# failure"), end to end through mpirun. Sourced by t_mpi.sh once it found
# mpirun, gpserve-fit, data sets and a method that streams (STREAMING, FIT,
# MPIRUN, PRED_X and close_means come from there).
#
# A daemon of its own ("D": --mpi-args --oversubscribe, --mpi-max-ranks 4,
# the OMPI_ALLOW_RUN_AS_ROOT variables in its environment) on a database of
# its own:
#   - a job that runs long (svgp by Adam, 10^5 epochs): progress while it
#     runs; a rank killed (kill -9) -> failed, interrupted, naming the rank and
#     mpirun, no version, no rank left, the daemon answers;
#   - another: DELETE of its data set 409 naming the job; DELETE of the job ->
#     cancelled within CANCEL_BOUND, no version, no process of it left;
#   - another: SIGTERM of the daemon -> it exits 0, no process of the job
#     left, the job handed back (the restarted daemon runs it again);
#   - per streaming method, a job over "ranks": 2 -> succeeded, its progress
#     at the end, the version recording its data set; its predictions the
#     bits of `gpserve-fit --request` with -np 2 of the same request, and
#     those of the daemon's own fit over the data set (not distributed) to
#     1e-10;
#   - the refusals (ranks 0 and 5, async false, X and y, a method that needs
#     its rows in memory).
# And on the mpi area's daemon (t_mpi.sh), started without the OMPI variables: when the tests
# run as root, a distributed job fails naming the two variables.

section "mpi: the daemon's distributed jobs"
MPI_MAIN_PORT=$PORT
CANCEL_BOUND=$((15 * SLOW)) # rank 0 polls every 0.5 s; the daemon forces after 10 + 3 s
GONE_BOUND=$((10 * SLOW))   # a launcher's processes gone after its end

# Under the sanitizers the ranks need detect_leaks=0 (t_mpi.sh) but the
# daemon should keep its own leak check: the launcher sets it for the ranks.
MPID_LAUNCHER=mpirun
case $BUILD in *san*)
    MPID_LAUNCHER=$T/mpirun_noleaks.sh
    printf '#!/bin/sh\nASAN_OPTIONS='"'"'%s'"'"' exec mpirun "$@"\n' "$ASAN_OPTIONS" >"$MPID_LAUNCHER"
    chmod +x "$MPID_LAUNCHER"
    ;;
esac

# mpid_start: (re)start D on MPID_DB; sets MPID_PID and PORT.
mpid_start() {
    _asan=$ASAN_OPTIONS
    if [ -n "$MPI_ASAN_SAVED" ]; then ASAN_OPTIONS=$MPI_ASAN_SAVED; else unset ASAN_OPTIONS; fi
    start_daemon "$T/mpid.log" --db "$MPID_DB" --mpi-args "--oversubscribe" --mpi-max-ranks 4 \
        --mpi-launcher "$MPID_LAUNCHER"
    _rc=$?
    ASAN_OPTIONS=$_asan
    export ASAN_OPTIONS
    MPID_PID=$DPID
    PORT=$DPORT
    return $_rc
}
# job_procs ID: the pids of the launcher and ranks of job ID (their command
# lines carry --job ID).
job_procs() { pgrep -f -- "--job $1 " 2>/dev/null; }
# rank_pids ID: the pids of its ranks alone (gpserve-fit first on the line).
rank_pids() { pgrep -f -- "^[^ ]*gpserve-fit --db .* --job $1 " 2>/dev/null; }
# procs_gone ID: wait (GONE_BOUND) until no process of job ID is left.
procs_gone() {
    _i=0
    while [ -n "$(job_procs "$1")" ] && [ $_i -lt $((GONE_BOUND * 10)) ]; do
        sleep 0.1
        _i=$((_i + 1))
    done
    [ -z "$(job_procs "$1")" ]
}
# launcher_ended ID: wait (GONE_BOUND) for the holder's log line of the end of
# job ID's launcher ("... ended (STATUS): OUTCOME"), logged after it reaped it.
launcher_ended() {
    _i=0
    while ! grep -q "job $1: .* ended (" "$T/mpid.log" && [ $_i -lt $((GONE_BOUND * 10)) ]; do
        sleep 0.1
        _i=$((_i + 1))
    done
}
# wait_progress ID: wait (JOBWAIT) until job ID runs and shows an objective.
wait_progress() {
    _i=0
    while [ $_i -lt $((JOBWAIT * 5)) ]; do
        req GET "/v1/jobs/$1"
        jhas '.status == "running" and .progress.iteration >= 1 and
              (.progress.objective | type) == "number"' && return 0
        jhas '.status == "succeeded" or .status == "failed" or .status == "cancelled"' && return 1
        sleep 0.2
        _i=$((_i + 1))
    done
    return 1
}
# long_job NAME: an async distributed fit over mpibig that outlasts the test;
# sets LJOB.
long_job() {
    jpost /v1/models "{\"name\":\"$1\",\"method\":\"svgp\",\"seed\":3,
        \"options\":{\"optimizer\":\"adam\",\"epochs\":100000,\"inducing\":50},
        \"data\":{\"dataset\":\"mpibig\",\"target\":\"y\"},\"distributed\":{\"ranks\":2}}"
    LJOB=$(jqb '.job // empty')
    [ "$ST" = 202 ] && [ -n "$LJOB" ]
}

if ! MPID_DB=$(db_for mpid); then
    fail "mpi: a database for the daemon of its own" "cannot make a schema in GPSERVE_TEST_DB_URL"
elif ! mpid_start; then
    fail "mpi: a daemon of its own starts" "no listening line"
else
pass "mpi: a daemon of its own starts (--mpi-args --oversubscribe, --mpi-max-ranks 4)"

{
    echo "x1,x2,y"
    gen_xy 600 2 19
} >"$T/mpids.csv"
{
    echo "x1,x2,y"
    gen_xy 3000 2 29
} >"$T/mpibig.csv"
check "PUT the data set mpids (600 rows)" 201 PUT /v1/datasets/mpids \
    -H 'Content-Type: text/csv' --data-binary @"$T/mpids.csv"
MPIDS_SHA=$(jqb .sha256)
check "PUT the data set mpibig (3000 rows)" 201 PUT /v1/datasets/mpibig \
    -H 'Content-Type: text/csv' --data-binary @"$T/mpibig.csv"

# ---- a rank killed mid-fit
if long_job dist_killed; then
    KJOB=$LJOB
    wait_progress "$KJOB"
    verdict "a long distributed job: GET shows it running with progress (iteration, objective)" $? \
        "$(head -c 300 "$T/body")"
    VICTIM=$(rank_pids "$KJOB" | tail -n 1)
    [ -n "$VICTIM" ] && [ "$(rank_pids "$KJOB" | count_lines)" = 2 ]
    verdict "its 2 ranks run under the launcher (pgrep)" $? "ranks: $(rank_pids "$KJOB" | tr '\n' ' ')"
    [ -n "$VICTIM" ] && kill -KILL "$VICTIM"
    wait_job "$KJOB" failed
    jhas '.error.code == "interrupted" and (.error.message | test("mpirun")) and
          (.error.message | test("rank [0-9]"))'
    verdict "a rank killed (kill -9): the job ends failed, interrupted, naming mpirun and the rank" \
        $? "$JOB_STATUS: $(jqb '.error | tostring' | head -c 300)"
    check_err "a rank killed: no version saved" 404 not_found - GET /v1/models/dist_killed
    procs_gone "$KJOB"
    verdict "a rank killed: no process of the job left" $? "$(job_procs "$KJOB" | tr '\n' ' ')"
    check "a rank killed: the daemon still answers" 200 GET /healthz
else
    fail "a long distributed job is accepted" "status $ST" body
fi

# ---- DELETE of the data set while a job reads it, then cancel
if long_job dist_cancelled; then
    CJOB=$LJOB
    wait_progress "$CJOB"
    verdict "a second long job runs with progress" $? "$(head -c 300 "$T/body")"
    check_err "DELETE of the data set while the distributed job runs: 409" 409 conflict name \
        DELETE /v1/datasets/mpibig
    jstr message | grep -q "$CJOB"
    verdict "the 409 names the job" $? "$(jstr message)"
    check "DELETE of the running distributed job" 202 DELETE "/v1/jobs/$CJOB"
    _t0=$(date +%s)
    _i=0
    while [ $_i -lt $((CANCEL_BOUND * 5)) ]; do
        req GET "/v1/jobs/$CJOB"
        [ "$(jqb .status)" = cancelled ] && break
        sleep 0.2
        _i=$((_i + 1))
    done
    [ "$(jqb .status)" = cancelled ]
    verdict "cancel: the job ends cancelled within ${CANCEL_BOUND} s" $? \
        "status $(jqb .status) after $(($(date +%s) - _t0)) s"
    check_err "cancel: no version saved" 404 not_found - GET /v1/models/dist_cancelled
    procs_gone "$CJOB"
    verdict "cancel: no process of the job left (pgrep)" $? "$(job_procs "$CJOB" | tr '\n' ' ')"
    # the ranks stopped themselves (gpserve-fit's status 3): no signal reached
    # mpirun while it ended (Open MPI 4.1 crashes then)
    launcher_ended "$CJOB"
    grep -q "job $CJOB: .* ended (exit status 3): cancelled" "$T/mpid.log"
    verdict "cancel: the launcher ended by itself with gpserve-fit's cancelled status (3)" $? \
        "$(grep "job $CJOB" "$T/mpid.log" | tail -n 1)"
else
    fail "a second long distributed job is accepted" "status $ST" body
fi

# ---- SIGTERM of the daemon while a distributed job runs
if long_job dist_stopped; then
    SJOB=$LJOB
    wait_progress "$SJOB"
    verdict "a third long job runs with progress" $? "$(head -c 300 "$T/body")"
    stop_daemon "$MPID_PID"
    [ "$STOP_RC" = 0 ]
    verdict "SIGTERM of the daemon while a distributed job runs: it exits 0" $? "exit $STOP_RC"
    procs_gone "$SJOB"
    verdict "SIGTERM: no process of the job left" $? "$(job_procs "$SJOB" | tr '\n' ' ')"
    if mpid_start; then
        # handed back (queued, no owner): the restarted daemon claims it and runs it again
        wait_progress "$SJOB"
        verdict "SIGTERM: the job was handed back; the restarted daemon runs it again" $? \
            "$(head -c 300 "$T/body")"
        check "the job run again: DELETE" 202 DELETE "/v1/jobs/$SJOB"
        wait_job "$SJOB" cancelled
        verdict "the job run again: cancelled" $? "$JOB_STATUS"
        procs_gone "$SJOB"
        verdict "the job run again: no process left" $? "$(job_procs "$SJOB" | tr '\n' ' ')"
    else
        fail "the daemon of its own restarts" "no listening line"
    fi
else
    fail "a third long distributed job is accepted" "status $ST" body
fi

# ---- per method: the daemon's job, gpserve-fit --request and the daemon's own fit
for m in $STREAMING; do
    OPTS=
    [ "$m" = svgp ] && OPTS='"options":{"optimizer":"adam","epochs":150,"learning_rate":0.05},'
    [ "$m" = sgpr ] && OPTS='"options":{"inducing":20,"optimize_inducing":false,"tolerance":1e-15},'
    DATA='"data":{"dataset":"mpids","target":"y"}'
    jpost /v1/models "{\"name\":\"dist_$m\",\"method\":\"$m\",\"seed\":3,$OPTS$DATA,\"distributed\":{\"ranks\":2}}"
    DJOB=$(jqb '.job // empty')
    [ "$ST" = 202 ] && [ -n "$DJOB" ] && [ "$(header Location)" = "/v1/jobs/$DJOB" ]
    verdict "$m, distributed over 2 ranks: 202 with the job" $? "status $ST"
    wait_job "$DJOB" succeeded
    verdict "$m, distributed: the job ends succeeded" $? "$JOB_STATUS: $(jqb '.error | tostring' | head -c 300)"
    cp "$T/body" "$T/djob_$m.json"
    launcher_ended "$DJOB" # logged after rank 0's save
    grep -q "job $DJOB: .* ended (exit status 0): saved" "$T/mpid.log"
    verdict "$m, distributed: the launcher ended by itself, status 0" $? \
        "$(grep "job $DJOB" "$T/mpid.log" | tail -n 1)"
    cp "$T/djob_$m.json" "$T/body"
    # svgp's report has no ranks yet (sgpr's and ssgp's have): 2 if it comes
    RANKS='.model.method_info.ranks == 2'
    [ "$m" = svgp ] && RANKS='(.model.method_info.ranks // 2) == 2'
    jhas ".progress.iteration >= 1 and (.progress.objective | type) == \"number\" and
          $RANKS and .model.dataset.name == \"mpids\" and
          .model.dataset.sha256 == \"$MPIDS_SHA\" and .model.n_train == 600"
    verdict "$m, distributed: the job's last progress; the version records 2 ranks and its data set" \
        $? "$(jqb '{progress, r: .model.method_info.ranks, d: .model.dataset} | tostring' | head -c 300)"
    check_json "$m, distributed: the version predicts" 200 "/v1/models/dist_$m/predict" "$PRED_X"
    jq -c '[.mean, .variance]' "$T/body" >"$T/dist_$m.bits"

    echo "{\"name\":\"req_$m\",\"method\":\"$m\",\"seed\":3,$OPTS$DATA}" >"$T/dreq_$m.json"
    $MPIRUN -np 2 "$FIT" --db "$MPID_DB" --request "$T/dreq_$m.json" >"$T/dreq_$m.out" 2>"$T/dreq_$m.err"
    verdict "$m: gpserve-fit --request of the same fit with -np 2 saves" $? \
        "$(head -c 300 "$T/dreq_$m.err")"
    check_json "$m: gpserve-fit's version predicts" 200 "/v1/models/req_$m/predict" "$PRED_X"
    jq -c '[.mean, .variance]' "$T/body" >"$T/req_$m.bits"
    [ -s "$T/dist_$m.bits" ] && cmp -s "$T/dist_$m.bits" "$T/req_$m.bits"
    verdict "$m: the daemon's distributed job predicts the bits of gpserve-fit --request -np 2" $? \
        "$(head -c 200 "$T/dist_$m.bits") vs $(head -c 200 "$T/req_$m.bits")"

    jpost /v1/models "{\"name\":\"local_$m\",\"method\":\"$m\",\"seed\":3,$OPTS$DATA,\"async\":true}"
    LOC=$(jqb '.job // empty')
    wait_job "$LOC" succeeded
    verdict "$m: the daemon's own fit over the data set (not distributed) succeeds" $? "$JOB_STATUS"
    check_json "$m: its version predicts" 200 "/v1/models/local_$m/predict" "$PRED_X"
    cp "$T/body" "$T/local_$m.pred"
    jpost "/v1/models/dist_$m/predict" "$PRED_X"
    close_means "$T/body" "$T/local_$m.pred" 1e-10
    verdict "$m: the distributed fit's predictions equal the daemon's own fit's to 1e-10" $? \
        "$(head -c 200 "$T/body") vs $(head -c 200 "$T/local_$m.pred")"
done

# ---- refusals
FIRST=$(echo "$STREAMING" | head -n 1)
DATA='"data":{"dataset":"mpids","target":"y"}'
check_jerr "distributed: ranks 0 refused" 400 invalid_argument '^distributed\.ranks$' /v1/models \
    "{\"name\":\"r\",\"method\":\"$FIRST\",$DATA,\"distributed\":{\"ranks\":0}}"
check_jerr "distributed: ranks above --mpi-max-ranks (5 > 4) refused" 400 invalid_argument \
    '^distributed\.ranks$' /v1/models \
    "{\"name\":\"r\",\"method\":\"$FIRST\",$DATA,\"distributed\":{\"ranks\":5}}"
check_jerr "distributed: ranks 1.5 refused" 400 invalid_argument '^distributed\.ranks$' /v1/models \
    "{\"name\":\"r\",\"method\":\"$FIRST\",$DATA,\"distributed\":{\"ranks\":1.5}}"
check_jerr "distributed with async false refused" 400 invalid_argument '^async$' /v1/models \
    "{\"name\":\"r\",\"method\":\"$FIRST\",$DATA,\"distributed\":{\"ranks\":2},\"async\":false}"
check_jerr "distributed without a data set (X and y) refused" 400 invalid_argument \
    '^data\.dataset$' /v1/models \
    "{\"name\":\"r\",\"method\":\"$FIRST\",\"X\":[[0,1],[1,0],[2,2]],\"y\":[1,2,3],\"distributed\":{\"ranks\":2}}"
check_jerr "distributed: an unknown key refused" 400 invalid_argument '^distributed\.hosts$' \
    /v1/models "{\"name\":\"r\",\"method\":\"$FIRST\",$DATA,\"distributed\":{\"ranks\":2,\"hosts\":2}}"
check_jerr "distributed exact (rows in memory) refused" 422 unsupported '^distributed$' /v1/models \
    "{\"name\":\"r\",\"method\":\"exact\",$DATA,\"distributed\":{\"ranks\":2}}"
check_err "a refused distributed fit stored nothing" 404 not_found - GET /v1/models/r

stop_daemon "$MPID_PID"
[ "$STOP_RC" = 0 ]
verdict "the daemon of its own stops (exit 0)" $? "exit $STOP_RC"
fi

# ---- root without the OMPI variables: the mpi area's daemon (t_mpi.sh), started without them
PORT=$MPI_MAIN_PORT
if [ "$(id -u)" != 0 ]; then
    note "not root: mpirun's refusal of root (the job naming OMPI_ALLOW_RUN_AS_ROOT) is not tested"
elif { tr '\0' '\n' <"/proc/$MPI_AREA_PID/environ"; } 2>/dev/null | grep -q '^OMPI_ALLOW_RUN_AS_ROOT='; then
    note "the mpi area's daemon has OMPI_ALLOW_RUN_AS_ROOT: mpirun's refusal of root is not tested"
else
    check "the mpi area's daemon: PUT a data set" 201 PUT /v1/datasets/mpiroot \
        -H 'Content-Type: text/csv' --data-binary @"$T/mpids.csv"
    jpost /v1/models "{\"name\":\"dist_root\",\"method\":\"$(echo "$STREAMING" | head -n 1)\",
        \"data\":{\"dataset\":\"mpiroot\",\"target\":\"y\"},\"distributed\":{\"ranks\":1}}"
    wait_job "$(jqb '.job // empty')" failed
    jhas '.error.code == "interrupted" and (.error.message | test("OMPI_ALLOW_RUN_AS_ROOT=1")) and
          (.error.message | test("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"))'
    verdict "root without OMPI_ALLOW_RUN_AS_ROOT: the job fails naming the variables to set" $? \
        "$JOB_STATUS: $(jqb '.error | tostring' | head -c 300)"
fi
