#!/bin/sh
# Integration area "restart": SIGTERM and restart: every remembered body bit-identical; delete
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "restart"
# The references: sine's predict and sample here, and whatever other areas
# remembered (every method's model, concrete); all must come back bit-identical.
need_sine
need_finished_job
remember sine-predict $P "{\"X\":$SINE_X,\"quantiles\":[0.1,0.9],\"full_covariance\":true}"
remember sine-sample $S "{\"X\":$SINE_X,\"n_samples\":3,\"seed\":99}"
req GET /v1/models/sine
sine_versions=$(jqb '.versions | tostring')
stop_daemon "$MAIN_PID"
if [ "$STOP_RC" = 0 ]; then pass "SIGTERM: main daemon exits 0 (${STOP_SECS}s)"; else
    fail "SIGTERM: main daemon exits 0" "exit $STOP_RC"
    tail -n 5 "$T/main.log" | sed 's/^/     | /'
fi
if start_daemon "$T/main2.log" --db "$MAIN_DB" --max-body-mb 1; then
    pass "restart on the same db"
    PORT=$DPORT
    for r in "$T"/refs/*.req; do
        [ -f "$r" ] || continue
        name=$(basename "$r" .req)
        path=$(sed -n 1p "$r")
        body=$(sed -n 2p "$r")
        check_json "after restart: $name" 200 "$path" "$body"
        cmp -s "$T/body" "$T/refs/$name.body"
        verdict "after restart: $name body bit-identical" $? "bodies differ"
    done
    check "after restart: versions kept" 200 GET /v1/models/sine
    [ "$(jqb '.versions | tostring')" = "$sine_versions" ]
    verdict "after restart: sine has versions $sine_versions" $? "versions $(jqb '.versions | tostring')"
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
