#!/bin/sh
# Integration area "idempotency": writes sent with an Idempotency-Key
# (docs/design/api.md, "Idempotent writes"). A retried observe adds its rows
# once (the model's n and log, and its predictions, equal one observe's); a
# retried synchronous fit (JSON and CSV) answers the same version and makes
# no second one; a retried async fit answers the same job; every replay
# carries Idempotent-Replayed: true and the first answer's status, body and
# Location. The same key with a different body is refused (409 conflict
# naming the header), a malformed key is refused (400 naming the header), a
# key is scoped to its route and model name, and a refused request records
# nothing (its retry runs). Across a restart of a daemon on its own database
# the keys are still honoured.
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "idempotency"
M=/v1/models
IK='"kernel":{"type":"rbf","variance":1.0,"lengthscale":[0.8],"fixed":true},"noise":{"variance":0.01,"fixed":true},"standardize":false'
ID_FIT="{\"name\":\"idem-ex\",\"method\":\"exact\",$IK,\"X\":[0,0.5,1,1.5,2],\"y\":[0.1,0.5,0.8,1.0,0.9]}"
ID_OBS='{"X":[2.5,3],"y":[0.6,0.1]}'
KEY_RUN=$$-$(date +%s) # keys differ from one run to the next (PostgreSQL schemas too)

# same_answer NAME: the last answer equals $T/first.body and is marked a replay.
same_answer() {
    cmp -s "$T/body" "$T/first.body" && [ "$(header Idempotent-Replayed)" = true ]
    verdict "$1" $? "replayed '$(header Idempotent-Replayed)': $(head -c 200 "$T/body") vs $(head -c 200 "$T/first.body")"
}

# ---- observe: a retry adds its rows once
check_json "fit idem-ex with a key" 201 $M "$ID_FIT" -H "Idempotency-Key: fit-$KEY_RUN"
[ "$(header Idempotent-Replayed)" = "" ]
verdict "a first answer is not marked a replay" $? "$(header Idempotent-Replayed)"
check_json "observe 2 rows with a key" 200 "$M/idem-ex/observe" "$ID_OBS" -H "Idempotency-Key: obs-$KEY_RUN"
cp "$T/body" "$T/first.body"
check_json "observe retried with the same key" 200 "$M/idem-ex/observe" "$ID_OBS" \
    -H "Idempotency-Key: obs-$KEY_RUN"
same_answer "observe retried: the first answer again, marked Idempotent-Replayed"
check "observe retried: GET the model" 200 GET $M/idem-ex
jhas '.n_train == 7 and .online.observations == 1'
verdict "observe retried: the rows were added once (n 7, one log entry)" $? "$(jqb '{n_train, online} | tostring')"
# the reference: the same fit observed once, without a key
check_json "reference: fit idem-ref" 201 $M "$(echo "$ID_FIT" | sed 's/idem-ex/idem-ref/')"
check_json "reference: observe once" 200 "$M/idem-ref/observe" "$ID_OBS"
IQ='{"X":[0.25,1.75,2.8],"full_covariance":true}'
check_json "predict the model observed with retries" 200 "$M/idem-ex/predict" "$IQ"
jq -c 'del(.name)' "$T/body" >"$T/idem_a.json"
check_json "predict the reference" 200 "$M/idem-ref/predict" "$IQ"
jq -c 'del(.name)' "$T/body" >"$T/idem_b.json"
cmp -s "$T/idem_a.json" "$T/idem_b.json"
verdict "observe retried: predictions bit for bit those of one observe" $? \
    "$(head -c 200 "$T/idem_a.json"; echo; head -c 200 "$T/idem_b.json")"
# "new_version": a retry makes no second new version
check_json "observe new_version with a key" 200 "$M/idem-ex/observe" \
    '{"X":[4],"y":[-0.5],"new_version":true}' -H "Idempotency-Key: obs-nv-$KEY_RUN"
cp "$T/body" "$T/first.body"
check_json "observe new_version retried" 200 "$M/idem-ex/observe" \
    '{"X":[4],"y":[-0.5],"new_version":true}' -H "Idempotency-Key: obs-nv-$KEY_RUN"
same_answer "observe new_version retried: the first answer again"
check "new_version retried: GET the model" 200 GET $M/idem-ex
jhas '.versions == [1, 2]'
verdict "new_version retried: one new version (versions [1, 2])" $? "$(jqb '.versions | tostring')"

# ---- synchronous fits: the same version, no second one
check_json "fit idem-ex retried with its key" 201 $M "$ID_FIT" -H "Idempotency-Key: fit-$KEY_RUN"
jhas '.version == 1' && [ "$(header Idempotent-Replayed)" = true ] &&
    [ "$(header Location)" = "/v1/models/idem-ex/versions/1" ]
verdict "fit retried: version 1 again, Idempotent-Replayed, its Location" $? \
    "$(jqb '.version') $(header Idempotent-Replayed) $(header Location)"
check "fit retried: GET the model" 200 GET $M/idem-ex
jhas '.versions == [1, 2]'
verdict "fit retried: no version was added" $? "$(jqb '.versions | tostring')"
gen_xy 30 2 5 | awk 'BEGIN { print "a,b,y" } { print }' >"$T/idem.csv"
check "CSV fit with a key" 201 POST "$M?name=idem-csv&method=exact" -H 'Content-Type: text/csv' \
    --data-binary @"$T/idem.csv" -H "Idempotency-Key: csv-$KEY_RUN"
cp "$T/body" "$T/first.body"
check "CSV fit retried" 201 POST "$M?name=idem-csv&method=exact" -H 'Content-Type: text/csv' \
    --data-binary @"$T/idem.csv" -H "Idempotency-Key: csv-$KEY_RUN"
same_answer "CSV fit retried: the first answer again"
check "CSV fit retried: GET the model" 200 GET $M/idem-csv
jhas '.versions == [1]'
verdict "CSV fit retried: one version" $? "$(jqb '.versions | tostring')"
check "CSV fit with the key and another query" 409 POST "$M?name=idem-csv&method=exact&seed=3" \
    -H 'Content-Type: text/csv' --data-binary @"$T/idem.csv" -H "Idempotency-Key: csv-$KEY_RUN"

# ---- async fits: the same job
ID_ASYNC="{\"name\":\"idem-async\",\"method\":\"exact\",\"async\":true,$IK,\"X\":[0,1,2,3],\"y\":[0,1,0,1]}"
check_json "async fit with a key" 202 $M "$ID_ASYNC" -H "Idempotency-Key: async-$KEY_RUN"
JOB1=$(jstr job)
cp "$T/body" "$T/first.body"
check_json "async fit retried" 202 $M "$ID_ASYNC" -H "Idempotency-Key: async-$KEY_RUN"
[ -n "$JOB1" ] && [ "$(jstr job)" = "$JOB1" ] && [ "$(header Location)" = "/v1/jobs/$JOB1" ]
verdict "async fit retried: the same job id and Location" $? "'$JOB1' then '$(jstr job)' $(header Location)"
same_answer "async fit retried: the first answer again"
wait_job "$JOB1" succeeded
verdict "async fit: the job succeeds" $? "$JOB_STATUS"
check "async fit retried: GET the model" 200 GET $M/idem-async
jhas '.versions == [1]'
verdict "async fit retried: one version" $? "$(jqb '.versions | tostring')"

# ---- refused: another body under the key, a malformed key
check_jerr "fit: the key with another body" 409 conflict '^Idempotency-Key$' $M \
    "$(echo "$ID_FIT" | sed 's/0\.9\]/0.95]/')" -H "Idempotency-Key: fit-$KEY_RUN"
check_jerr "observe: the key with another body" 409 conflict '^Idempotency-Key$' \
    "$M/idem-ex/observe" '{"X":[2.5,3],"y":[0.6,0.2]}' -H "Idempotency-Key: obs-$KEY_RUN"
check_jerr "fit: an empty key" 400 invalid_argument '^Idempotency-Key$' $M "$ID_FIT" \
    -H 'Idempotency-Key;'
check_jerr "observe: a key of 256 characters" 400 invalid_argument '^Idempotency-Key$' \
    "$M/idem-ex/observe" "$ID_OBS" -H "Idempotency-Key: $(printf '%0256d' 7)"
check_jerr "observe: a key with a space" 400 invalid_argument '^Idempotency-Key$' \
    "$M/idem-ex/observe" "$ID_OBS" -H "Idempotency-Key: two words"
check "the refused observes added nothing" 200 GET $M/idem-ex/versions/1
jhas '.online.observations == 1'
verdict "the refused observes added nothing (one log entry)" $? "$(jqb '.online | tostring')"
# a quoted key (the draft's structured-field string) is the same key
check_json "observe retried with the key quoted" 200 "$M/idem-ex/observe" \
    '{"X":[4],"y":[-0.5],"new_version":true}' -H "Idempotency-Key: \"obs-nv-$KEY_RUN\""
[ "$(header Idempotent-Replayed)" = true ]
verdict "a quoted key is the same key" $? "$(header Idempotent-Replayed)"

# ---- scope: route and model name; a refused request records nothing
check_json "the fit's key on another model name" 201 $M "$(echo "$ID_FIT" | sed 's/idem-ex/idem-other/')" \
    -H "Idempotency-Key: fit-$KEY_RUN"
[ "$(header Idempotent-Replayed)" = "" ]
verdict "another model name: not a replay" $? "$(header Idempotent-Replayed)"
check_jerr "a refused observe with a key" 422 invalid_data '^y$' "$M/idem-ref/observe" \
    '{"X":[1,2],"y":[1]}' -H "Idempotency-Key: bad-$KEY_RUN"
check_json "its retry, corrected, with the same key" 200 "$M/idem-ref/observe" '{"X":[1,2],"y":[1,0]}' \
    -H "Idempotency-Key: bad-$KEY_RUN"
[ "$(header Idempotent-Replayed)" = "" ] && jhas '.observations == 2'
verdict "a refused request records nothing: its retry runs" $? "$(jqb 'tostring')"

# ---- across a restart of a daemon on its own database
IDB=$(db_for idempotency)
if start_daemon "$T/idem1.log" --db "$IDB"; then
    SAVED_PORT=$PORT
    PORT=$DPORT
    check_json "restart: fit with a key" 201 $M "$(echo "$ID_FIT" | sed 's/idem-ex/idem-rs/')" \
        -H "Idempotency-Key: rs-fit-$KEY_RUN"
    check_json "restart: observe with a key" 200 "$M/idem-rs/observe" "$ID_OBS" \
        -H "Idempotency-Key: rs-obs-$KEY_RUN"
    cp "$T/body" "$T/first.body"
    kill -KILL "$DPID" 2>/dev/null
    wait "$DPID" 2>/dev/null
    if start_daemon "$T/idem2.log" --db "$IDB"; then
        PORT=$DPORT
        check_json "restart: observe retried after kill -9 and a restart" 200 "$M/idem-rs/observe" \
            "$ID_OBS" -H "Idempotency-Key: rs-obs-$KEY_RUN"
        same_answer "restart: the observe's first answer again"
        check_json "restart: fit retried" 201 $M "$(echo "$ID_FIT" | sed 's/idem-ex/idem-rs/')" \
            -H "Idempotency-Key: rs-fit-$KEY_RUN"
        jhas '.version == 1' && [ "$(header Idempotent-Replayed)" = true ]
        verdict "restart: the fit's version 1 again" $? "$(jqb '.version') $(header Idempotent-Replayed)"
        check "restart: GET the model" 200 GET $M/idem-rs
        jhas '.versions == [1] and .n_train == 7 and .online.observations == 1'
        verdict "restart: one version, the rows once" $? "$(jqb '{versions, n_train, online} | tostring')"
        stop_daemon "$DPID"
    else
        fail "restart: the daemon starts again" "see $T/idem2.log"
    fi
    PORT=$SAVED_PORT
else
    fail "restart: a daemon on its own database starts" "see $T/idem1.log"
fi
