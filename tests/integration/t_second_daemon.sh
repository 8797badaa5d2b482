#!/bin/sh
# Integration area "second_daemon": a second daemon on the same database
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "a second daemon on the same db"
need_sine
check_json "predict sine (reference for other daemons)" 200 $P "{\"X\":$SINE_X,\"quantiles\":[0.1,0.9],\"full_covariance\":true}"
cp "$T/body" "$T/ref_pred.json"
check_json "sample sine (reference)" 200 $S "{\"X\":$SINE_X,\"n_samples\":3,\"seed\":99}"
cp "$T/body" "$T/ref_sample.json"
if start_daemon "$T/second.log" --db "$MAIN_DB"; then
    pass "second daemon on the same db starts"
    SECOND_PID=$DPID
    MPORT=$PORT
    PORT=$DPORT
    check_json "second daemon: predict sine" 200 $P "{\"X\":$SINE_X,\"quantiles\":[0.1,0.9],\"full_covariance\":true}"
    cmp -s "$T/body" "$T/ref_pred.json"
    verdict "second daemon: identical predict body" $? "bodies differ"
    check "second daemon: list models" 200 GET /v1/models
    jhas '[.models[].name] | index("sine")'
    verdict "second daemon sees the models" $? "sine missing"
    [ -n "$JOB" ] && check "second daemon: job of the first" 200 GET "/v1/jobs/$JOB"
    PORT=$MPORT
    # A model the first daemon fits now is served by the second.
    req DELETE /v1/models/fresh
    check_json "first daemon fits 'fresh'" 201 $M "{\"name\":\"fresh\",\"X\":$X2,\"y\":[1,2,3]}"
    PORT=$DPORT
    seen_within "second daemon serves 'fresh'" '.version == 1' \
        POST /v1/models/fresh/predict -H 'Content-Type: application/json' --data-binary '{"X":[[1.5]]}'
    # A fit, an observe and a delete on one daemon, served by the other
    # within the bound (docs/design/storage.md, "The change generation").
    replica_changes "$MPORT" "$DPORT" "second daemon"
    stop_daemon "$SECOND_PID"
    [ "$STOP_RC" = 0 ]
    verdict "second daemon exits 0 on SIGTERM" $? "exit $STOP_RC"
    PORT=$MPORT
else
    fail "second daemon on the same db starts"
fi
