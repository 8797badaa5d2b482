#!/bin/sh
# Integration area "columns": named columns, a model's signature (issue 36). A CSV fit keeps
# its header's names (feature_names, target_names) and a JSON fit may send them; the model
# JSON and the /v2 metadata show them; predict, sample and observe take named rows
# ({"rows": [{...}]}) and text/csv bodies, matched by name in any order, each answer byte for
# byte the positional request's (alone and in dynamic batches); every bad case with its
# status and field; a predict by names remembered for the restart area (the names persist).
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "named columns"
# cols: 30 rows of two inputs named in the header, the target in the middle
awk -F, 'BEGIN { print "cement,strength,slag" } { print $1 "," $3 "," $2 }' "$T/plane.csv" \
    | head -n 31 >"$T/cols.csv"
CM=$M/cols
check "CSV fit with a header" 201 POST "$M?name=cols&target=strength&seed=1" \
    -H 'Content-Type: text/csv' --data-binary @"$T/cols.csv"
jhas '.feature_names == ["cement","slag"] and .target_names == ["strength"]'
verdict "the fit answer names the inputs and the target" $? "$(jqb '[.feature_names, .target_names] | tostring')"
check "GET the model" 200 GET "$CM"
jhas '.feature_names == ["cement","slag"] and .target_names == ["strength"]'
verdict "the model JSON keeps feature_names and target_names" $? "$(jqb '[.feature_names, .target_names] | tostring')"
check "/v2 metadata" 200 GET /v2/models/cols
jhas '.inputs[0].name == "X" and .inputs[0].shape == [-1,2] and .inputs[0].parameters.feature_names == ["cement","slag"]'
verdict "/v2 metadata: the X tensor's columns named" $? "$(jqb '.inputs | tostring')"

# predict by names (shuffled keys) == positional, bit for bit
POS='{"X":[[0.1,-0.3],[1.2,0.4],[-1.5,1.9]],"quantiles":[0.1,0.9]}'
REC='{"rows":[{"slag":-0.3,"cement":0.1},{"cement":1.2,"slag":0.4},{"slag":1.9,"cement":-1.5}],"quantiles":[0.1,0.9]}'
check_json "predict positional" 200 "$CM/predict" "$POS"
cp "$T/body" "$T/cols_pos.json"
check_json "predict by named rows, keys shuffled" 200 "$CM/predict" "$REC"
cmp -s "$T/body" "$T/cols_pos.json"
verdict "named rows answer byte for byte the positional predict" $? "bodies differ"
check "predict with a text/csv body" 200 POST "$CM/predict?quantiles=0.1,0.9" \
    -H 'Content-Type: text/csv' --data-binary "$(printf 'slag,cement\n-0.3,0.1\n0.4,1.2\n1.9,-1.5\n')"
cmp -s "$T/body" "$T/cols_pos.json"
verdict "a CSV body answers byte for byte the positional predict" $? "$(head -c 200 "$T/body")"
remember columns-predict "$CM/predict" "$REC"

# sample by names == positional
check_json "sample positional" 200 "$CM/sample" '{"X":[[0.1,-0.3],[1.2,0.4]],"n_samples":3,"seed":5}'
cp "$T/body" "$T/cols_spos.json"
check_json "sample by named rows" 200 "$CM/sample" \
    '{"rows":[{"slag":-0.3,"cement":0.1},{"slag":0.4,"cement":1.2}],"n_samples":3,"seed":5}'
cmp -s "$T/body" "$T/cols_spos.json"
verdict "sample by names == positional" $? "bodies differ"
check "sample with a text/csv body" 200 POST "$CM/sample?n_samples=3&seed=5" \
    -H 'Content-Type: text/csv' --data-binary "$(printf 'cement,slag\n0.1,-0.3\n1.2,0.4\n')"
cmp -s "$T/body" "$T/cols_spos.json"
verdict "sample by CSV == positional" $? "bodies differ"

# observe (exact learns online): two models, one fed positionally, one by names
jpost /v1/models "{\"name\":\"cols-on\",\"method\":\"exact\",\"seed\":1,\"feature_names\":[\"cement\",\"slag\"],\"target_names\":[\"strength\"],\"X\":[[0,0],[1,1],[2,0.5]],\"y\":[0.1,0.5,0.2],\"noise\":{\"variance\":0.01,\"fixed\":true}}"
[ "$ST" = 201 ] && jhas '.feature_names == ["cement","slag"]'
verdict "JSON fit with feature_names and target_names" $? "status $ST $(head -c 200 "$T/body")"
jpost /v1/models "{\"name\":\"cols-on2\",\"method\":\"exact\",\"seed\":1,\"X\":[[0,0],[1,1],[2,0.5]],\"y\":[0.1,0.5,0.2],\"noise\":{\"variance\":0.01,\"fixed\":true}}"
check_json "observe by named rows with the target inside" 200 "$M/cols-on/observe" \
    '{"rows":[{"strength":0.3,"slag":0.2,"cement":0.5}]}'
check "observe with a text/csv body" 200 POST "$M/cols-on/observe" -H 'Content-Type: text/csv' \
    --data-binary "$(printf 'slag,strength,cement\n0.7,-0.1,1.5\n')"
check_json "observe positional (the reference model)" 200 "$M/cols-on2/observe" \
    '{"X":[[0.5,0.2]],"y":[0.3]}'
check_json "observe positional again" 200 "$M/cols-on2/observe" '{"X":[[1.5,0.7]],"y":[-0.1]}'
check_json "predict the model observed by names" 200 "$M/cols-on/predict" '{"X":[[0.4,0.4]]}'
jqb '.mean' >"$T/cols_on.txt"
check_json "predict the model observed positionally" 200 "$M/cols-on2/predict" '{"X":[[0.4,0.4]]}'
[ "$(jqb '.mean')" = "$(cat "$T/cols_on.txt")" ]
verdict "observed by names == observed positionally" $? "$(cat "$T/cols_on.txt") vs $(jqb '.mean')"
check_json "observe by named rows with y beside" 200 "$M/cols-on/observe" \
    '{"rows":[{"slag":0.1,"cement":0.9}],"y":[0.2]}'
check_json "observe by named rows as a new version" 200 "$M/cols-on/observe" \
    '{"rows":[{"slag":0.3,"cement":0.2,"strength":0.1}],"new_version":true}'
check "GET the new version" 200 GET "$M/cols-on/versions/$(jqb .version)"
jhas '.feature_names == ["cement","slag"] and .target_names == ["strength"]'
verdict "a version saved by observe keeps the names" $? "$(jqb '[.feature_names, .target_names] | tostring')"

# the bad cases, each with its status and field
check_jerr "named rows: a missing column" 422 invalid_data '^rows\[1\]\.slag$' "$CM/predict" \
    '{"rows":[{"cement":1,"slag":2},{"cement":1}]}'
check_jerr "named rows: an unknown column" 422 invalid_data '^rows\[0\]\.water$' "$CM/predict" \
    '{"rows":[{"cement":1,"slag":2,"water":3}]}'
check_jerr "named rows: a non-numeric value" 422 invalid_data '^rows\[3\]\.cement$' "$CM/predict" \
    '{"rows":[{"cement":1,"slag":2},{"cement":1,"slag":2},{"cement":1,"slag":2},{"cement":"x","slag":2}]}'
check_jerr "named rows and X together" 400 invalid_argument '^rows$' "$CM/predict" \
    '{"rows":[{"cement":1,"slag":2}],"X":[[1,2]]}'
check_jerr "rows not a list" 400 invalid_argument '^rows$' "$CM/predict" '{"rows":{"cement":1}}'
check_jerr "a row not an object" 400 invalid_argument '^rows\[0\]$' "$CM/predict" '{"rows":[[1,2]]}'
check_err "CSV body: an unknown column" 422 invalid_data '^rows\[0\]\.water$' POST "$CM/predict" \
    -H 'Content-Type: text/csv' --data-binary "$(printf 'cement,slag,water\n1,2,3\n')"
check_err "CSV body: a missing column" 422 invalid_data '^rows\[0\]\.slag$' POST "$CM/predict" \
    -H 'Content-Type: text/csv' --data-binary "$(printf 'cement\n1\n')"
check_err "CSV body: a text cell" 422 invalid_data '^rows\[1\]\.cement$' POST "$CM/predict" \
    -H 'Content-Type: text/csv' --data-binary "$(printf 'cement,slag\n1,2\nlots,3\n')"
check_err "CSV body: an unknown query parameter" 400 invalid_argument '^mode$' POST "$CM/predict?mode=1" \
    -H 'Content-Type: text/csv' --data-binary "$(printf 'cement,slag\n1,2\n')"
check_jerr "observe by names without the target" 422 invalid_data '^rows\[0\]\.strength$' \
    "$M/cols-on/observe" '{"rows":[{"cement":1,"slag":2}]}'
need_sine
check_jerr "named rows to a model fitted without names" 422 invalid_data '^rows$' "$P" \
    '{"rows":[{"x0":1}]}'
check_err "a CSV body to a model fitted without names" 422 invalid_data '^rows$' POST "$P" \
    -H 'Content-Type: text/csv' --data-binary "$(printf 'x0\n1\n')"
check_jerr "fit: feature_names of the wrong length" 422 invalid_data '^feature_names$' "$M" \
    '{"name":"cols-bad","feature_names":["a"],"X":[[1,2],[2,3],[3,1]],"y":[1,2,3]}'
check_jerr "fit: a repeated feature name" 400 invalid_argument '^feature_names\[1\]$' "$M" \
    '{"name":"cols-bad","feature_names":["a","a"],"X":[[1,2],[2,3],[3,1]],"y":[1,2,3]}'
check_jerr "fit: target_names of the wrong length" 422 invalid_data '^target_names$' "$M" \
    '{"name":"cols-bad","target_names":["a","b"],"X":[[1,2],[2,3],[3,1]],"y":[1,2,3]}'
check_err "cols-bad was never stored" 404 not_found - GET "$M/cols-bad"

# dynamic batching: named-row and CSV requests batched with positional ones answer what
# the positional request alone does
if start_daemon "$T/cols_batch.log" --db "$(db_for cols_batch)" --batch-delay-us 50000; then
    CB_PID=$DPID
    CB_PORT=$DPORT
    SAVED_PORT=$PORT
    PORT=$CB_PORT
    { echo "a,b,y"; gen_xy 2500 2 29; } >"$T/cols_big.csv"
    check "batching daemon: CSV fit of 2500 rows" 201 POST \
        "$M?name=colsb&seed=1&options=%7B%22max_iterations%22%3A5%7D" \
        -H 'Content-Type: text/csv' --data-binary @"$T/cols_big.csv"
    check_json "batching daemon: the positional reference" 200 "$M/colsb/predict" '{"X":[[0.1,-0.3]]}'
    cp "$T/body" "$T/colsb_ref.json"
    : >"$T/colsb.cfg"
    i=0
    while [ $i -lt 12 ]; do
        [ $i -gt 0 ] && echo "next" >>"$T/colsb.cfg"
        case $((i % 3)) in
        0) printf '{"X":[[0.1,-0.3]]}' >"$T/colsb.req$i"; ct=application/json ;;
        1) printf '{"rows":[{"b":-0.3,"a":0.1}]}' >"$T/colsb.req$i"; ct=application/json ;;
        2) printf 'b,a\n-0.3,0.1\n' >"$T/colsb.req$i"; ct=text/csv ;;
        esac
        {
            echo "url = \"http://127.0.0.1:$CB_PORT/v1/models/colsb/predict\""
            echo "header = \"Content-Type: $ct\""
            echo "data-binary = \"@$T/colsb.req$i\""
            echo "output = \"$T/colsb.$i\""
            echo "max-time = $MT"
        } >>"$T/colsb.cfg"
        i=$((i + 1))
    done
    curl -sS --parallel --parallel-immediate --parallel-max 50 -K "$T/colsb.cfg" 2>/dev/null
    same=0
    i=0
    while [ $i -lt 12 ]; do
        cmp -s "$T/colsb.$i" "$T/colsb_ref.json" && same=$((same + 1))
        i=$((i + 1))
    done
    [ "$same" = 12 ]
    verdict "12 concurrent predicts (positional, named rows, CSV) in batches: each the positional answer" $? \
        "$same of 12 equal"
    PORT=$SAVED_PORT
    stop_daemon "$CB_PID"
else
    fail "batching daemon starts"
fi
