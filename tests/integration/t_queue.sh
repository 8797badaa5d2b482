#!/bin/sh
# Integration area "queue": a full fit queue (429) and SIGTERM during a fit
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "queue full, SIGTERM during a fit"
if start_daemon "$T/busy.log" --db "$T/busy.db" --fit-workers 1 --queue-size 1; then
    pass "daemon with --fit-workers 1 --queue-size 1 starts"
    PORT=$DPORT
    jpost $M @"$T/long.json"
    BJOB=$(jstr job)
    if [ "$ST" = 202 ] && [ -n "$BJOB" ] && wait_job "$BJOB" running; then
        pass "busy daemon: long fit running"
        # A queued job reports the budget its method's descriptor names before
        # it runs: msrfr's is its "iterations" option (it was once 0).
        csv_to_json queued-ms '"method":"msrfr","async":true,"options":{"particles":2,"features":10,"iterations":37},' <"$T/ss.csv" >"$T/queued_ms.json"
        jpost $M @"$T/queued_ms.json"
        QJOB=$(jstr job)
        req GET "/v1/jobs/$QJOB"
        [ "$(jqb '.status')" = queued ] && [ "$(jqb '.progress.max_iterations')" = 37 ]
        verdict "queued msrfr job reports max_iterations 37 (its iterations option)" $? "status '$(jqb '.status')', max_iterations '$(jqb '.progress.max_iterations')'"
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
        # A graceful stop hands the interrupted job back: the restarted daemon
        # on the same database runs it again (it is durable), and it can still
        # be cancelled there.
        if start_daemon "$T/busy2.log" --db "$T/busy.db" --fit-workers 1; then
            PORT=$DPORT
            check "after the shutdown: GET the interrupted job" 200 GET "/v1/jobs/$BJOB"
            if wait_job "$BJOB" running; then
                pass "the interrupted job runs again after the restart (attempts $(jqb '.attempts'))"
            else
                fail "the interrupted job runs again after the restart" "status '$JOB_STATUS'" body
            fi
            check "DELETE the job on the restarted daemon -> 202" 202 DELETE "/v1/jobs/$BJOB"
            if wait_job "$BJOB" cancelled; then pass "the resumed job is cancelled"; else
                fail "the resumed job is cancelled" "status '$JOB_STATUS'" body
            fi
            check_err "the cancelled fit stored no model" 404 not_found - GET /v1/models/long
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

section "connections per client address"
# Two slow uploads from 127.0.0.2 hold that address's two slots: a third
# connection from it is refused (429 overloaded, at once), while another
# address is served.
if start_daemon "$T/perip.log" --db "$T/perip.db" --max-connections-per-ip 2; then
    PORT=$DPORT
    PERIP_PID=$DPID
    awk 'BEGIN { for (i = 0; i < 20000; i++) printf "x" }' >"$T/slow.body"
    slow=""
    for i in 1 2; do
        curl -s --interface 127.0.0.2 --max-time $((10 * SLOW)) --limit-rate 200 -o /dev/null \
            -H 'Content-Type: application/json' --data-binary @"$T/slow.body" \
            "http://127.0.0.1:$PORT/v1/models" 2>/dev/null &
        slow="$slow $!"
    done
    sleep 1
    st=$(curl -s --interface 127.0.0.2 --max-time 5 -o /dev/null -w '%{http_code}' \
        "http://127.0.0.1:$PORT/healthz" 2>/dev/null)
    [ "$st" = 429 ]
    verdict "a third connection from 127.0.0.2 is refused 429 (answered, then closed)" $? \
        "status $st"
    check "127.0.0.1 is served meanwhile" 200 GET /healthz
    st=$(curl -s --interface 127.0.0.3 --max-time 5 -o /dev/null -w '%{http_code}' \
        "http://127.0.0.1:$PORT/healthz" 2>/dev/null)
    [ "$st" = 200 ]
    verdict "127.0.0.3 is served meanwhile (the limit is per address)" $? "status $st"
    for p in $slow; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    stop_daemon "$PERIP_PID"
else
    fail "daemon with --max-connections-per-ip 2 starts"
fi
