#!/bin/sh
# Integration area "crash": nothing acknowledged is lost. Two daemons serve one
# database (--job-lease 2); in each round async fits (exact, ssgp, msrfr on
# concrete, or an 8-column synthetic stand-in) are submitted to both while
# synchronous fits add versions and deletes run, then one daemon is killed
# with SIGKILL at a random moment and restarted on the same file. Afterwards:
# PRAGMA integrity_check, every acknowledged (202) job reaches succeeded (or
# failed with a reason after its attempts), each succeeded job's model has
# exactly one version (no run was saved twice), every listed version predicts,
# and no ended job keeps its stored request.
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

CR_ROUNDS=${GPSERVE_CRASH_ROUNDS:-6}
CR_MAIN_PORT=$PORT # the main daemon's, restored at the end
CR_LEASE=2

section "crash: SIGKILL during fits, saves and deletes ($CR_ROUNDS rounds, two daemons, one database)"
if ! command -v sqlite3 >/dev/null 2>&1; then
    fail "sqlite3 (the command-line shell) is installed" "run make deps"
    return 0 2>/dev/null || exit 0
fi
# The training rows: the first 300 of concrete (fits of about a second), else
# a synthetic stand-in of the same shape.
if [ -n "$CONCRETE" ]; then
    sed -n '2,301p' "$CONCRETE" >"$T/cr.csv"
else
    gen_xy 300 8 41 >"$T/cr.csv"
fi
CRX='[[540,0,0,162,2.5,1040,676,28]]'
CRDB=$T/crash.db
CRJOBS=$T/crash.jobs
: >"$CRJOBS"

# cr_start SLOT: start daemon SLOT (a or b) on the crash database; sets
# CR_PORT_<slot> and CR_PID_<slot>.
cr_start() {
    if start_daemon "$T/crash-$1.log.$(date +%s%N)" --db "$CRDB" --job-lease $CR_LEASE \
        --fit-workers 1 --queue-size 64; then
        eval "CR_PORT_$1=$DPORT CR_PID_$1=$DPID"
        return 0
    fi
    return 1
}

# cr_fit_body NAME METHOD ASYNC: a fit body for the crash rows.
# The fits must last long enough for a kill to land inside one (msrfr at 5000
# iterations: about 0.7 s here; at 1000, 0.14 s, most rounds' fits were done
# before the kill and the take-over check failed one run in two).
cr_fit_body() {
    case $2 in
    ssgp) opts='"options":{"features":30},' ;;
    msrfr) opts='"options":{"particles":2,"features":10,"iterations":5000},' ;;
    *) opts='' ;;
    esac
    csv_to_json "$1" "\"method\":\"$2\",\"seed\":1,$opts\"async\":$3," <"$T/cr.csv"
}

# cr_wait_running PORT TRIES PAUSE: until the daemon on PORT runs a fit
# (gpserve_jobs_running > 0), at most TRIES looks PAUSE seconds apart.
cr_wait_running() {
    _w=0
    while [ $_w -lt "$2" ]; do
        _running=$(curl -s --max-time 2 "http://127.0.0.1:$1/metrics" |
            sed -n 's/^gpserve_jobs_running \([0-9]*\).*/\1/p')
        [ "${_running:-0}" -gt 0 ] && return 0
        sleep "$3"
        _w=$((_w + 1))
    done
    return 1
}

cr_rand() { # cr_rand N: an integer in 0..N-1
    awk -v n="$1" -v s="$(date +%N)" 'BEGIN { srand(s); print int(rand() * n) }'
}

if cr_start a && cr_start b; then
    pass "two daemons on one database (--job-lease $CR_LEASE)"
    methods="exact ssgp msrfr"
    r=0
    while [ $r -lt "$CR_ROUNDS" ]; do
        j=0
        for m in $methods; do
            for slot in a b; do
                eval "PORT=\$CR_PORT_$slot"
                name="cr-$r-$j"
                cr_fit_body "$name" "$m" true >"$T/cr.body"
                jpost $M @"$T/cr.body"
                if [ "$ST" = 202 ]; then
                    echo "$(jstr job) $name" >>"$CRJOBS"
                else
                    fail "async fit $name -> 202" "status $ST" body
                fi
                j=$((j + 1))
            done
        done
        # Synchronous fits adding versions and a delete, in flight at the kill.
        eval "PORT=\$CR_PORT_a"
        cr_fit_body cr-sync exact false >"$T/cr.sync"
        for slot in a b; do
            eval "sp=\$CR_PORT_$slot"
            curl -s --max-time "$MT" -o /dev/null -H 'Content-Type: application/json' \
                --data-binary @"$T/cr.sync" "http://127.0.0.1:$sp$M" &
        done
        curl -s --max-time "$MT" -o /dev/null -X DELETE "http://127.0.0.1:$CR_PORT_b$M/cr-sync" &
        # The victim is killed during a fit: once it runs one (bounded wait),
        # after a random pause in which that fit, a save or a delete goes on.
        if [ "$(cr_rand 2)" = 0 ]; then victim=a; else victim=b; fi
        eval "vpid=\$CR_PID_$victim vport=\$CR_PORT_$victim"
        cr_wait_running "$vport" 50 0.1
        sleep "$(awk -v ms="$(cr_rand 600)" 'BEGIN { printf "%.3f", ms / 1000 }')"
        # Still inside a fit at the kill where one is left to run (after the
        # pause its queue may have moved on to the next fit, or ended).
        cr_wait_running "$vport" 20 0.05
        kill -KILL "$vpid" 2>/dev/null
        wait "$vpid" 2>/dev/null
        if ! cr_start "$victim"; then
            fail "round $r: daemon $victim restarts on the database after SIGKILL"
            break
        fi
        r=$((r + 1))
    done
    wait_bg=0
    while [ -n "$(jobs -p)" ] && [ $wait_bg -lt $((MT * 10)) ]; do
        sleep 0.1
        wait_bg=$((wait_bg + 1))
    done
    pass "$r rounds of SIGKILL and restart ($(count_lines <"$CRJOBS") async fits acknowledged)"

    # Every acknowledged job ends; ask either daemon (they share the store).
    PORT=$CR_PORT_a
    lost=0
    ok=0
    gave_up=0
    bad=""
    while read -r id name; do
        if wait_job "$id" succeeded failed; then :; fi
        case $JOB_STATUS in
        succeeded)
            ok=$((ok + 1))
            req GET "$M/$name"
            nv=$(jqb '.versions | length')
            [ "$ST" = 200 ] && [ "$nv" = 1 ] || bad="$bad $name:versions=$nv"
            ;;
        failed)
            code=$(jqb '.error.code')
            msg=$(jqb '.error.message')
            if [ -n "$msg" ] && [ "$code" = interrupted ]; then gave_up=$((gave_up + 1)); else
                bad="$bad $name:failed:$code"
            fi
            ;;
        *) lost=$((lost + 1)) bad="$bad $name:$JOB_STATUS" ;;
        esac
    done <"$CRJOBS"
    [ $lost -eq 0 ]
    verdict "every acknowledged job ended ($ok succeeded, $gave_up failed as interrupted after their attempts)" $? "lost:$bad"
    [ -z "$bad" ]
    verdict "each succeeded job's model has exactly one version; failures name their reason" $? "$bad"

    ic=$(sqlite3 "$CRDB" 'PRAGMA integrity_check' 2>&1)
    [ "$ic" = ok ]
    verdict "PRAGMA integrity_check is ok" $? "$ic"
    left=$(sqlite3 "$CRDB" "SELECT count(*) FROM job_arrays WHERE job_id IN (SELECT id FROM jobs WHERE status IN ('succeeded', 'failed', 'cancelled'))" 2>&1)
    [ "$left" = 0 ]
    verdict "ended jobs keep no stored request" $? "$left rows"

    # Every listed version predicts.
    req GET $M
    nbad=0
    nver=0
    for name in $(jqb '.models[].name'); do
        req GET "$M/$name"
        for v in $(jqb '.versions[]'); do
            nver=$((nver + 1))
            jpost "$M/$name/predict" "{\"X\":$CRX,\"version\":$v}"
            [ "$ST" = 200 ] || {
                nbad=$((nbad + 1))
                note "$name version $v: predict answered $ST"
            }
        done
    done
    [ $nbad -eq 0 ] && [ $nver -gt 0 ]
    verdict "every listed version predicts ($nver versions)" $? "$nbad failed"
    # The kills hit running fits: some jobs ran again on a daemon that took
    # them over (else this area would test nothing).
    taken=$(cat "$T"/crash-*.log.* | grep -c 'taken over from a stopped gpserve')
    [ "$taken" -gt 0 ]
    verdict "jobs of killed daemons were taken over and run again ($taken take-overs)" $? "none"
    stop_daemon "$CR_PID_a"
    stop_daemon "$CR_PID_b"
else
    fail "two daemons on one database start"
fi

section "crash: the attempts limit, and a DELETE sent to another daemon"
# --job-attempts 1: a job whose daemon dies during its run is not run again;
# the restarted daemon (same host, the old pid gone) ends it at once, failed
# with the code 'interrupted' and a message.
if start_daemon "$T/att1.log" --db "$T/att.db" --job-attempts 1 --job-lease $CR_LEASE; then
    PORT=$DPORT
    jpost $M @"$T/long.json"
    AJOB=$(jstr job)
    if [ "$ST" = 202 ] && wait_job "$AJOB" running; then
        kill -KILL "$DPID"
        wait "$DPID" 2>/dev/null
        if start_daemon "$T/att2.log" --db "$T/att.db" --job-attempts 1 --job-lease $CR_LEASE; then
            PORT=$DPORT
            wait_job "$AJOB" failed
            [ "$JOB_STATUS" = failed ] && [ "$(jqb '.error.code')" = interrupted ] &&
                [ -n "$(jqb '.error.message')" ]
            verdict "after SIGKILL with --job-attempts 1: failed 'interrupted' with a message" $? \
                "status '$JOB_STATUS', code '$(jqb '.error.code')'"
            # Two daemons: a job running on one is cancelled by a DELETE sent to the other.
            ATT_A=$DPID
            ATT_PA=$DPORT
            if start_daemon "$T/att3.log" --db "$T/att.db" --job-lease $CR_LEASE; then
                ATT_B=$DPID
                PORT=$ATT_PA
                jpost $M @"$T/long.json"
                XJOB=$(jstr job)
                if [ "$ST" = 202 ] && wait_job "$XJOB" running; then
                    PORT=$DPORT
                    check "DELETE on the other daemon -> 202 (a request to the holder)" 202 \
                        DELETE "/v1/jobs/$XJOB"
                    wait_job "$XJOB" cancelled
                    [ "$JOB_STATUS" = cancelled ]
                    verdict "the holder cancels it at its next lease renewal" $? "status '$JOB_STATUS'"
                    check_err "the cancelled job stored no model" 404 not_found - GET /v1/models/long
                else
                    fail "a long job runs on the first daemon" "status $ST, job '$JOB_STATUS'"
                fi
                stop_daemon "$ATT_B"
            fi
            stop_daemon "$ATT_A"
        fi
    else
        fail "a long job runs" "status $ST, job '$JOB_STATUS'" body
        stop_daemon "$DPID"
    fi
fi
PORT=$CR_MAIN_PORT
