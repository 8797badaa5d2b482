#!/bin/sh
# Integration area "finite": nothing non-finite enters a model or leaves the
# daemon (docs/design/numerics.md, "Finite in, finite out").
# - observe: values that overflow once standardised, or lie beyond 1e100
#   standard deviations, are refused with 422 naming the cell, for exact,
#   ssgp and rfgp (in warm-up and online); the model is bit-identical after
#   (same predict bytes, same observation count) and the log got nothing
#   (the same after a restart);
# - predict, sample and a /v2 infer at points that overflow once standardised:
#   422 naming the cell, never 200 with null;
# - fits: a column whose spread float64 cannot hold is refused naming a cell;
# - a version stored non-finite by a daemon before these checks (its
#   observation log poisoned with sqlite3, as such a daemon wrote it) is
#   reported, not served: 409 model_not_finite on predict, sample, infer and
#   observe; "status": "not_finite" in its GET; listed by /readyz and
#   /metrics; deleting it clears the report.
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "finite"
M=/v1/models

# predict_bytes NAME FILE: the body of a fixed predict of NAME into FILE
predict_bytes() {
    jpost "$M/$1/predict" '{"X":[0.5,1.5,2.5],"full_covariance":true}'
    cp "$T/body" "$2"
}

# unchanged NAME LABEL BEFORE_FILE OBSERVATIONS: predict equals BEFORE byte for
# byte and GET reports OBSERVATIONS log entries
unchanged() {
    predict_bytes "$1" "$T/fin_after"
    cmp -s "$3" "$T/fin_after"
    verdict "$2: the model answers byte for byte as before" $? \
        "$(head -c 200 "$3") / $(head -c 200 "$T/fin_after")"
    req GET "$M/$1"
    jhas ".online.observations == $4"
    verdict "$2: the log holds $4 entries still" $? "$(jqb '.online | tostring')"
}

# ---- exact: the issue's example
check_json "exact: fit ex" 201 $M '{"name":"fin-ex","method":"exact","X":[0,1,2,3],"y":[0,1,0,1]}'
predict_bytes fin-ex "$T/fin_ex0"
check_jerr "exact: observe y = +-1e308 (overflows once standardised) is 422 naming y[0]" \
    422 invalid_data '^y\[0\]$' "$M/fin-ex/observe" '{"X":[50,60],"y":[1e308,-1e308]}'
check_jerr "exact: observe y = 1e200 (2e200 standard deviations out) is 422 naming y[1]" \
    422 invalid_data '^y\[1\]$' "$M/fin-ex/observe" '{"X":[50,60],"y":[1,1e200]}'
check_jerr "exact: observe X = 1e300 is 422 naming X[1][0]" \
    422 invalid_data '^X\[1\]\[0\]$' "$M/fin-ex/observe" '{"X":[5,1e300],"y":[1,1]}'
unchanged fin-ex "exact: after the refused observes" "$T/fin_ex0" 0
check_json "exact: a sound observe still works" 200 "$M/fin-ex/observe" '{"X":[4],"y":[0.5]}'
predict_bytes fin-ex "$T/fin_ex1"
check_jerr "exact: predict at X = [1e308, -1e308] is 422 naming the row X[0]" \
    422 invalid_data '^X\[0\]' "$M/fin-ex/predict" '{"X":[1e308,-1e308]}'
check_jerr "exact: predict at X = [1, -1e308] is 422 naming the row X[1]" \
    422 invalid_data '^X\[1\]' "$M/fin-ex/predict" '{"X":[1,-1e308]}'
check_jerr "exact: sample at X = [0.5, 1e308] is 422 naming the row X[1]" \
    422 invalid_data '^X\[1\]' "$M/fin-ex/sample" '{"X":[0.5,1e308],"n_samples":2}'
req POST /v2/models/fin-ex/infer -H 'Content-Type: application/json' --data-binary \
    '{"inputs":[{"name":"X","shape":[2,1],"datatype":"FP64","data":[0.5,1e308]}]}'
[ "$ST" = 422 ] && jhas '.error | type == "string" and test("X\\[1\\]")'
verdict "exact: a /v2 infer at 1e308 is 422 naming X[1] in the protocol's shape" $? \
    "status $ST $(head -c 300 "$T/body")"
check_json "exact: predict far out but representable (1e150) is 200" 200 "$M/fin-ex/predict" \
    '{"X":[1e150]}'
jhas '[.mean[], .variance[]] | all(type == "number")'
verdict "exact: every number of that answer is a number (no null)" $? "$(head -c 200 "$T/body")"

# ---- fits refuse what they cannot hold finite
check_jerr "fit: y = +-1e308 (a spread float64 cannot hold) is 422 naming y[1]" \
    422 invalid_data '^y\[1\]$' $M '{"name":"fin-bad","method":"exact","X":[0,1,2,3],"y":[0,1e308,-1e308,1]}'
check_jerr "fit: y = +-1e200 (a deviation beyond 1e100) is 422 naming y[1]" \
    422 invalid_data '^y\[1\]$' $M '{"name":"fin-bad","method":"exact","X":[0,1,2,3],"y":[0,1e200,-1e200,1]}'
check "fit: nothing was stored for the refused fits" 404 GET $M/fin-bad

# ---- ssgp
check_json "ssgp: fit" 201 $M \
    '{"name":"fin-ss","method":"ssgp","seed":2,"options":{"features":20},"X":[0,0.5,1,1.5,2,2.5,3],"y":[0,0.5,0.8,1,0.9,0.6,0.1]}'
predict_bytes fin-ss "$T/fin_ss0"
check_jerr "ssgp: observe y = 1e308 is 422 naming y[0]" 422 invalid_data '^y\[0\]$' \
    "$M/fin-ss/observe" '{"X":[50],"y":[1e308]}'
check_jerr "ssgp: observe a batch of 40 with X = 1e300 in row 39 is 422 naming X[39][0]" \
    422 invalid_data '^X\[39\]\[0\]$' "$M/fin-ss/observe" \
    "{\"X\":[$(seq -s, 1 39),1e300],\"y\":[$(seq -s, 1 40)]}"
unchanged fin-ss "ssgp: after the refused observes" "$T/fin_ss0" 0

# ---- rfgp: in warm-up (rows buffered raw) and online
RF='"method":"rfgp","seed":3,"options":{"input":{"kind":"point","dim":1},"features":32,"warmup":4}'
check_json "rfgp: create empty" 201 $M "{\"name\":\"fin-rf\",$RF}"
check_json "rfgp: observe 3 rows (warming up)" 200 "$M/fin-rf/observe" '{"X":[0,0.5,1],"y":[0,0.5,0.8]}'
check_jerr "rfgp: the row that ends the warm-up with y = 1e308 is 422 naming y[0]" \
    422 invalid_data '^y\[0\]$' "$M/fin-rf/observe" '{"X":[1.5],"y":[1e308]}'
req GET "$M/fin-rf"
jhas '.online.state == "warmup" and .online.n == 3 and .online.observations == 1'
verdict "rfgp: still warming up with 3 rows and 1 log entry" $? "$(jqb '.online | tostring')"
check_json "rfgp: observe 2 sound rows (online)" 200 "$M/fin-rf/observe" '{"X":[1.5,2],"y":[1,0.9]}'
predict_bytes fin-rf "$T/fin_rf0"
check_jerr "rfgp: online, observe y = [1, -1e308] is 422 naming y[1]" 422 invalid_data '^y\[1\]$' \
    "$M/fin-rf/observe" '{"X":[2.5,3],"y":[1,-1e308]}'
check_jerr "rfgp: online, observe y = 1e200 is 422 naming y[0]" 422 invalid_data '^y\[0\]$' \
    "$M/fin-rf/observe" '{"X":[2.5],"y":[1e200]}'
unchanged fin-rf "rfgp: after the refused observes" "$T/fin_rf0" 2

# ---- the same after a restart, and a version poisoned before these checks
if [ -n "$DB_URL" ]; then
    note "finite: the poisoned-store part writes the SQLite file with sqlite3; skipped on PostgreSQL"
else
    FDB=$T/finite.db
    MPORT=$PORT
    if start_daemon "$T/finite.log" --db "$FDB"; then
        PORT=$DPORT
        check_json "restart: fit a model on a daemon of its own" 201 $M \
            '{"name":"fin-rs","method":"exact","X":[0,1,2,3],"y":[0,1,0,1]}'
        check_json "restart: fit the model to poison" 201 $M \
            '{"name":"fin-po","method":"exact","X":[0,1,2,3],"y":[0,1,0,1]}'
        check_jerr "restart: observe y = +-1e308 refused" 422 invalid_data '^y\[0\]$' \
            "$M/fin-rs/observe" '{"X":[50,60],"y":[1e308,-1e308]}'
        predict_bytes fin-rs "$T/fin_rs0"
        stop_daemon "$DPID"
        n_log=$(sqlite3 "$FDB" "SELECT count(*) FROM observations")
        [ "$n_log" = 0 ]
        verdict "restart: the observation log got nothing" $? "$n_log rows"
        # what a daemon before the guards logged for the issue's observe
        # (X [50, 60], y [1e308, -1e308]: little-endian float64, column-major)
        hx=$(python3 -c 'import struct; print(struct.pack("<2d", 50, 60).hex(), struct.pack("<2d", 1e308, -1e308).hex())')
        sqlite3 "$FDB" "INSERT INTO observations(model_id, seq, key, part, rows, cols, data)
            SELECT id, 1, 'X', 0, 2, 1, X'${hx% *}' FROM models WHERE name = 'fin-po';
            INSERT INTO observations(model_id, seq, key, part, rows, cols, data)
            SELECT id, 1, 'y', 0, 2, 1, X'${hx#* }' FROM models WHERE name = 'fin-po';
            UPDATE models SET obs_seq = 1, n_train = 6 WHERE name = 'fin-po';"
        verdict "restart: the log of fin-po poisoned as a daemon before the guards wrote it" $?
        if start_daemon "$T/finite2.log" --db "$FDB"; then
            PORT=$DPORT
            predict_bytes fin-rs "$T/fin_rs1"
            cmp -s "$T/fin_rs0" "$T/fin_rs1"
            verdict "restart: the refused observe left the model bit-identical across the restart" $? \
                "$(head -c 200 "$T/fin_rs1")"
            check_jerr "poisoned: predict is 409 model_not_finite" 409 model_not_finite - \
                "$M/fin-po/predict" '{"X":[0.5]}'
            jqb .error.message | grep -q 'observation log entry 1'
            verdict "poisoned: the message names the log entry" $? "$(jqb .error.message)"
            check_jerr "poisoned: sample is 409 model_not_finite" 409 model_not_finite - \
                "$M/fin-po/sample" '{"X":[0.5]}'
            check_jerr "poisoned: observe is 409 model_not_finite" 409 model_not_finite - \
                "$M/fin-po/observe" '{"X":[0.5],"y":[1]}'
            req POST /v2/models/fin-po/infer -H 'Content-Type: application/json' --data-binary \
                '{"inputs":[{"name":"X","shape":[1,1],"datatype":"FP64","data":[0.5]}]}'
            [ "$ST" = 409 ] && jhas '.error | type == "string"'
            verdict "poisoned: a /v2 infer is 409 in the protocol's shape" $? "status $ST"
            check "poisoned: GET answers" 200 GET "$M/fin-po"
            jhas '.status == "not_finite" and .error.code == "model_not_finite"'
            verdict "poisoned: GET says status not_finite and why" $? "$(jqb '{status, error} | tostring')"
            check "poisoned: /readyz is still ready" 200 GET /readyz
            jhas '.status == "ready" and .models_not_finite == [{"name":"fin-po","version":1,"message":.models_not_finite[0].message}]'
            verdict "poisoned: /readyz lists the version" $? "$(jqb tostring)"
            req GET /metrics
            grep -q '^gpserve_models_not_finite 1$' "$T/body"
            verdict "poisoned: /metrics gpserve_models_not_finite 1" $? "$(grep not_finite "$T/body")"
            check_json "poisoned: the healthy model still predicts" 200 "$M/fin-rs/predict" '{"X":[0.5]}'
            check "poisoned: DELETE frees the name" 204 DELETE "$M/fin-po"
            check "poisoned: /readyz lists nothing after" 200 GET /readyz
            jhas '. == {"status":"ready"}'
            verdict "poisoned: /readyz is plain ready again" $? "$(jqb tostring)"
            stop_daemon "$DPID"
        fi
    fi
    PORT=$MPORT
fi
