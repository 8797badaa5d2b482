#!/bin/sh
# Integration area "cancel": a long fit: predictions meanwhile, progress, cancellation
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "long fit, concurrent predicts, cancel"
sine_reference
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
    still=$(jqb '.status')
    if [ "$n_ok" = 8 ] && [ "$still" = running ]; then
        pass "8 predictions answered while the long fit runs"
    else
        fail "8 predictions answered while the long fit runs" "$n_ok of 8 ok; job running after them: $still" body
    fi
    jhas '.progress.iteration | type == "number"' 
    verdict "running job reports progress.iteration" $? "no iteration in progress"
    req DELETE "/v1/jobs/$LJOB"
    case $ST in 200 | 202 | 204) pass "DELETE running job -> $ST" ;; *) fail "DELETE running job" "status $ST" body ;; esac
    if wait_job "$LJOB" cancelled; then pass "cancelled job reports cancelled"; else fail "cancelled job reports cancelled" "status '$JOB_STATUS'" body; fi
    check_err "cancel it again -> 409" 409 conflict - DELETE "/v1/jobs/$LJOB"
    check_err "a cancelled fit stores nothing" 404 not_found - GET /v1/models/long
else
    fail "long job is running" "status '$JOB_STATUS'" body
fi

section "a synchronous fit whose client gives up"
# A synchronous fit whose client gives up is cancelled and frees the worker
# (the main daemon has one): the long fit without "async", a client that
# waits 2 s, then a small synchronous fit is answered (within --max-time).
sed 's/"async":true,//' "$T/long.json" >"$T/long_sync.json"
st=$(curl -s --max-time 2 -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary @"$T/long_sync.json" "http://127.0.0.1:$PORT/v1/models" 2>/dev/null)
[ "${st:-000}" = 000 ]
verdict "a synchronous long fit: the client gives up after 2 s" $? "status $st"
section "after the client gave up"
check_json "the worker is free again: a small synchronous fit is answered" 201 $M \
    "{\"name\":\"after-gone\",\"X\":$X2,\"y\":[1,2,3]}"
check_err "the abandoned fit stored nothing" 404 not_found - GET /v1/models/long
