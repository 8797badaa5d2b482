#!/bin/sh
# Integration area "access_log": --access-log FILE writes one JSON line per
# request (time, request_id, client, key, method, route, model, version,
# status, bytes, duration_us); X-Request-Id is echoed when sane, made when
# absent, replaced when oversized, and is the request_id of an error body.
# Sourced by tests/integration/run.sh (lib.sh loaded).

section "access log"
AL=$T/access.jsonl
if start_daemon "$T/al.log" --db "$T/al.db" --access-log "$AL"; then
    pass "access_log: a daemon with --access-log starts"
    AL_PID=$DPID
    MPORT=$PORT
    PORT=$DPORT
    check "access_log: healthz with an X-Request-Id" 200 GET /healthz -H 'X-Request-Id: trace-abc.123'
    [ "$(header X-Request-Id)" = trace-abc.123 ]
    verdict "access_log: a sane X-Request-Id is echoed" $? "got '$(header X-Request-Id)'"
    check "access_log: healthz without one" 200 GET /healthz
    MADE=$(header X-Request-Id)
    printf '%s\n' "$MADE" | grep -Eq '^[0-9a-f]{16}$'
    verdict "access_log: a made id is 16 hex digits" $? "got '$MADE'"
    LONG=$(printf '%0200d' 7)
    check "access_log: an oversized X-Request-Id" 200 GET /healthz -H "X-Request-Id: $LONG"
    printf '%s\n' "$(header X-Request-Id)" | grep -Eq '^[0-9a-f]{16}$'
    verdict "access_log: an oversized X-Request-Id is replaced" $? "got '$(header X-Request-Id | head -c 40)'"
    check_jerr "access_log: a bad fit" 400 invalid_argument - /v1/models '{"name":"bad name!","X":[[1]],"y":[1]}' \
        -H 'X-Request-Id: err-42'
    [ "$(jqb '.error.request_id')" = err-42 ]
    verdict "access_log: the error body carries request_id" $? "$(head -c 200 "$T/body")"
    check_err "access_log: an unknown model" 404 not_found - GET /v1/models/nosuch
    [ "$(jqb '.error.request_id')" = "$(header X-Request-Id)" ]
    verdict "access_log: a made id is the error body's request_id" $? "$(head -c 200 "$T/body")"
    jpost /v1/models "{\"name\":\"al\",\"X\":$X2,\"y\":[1,2,3]}"
    check_json "access_log: predict" 200 /v1/models/al/predict '{"X":[[0.5]]}' -H 'X-Request-Id: pr-1'
    PBYTES=$(wc -c <"$T/body")
    check "access_log: GET a version" 200 GET /v1/models/al/versions/1
    jpost /v1/models "{\"name\":\"al\",\"X\":$X2,\"y\":[1,2,4]}"
    check_json "access_log: predict naming version 1 in its body" 200 /v1/models/al/predict \
        '{"X":[[0.5]],"version":1}' -H 'X-Request-Id: pr-v1'
    check_json "access_log: sample of the latest" 200 /v1/models/al/sample '{"X":[[0.5]],"n_samples":2}' \
        -H 'X-Request-Id: sa-latest'
    check_json "access_log: OIP infer of the latest" 200 /v2/models/al/infer \
        '{"inputs":[{"name":"X","shape":[1,1],"datatype":"FP64","data":[0.5]}]}' -H 'X-Request-Id: oip-latest'
    check "access_log: alias champion -> 1" 200 PUT /v1/models/al/aliases/champion \
        -H 'Content-Type: application/json' -d '{"version":1}'
    check_json "access_log: predict through an alias in the body" 200 /v1/models/al/predict \
        '{"X":[[0.5]],"version":"champion"}' -H 'X-Request-Id: pr-alias'
    check "access_log: GET a version through an alias" 200 GET /v1/models/al/versions/champion \
        -H 'X-Request-Id: get-alias'
    stop_daemon "$AL_PID"
    PORT=$MPORT
    [ "$STOP_RC" = 0 ]
    verdict "access_log: the daemon stops (the log is flushed)" $? "exit $STOP_RC"
    n=$(count_lines <"$AL")
    [ "$n" -ge 8 ] && jq -e . "$AL" >/dev/null 2>&1
    verdict "access_log: one JSON line per request ($n)" $? "$(head -c 300 "$AL")"
    jq -se 'all(.[]; (.time | test("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z$"))
        and (.request_id | type == "string") and .client == "127.0.0.1" and .key == null
        and (.method | type == "string") and (.route | type == "string") and (.status | type == "number")
        and (.bytes | type == "number") and (.duration_us | type == "number"))' "$AL" >/dev/null
    verdict "access_log: every line has the fields" $? "$(head -c 300 "$AL")"
    jq -se --argjson b "$PBYTES" 'any(.[]; .request_id == "pr-1" and .route == "PREDICT" and .method == "POST"
        and .model == "al" and .status == 200 and .bytes == $b)' "$AL" >/dev/null
    verdict "access_log: the predict's line (route, model, status, bytes)" $? "$(grep pr-1 "$AL")"
    jq -se 'any(.[]; .route == "MODEL_VERSION" and .model == "al" and .version == 1 and .status == 200)' "$AL" >/dev/null
    verdict "access_log: a version's line" $? "$(grep MODEL_VERSION "$AL")"
    jq -se 'any(.[]; .request_id == "pr-1" and .version == 1) and any(.[]; .request_id == "pr-v1" and .version == 1)
        and any(.[]; .request_id == "sa-latest" and .version == 2) and any(.[]; .request_id == "oip-latest" and .version == 2)
        and any(.[]; .request_id == "pr-alias" and .version == 1) and any(.[]; .request_id == "get-alias" and .version == 1)' \
        "$AL" >/dev/null
    verdict "access_log: the version that answered (the body's, an alias's, or the latest's number)" $? \
        "$(grep -E 'pr-1|pr-v1|sa-latest|oip-latest|-alias' "$AL")"
    jq -se 'any(.[]; .request_id == "err-42" and .status == 400 and .route == "MODELS")' "$AL" >/dev/null
    verdict "access_log: the error's line" $? "$(grep err-42 "$AL")"
    grep -q "req=err-42" "$T/al.log"
    verdict "access_log: the daemon's log line carries the request id" $? "$(tail -n 3 "$T/al.log")"
else
    fail "access_log: a daemon with --access-log starts" "see above"
fi
"$BIN" --access-log "$T/no-such-dir/a.log" --port 0 --db "$T/al2.db" >"$T/al_out" 2>&1
rc=$?
[ $rc != 0 ] && grep -q "cannot open the access log" "$T/al_out"
verdict "access_log: an access log that cannot be opened stops the start" $? "exit $rc: $(cat "$T/al_out")"
