#!/bin/sh
# Integration area "online": models that learn after their fit, over HTTP
# (POST /v1/models/{name}/observe). exact: rows observed equal a fresh fit on
# all rows with the same (fixed) hyperparameters, to the last bit the JSON
# carries; ssgp the same with the same frequencies; sgpr takes rows with Z
# and its hyperparameters held (test_sgpr_observe.c checks the numbers). rfgp (KJIT): created
# empty, answers in warm-up with every point asking the oracle, goes online
# after `warmup` rows, reports n, state, observations and the rolling oracle
# rate in GET; two outputs; Gaussian and message inputs; "new_version". Every
# bad observe with its status and field (wrong arity, wrong output count, a
# message type the model does not take, NaN, a negative variance, a method
# that cannot observe, an unknown model). Crash safety: a daemon on its own
# database (--snapshot-interval 7) streams observes and is killed with
# SIGKILL mid-stream; after the restart every acknowledged batch is there, and
# the model predicts bit for bit what a model fed the same logged batches in
# one go predicts.
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "online"
M=/v1/models

# ---- exact: observe == refit with the same hyperparameters
EK='"kernel":{"type":"rbf","variance":1.3,"lengthscale":[0.7],"fixed":true},"noise":{"variance":0.01,"fixed":true},"standardize":false'
check_json "exact: fit on 6 rows, hyperparameters fixed" 201 $M \
    "{\"name\":\"on-ex\",\"method\":\"exact\",$EK,\"X\":[0,0.5,1,1.5,2,2.5],\"y\":[0.1,0.5,0.8,1.0,0.9,0.6]}"
check_json "exact: observe 2 rows" 200 "$M/on-ex/observe" '{"X":[3,3.5],"y":[0.1,-0.3]}'
jhas '.n == 8 and .observations == 1 and .state == "online" and .version == 1'
verdict "exact: the observe answers n 8, observations 1, state online, version 1" $? "$(jqb 'tostring')"
check_json "exact: observe 1 row more" 200 "$M/on-ex/observe" '{"X":[[4]],"y":[-0.7]}'
check_json "exact: refit on all 9 rows" 201 $M \
    "{\"name\":\"on-ex-ref\",\"method\":\"exact\",$EK,\"X\":[0,0.5,1,1.5,2,2.5,3,3.5,4],\"y\":[0.1,0.5,0.8,1.0,0.9,0.6,0.1,-0.3,-0.7]}"
EXQ='{"X":[0.25,1.75,3.2,5.0],"full_covariance":true}'
check_json "exact: predict the observed model" 200 "$M/on-ex/predict" "$EXQ"
jq -c '{mean, variance, covariance}' "$T/body" >"$T/on_ex_a.json"
check_json "exact: predict the refit" 200 "$M/on-ex-ref/predict" "$EXQ"
jq -c '{mean, variance, covariance}' "$T/body" >"$T/on_ex_b.json"
# the factor was extended rather than rebuilt: equal to ~1e-12, not bit for bit
jq -n --slurpfile a "$T/on_ex_a.json" --slurpfile b "$T/on_ex_b.json" -e '
    [$a[0].mean, $a[0].variance, ($a[0].covariance | flatten)] | flatten as $x |
    [$b[0].mean, $b[0].variance, ($b[0].covariance | flatten)] | flatten as $y |
    ($x | length) == ($y | length) and ([range($x | length)] | all(. as $i | (($x[$i] - $y[$i]) | fabs) <= 1e-9 * (1 + ($y[$i] | fabs))))' >/dev/null
verdict "exact: observed model == refit on all rows (1e-9 relative)" $? \
    "$(cat "$T/on_ex_a.json" "$T/on_ex_b.json" | head -c 400)"
check "exact: GET reports n 9 and 2 observations" 200 GET $M/on-ex
jhas '.n_train == 9 and .online.n == 9 and .online.observations == 2 and .online.state == "online"'
verdict "exact: GET online status" $? "$(jqb '{n_train, online} | tostring')"

# ---- bad observes, each with its status and field
check_jerr "observe: unknown model" 404 not_found name "$M/no-such-model/observe" '{"X":[1],"y":[1]}'
check_jerr "observe: X missing" 400 invalid_argument '^X$' "$M/on-ex/observe" '{"y":[1]}'
check_jerr "observe: y missing" 400 invalid_argument '^y$' "$M/on-ex/observe" '{"X":[1]}'
check_jerr "observe: wrong arity (2 columns, the model has 1)" 422 invalid_data '^X' \
    "$M/on-ex/observe" '{"X":[[1,2]],"y":[1]}'
check_jerr "observe: y and X differ in rows" 422 invalid_data '^y$' "$M/on-ex/observe" \
    '{"X":[1,2],"y":[1]}'
check_jerr "observe: two outputs to a one-output model" 422 unsupported '^y$' \
    "$M/on-ex/observe" '{"X":[1],"y":[[1,2]]}'
check_jerr "observe: NaN in X" 422 invalid_data '^X\[0\]' "$M/on-ex/observe" '{"X":["NaN"],"y":[1]}'
check_jerr "observe: unknown key" 400 invalid_argument '^colour$' "$M/on-ex/observe" \
    '{"X":[1],"y":[1],"colour":1}'
check_err "observe: neither JSON nor CSV" 415 unsupported_media_type - POST "$M/on-ex/observe" \
    -H 'Content-Type: text/plain' --data-binary 'x,y'
check_err "observe: a CSV body without rows" 422 invalid_data '^X$' POST "$M/on-ex/observe" \
    -H 'Content-Type: text/csv' --data-binary 'x,y'
check "exact: a refused observe left n at 9" 200 GET $M/on-ex
jhas '.online.n == 9 and .online.observations == 2'
verdict "exact: nothing of the refused observes was applied" $? "$(jqb '.online | tostring')"
check_json "sgpr: fit" 201 $M '{"name":"on-sg","method":"sgpr","options":{"inducing":4},"X":[0,1,2,3,4,5],"y":[0,1,0,1,0,1]}'
check_json "sgpr: observe a row (Z and hyperparameters held)" 200 "$M/on-sg/observe" \
    '{"X":[2.5],"y":[0.5]}'
jhas '.n == 7 and .observations == 1'
verdict "sgpr: the observed row is held" $? "$(jqb '{n, observations} | tostring')"
check_jerr "observe: NaN to sgpr" 422 invalid_data '^y\[0\]' "$M/on-sg/observe" '{"X":[1],"y":["NaN"]}'
check_json "renyi: fit" 201 $M '{"name":"on-re","method":"renyi","options":{"inducing":4,"max_iterations":5},"X":[0,1,2,3,4,5],"y":[0,1,0,1,0,1]}'
check_jerr "observe: renyi does not update online" 422 unsupported none "$M/on-re/observe" \
    '{"X":[1],"y":[1]}'

# ---- ssgp: observe == refit with the same frequencies and hyperparameters
SK='"kernel":{"type":"rbf","variance":1.0,"lengthscale":[0.8],"fixed":true},"noise":{"variance":0.02,"fixed":true},"standardize":false,"seed":5,"options":{"features":20}'
check_json "ssgp: fit on 6 rows" 201 $M \
    "{\"name\":\"on-ss\",\"method\":\"ssgp\",$SK,\"X\":[0,0.5,1,1.5,2,2.5],\"y\":[0.1,0.5,0.8,1.0,0.9,0.6]}"
check_json "ssgp: observe 3 rows" 200 "$M/on-ss/observe" '{"X":[3,3.5,4],"y":[0.1,-0.3,-0.7]}'
check_json "ssgp: refit on all rows" 201 $M \
    "{\"name\":\"on-ss-ref\",\"method\":\"ssgp\",$SK,\"X\":[0,0.5,1,1.5,2,2.5,3,3.5,4],\"y\":[0.1,0.5,0.8,1.0,0.9,0.6,0.1,-0.3,-0.7]}"
check_json "ssgp: predict observed" 200 "$M/on-ss/predict" '{"X":[0.25,3.2,6]}'
jq -c '{mean, variance}' "$T/body" >"$T/on_ss_a.json"
check_json "ssgp: predict refit" 200 "$M/on-ss-ref/predict" '{"X":[0.25,3.2,6]}'
jq -c '{mean, variance}' "$T/body" >"$T/on_ss_b.json"
jq -n --slurpfile a "$T/on_ss_a.json" --slurpfile b "$T/on_ss_b.json" -e '
    ($a[0].mean + $a[0].variance) as $x | ($b[0].mean + $b[0].variance) as $y |
    ($x | length) == ($y | length) and ([range($x | length)] | all(. as $i | (($x[$i] - $y[$i]) | fabs) <= 1e-9 * (1 + ($y[$i] | fabs))))' >/dev/null
verdict "ssgp: observed model == refit (1e-9 relative)" $? "$(cat "$T/on_ss_a.json" "$T/on_ss_b.json")"

# ---- rfgp: empty, warm-up, online, the gate
RF='"method":"rfgp","seed":3,"options":{"input":{"kind":"point","dim":1},"features":64,"warmup":8}'
check_json "rfgp: create empty" 201 $M "{\"name\":\"on-rf\",$RF}"
check "rfgp: GET in warm-up" 200 GET $M/on-rf
jhas '.online.state == "warmup" and .online.n == 0 and .online.warmup_target == 8 and .online.oracle_threshold == null'
verdict "rfgp: GET says warmup, n 0 of 8" $? "$(jqb '.online | tostring')"
check_json "rfgp: predict in warm-up" 200 "$M/on-rf/predict" '{"X":[0.5,1.5]}'
jhas '.mean == null and .variance == null and .state == "warmup" and .ask_oracle == [true, true]'
verdict "rfgp: in warm-up the mean is null and every point asks the oracle" $? "$(jqb 'tostring')"
check_jerr "rfgp: samples in warm-up are refused" 409 conflict - "$M/on-rf/sample" '{"X":[0.5]}'
check_json "rfgp: observe 5 rows (still warming up)" 200 "$M/on-rf/observe" \
    '{"X":[0,0.25,0.5,0.75,1],"y":[0,0.24,0.48,0.68,0.84]}'
jhas '.n == 5 and .state == "warmup"'
verdict "rfgp: n 5, still warmup" $? "$(jqb 'tostring')"
check_json "rfgp: observe 4 rows (the warm-up ends)" 200 "$M/on-rf/observe" \
    '{"X":[1.25,1.5,1.75,2],"y":[0.95,1.0,0.98,0.91]}'
jhas '.n == 9 and .state == "online" and .observations == 2'
verdict "rfgp: n 9, online" $? "$(jqb 'tostring')"
check_json "rfgp: predict near and far from the data" 200 "$M/on-rf/predict" '{"X":[1.1,40]}'
jhas '(.mean | length) == 2 and .state == "online" and .ask_oracle[0] == false and .ask_oracle[1] == true and (.oracle_threshold | type) == "number"'
verdict "rfgp: sure near the data, asks far from it" $? "$(jqb 'tostring')"
check "rfgp: GET reports the oracle rate" 200 GET $M/on-rf
jhas '.online.state == "online" and .online.n == 9 and .online.oracle_window == 4 and .online.oracle_rate == 0.75 and .online.gate_kappa == 1'
verdict "rfgp: oracle rate 3 of the last 4 points" $? "$(jqb '.online | tostring')"
check_json "rfgp: samples" 200 "$M/on-rf/sample" '{"X":[0.5,1.0],"n_samples":3,"seed":2}'
jhas '(.samples | length) == 3 and all(.samples[]; length == 2)'
verdict "rfgp: 3 joint draws at 2 points" $? "$(jqb 'tostring')"
check_json "rfgp: observe with new_version" 200 "$M/on-rf/observe" '{"X":[2.5],"y":[0.6],"new_version":true}'
jhas '.version == 2 and .n == 10'
verdict "rfgp: new_version makes version 2 with n 10" $? "$(jqb 'tostring')"
check "rfgp: version 1 kept its 9 rows" 200 GET "$M/on-rf/versions/1"
jhas '.online.n == 9'
verdict "rfgp: version 1 unchanged" $? "$(jqb '.online | tostring')"

# ---- concurrent observes to one model are serialised; predictions meanwhile see whole batches
ON_CC_PIDS=""
check_json "rfgp: create for concurrent observes" 201 $M \
    '{"name":"on-cc","method":"rfgp","seed":6,"options":{"input":{"kind":"point","dim":1},"features":32,"warmup":2}}'
for w in 1 2 3 4; do
    (
        i=0
        while [ $i -lt 10 ]; do
            curl -s --max-time "$MT" -o /dev/null -w '%{http_code}\n' -H 'Content-Type: application/json' \
                --data-binary "{\"X\":[$w.$i,$w.$i],\"y\":[0.$i,0.$w]}" \
                "http://127.0.0.1:$PORT$M/on-cc/observe" 2>/dev/null
            i=$((i + 1))
        done
    ) >"$T/on_cc_$w" &
    ON_CC_PIDS="$ON_CC_PIDS $!"
done
(
    i=0
    while [ $i -lt 20 ]; do
        curl -s --max-time "$MT" -H 'Content-Type: application/json' --data-binary '{"X":[1.5]}' \
            "http://127.0.0.1:$PORT$M/on-cc/predict" 2>/dev/null | jq -r '.state // .error.code' 2>/dev/null
        i=$((i + 1))
    done
) >"$T/on_cc_pred" &
ON_CC_PIDS="$ON_CC_PIDS $!"
# (a bare wait would wait for the daemons this shell started too)
for p in $ON_CC_PIDS; do wait "$p"; done
[ "$(cat "$T"/on_cc_1 "$T"/on_cc_2 "$T"/on_cc_3 "$T"/on_cc_4 | grep -c '^200$')" = 40 ]
verdict "rfgp: 40 concurrent observes (4 clients) all acknowledged" $? "$(sort "$T"/on_cc_[1-4] | uniq -c | tr '\n' ' ')"
! grep -qv -e '^online$' -e '^warmup$' "$T/on_cc_pred"
verdict "rfgp: predictions during them all answered" $? "$(sort "$T/on_cc_pred" | uniq -c | tr '\n' ' ')"
check "rfgp: GET after the concurrent observes" 200 GET $M/on-cc
jhas '.online.n == 80 and .online.observations == 40 and .n_train == 80'
verdict "rfgp: 80 rows in 40 log entries, none lost or doubled" $? "$(jqb '.online | tostring')"

# ---- rfgp: two outputs, Gaussian inputs, messages
G2='"method":"rfgp","seed":4,"options":{"input":{"kind":"gaussian","dim":1},"features":64,"inner_features":32,"warmup":4,"outputs":2}'
check_json "rfgp: create with Gaussian inputs and 2 outputs" 201 $M "{\"name\":\"on-g2\",$G2}"
GX='[{"gaussian":{"mean":[0],"var":[0.1]}},{"gaussian":{"mean":[1],"var":[0.2]}},{"gaussian":{"mean":[2],"var":[0.1]}},{"gaussian":{"mean":[3],"var":[0.3]}}]'
check_json "rfgp: observe 4 Gaussian inputs with 2 outputs" 200 "$M/on-g2/observe" \
    "{\"X\":$GX,\"y\":[[0,1],[1,0.5],[2,0.2],[3,0.1]]}"
jhas '.state == "online" and .n == 4'
verdict "rfgp: Gaussian inputs take it online" $? "$(jqb 'tostring')"
check_json "rfgp: predict 2 outputs" 200 "$M/on-g2/predict" '{"X":[{"gaussian":{"mean":[1.5],"var":[0.1]}}],"quantiles":[0.1,0.9]}'
jhas '(.mean | length) == 1 and (.mean[0] | length) == 2 and (.variance[0] | length) == 2 and (.quantiles["0.1"][0] | length) == 2 and (.oracle_threshold | length) == 2'
verdict "rfgp: rows of 2 outputs, quantiles per output, a threshold per output" $? "$(jqb 'tostring')"
check_jerr "observe: wrong output count" 422 invalid_data '^y\[0\]$' "$M/on-g2/observe" \
    '{"X":[{"gaussian":{"mean":[1],"var":[0.1]}}],"y":[[1,2,3]]}'
check_jerr "observe: numbers to a Gaussian-input model" 422 invalid_data '^X\[0\]$' "$M/on-g2/observe" \
    '{"X":[[1]],"y":[[1,2]]}'
check_jerr "observe: negative variance" 422 invalid_data '^X\[0\]\.gaussian\.var\[0\]$' "$M/on-g2/observe" \
    '{"X":[{"gaussian":{"mean":[1],"var":[-0.1]}}],"y":[[1,2]]}'
check_jerr "observe: a full covariance to a diagonal model" 422 invalid_data '^X\[0\]\.gaussian\.cov$' \
    "$M/on-g2/observe" '{"X":[{"gaussian":{"mean":[1],"cov":[[0.1]]}}],"y":[[1,2]]}'
check_jerr "observe: NaN mean" 422 invalid_data '^X\[0\]\.gaussian\.mean\[0\]$' "$M/on-g2/observe" \
    '{"X":[{"gaussian":{"mean":["NaN"],"var":[0.1]}}],"y":[[1,2]]}'
MS='"method":"rfgp","seed":5,"options":{"input":{"kind":"messages","messages":["normal","beta"]},"features":48,"inner_features":24,"warmup":3}'
check_json "rfgp: create with (normal, beta) messages" 201 $M "{\"name\":\"on-ms\",$MS}"
MX='[{"messages":[{"normal":{"mean":0,"var":1}},{"beta":{"a":2,"b":1}}]},{"messages":[{"normal":{"mean":1,"var":0.5}},{"beta":{"a":1,"b":2}}]},{"messages":[{"normal":{"mean":-1,"var":2}},{"beta":{"a":2,"b":1}}]}]'
check_json "rfgp: observe 3 message tuples" 200 "$M/on-ms/observe" "{\"X\":$MX,\"y\":[0.3,0.1,-0.4]}"
jhas '.state == "online"'
verdict "rfgp: messages take it online" $? "$(jqb 'tostring')"
check_jerr "observe: a message type the model does not take" 422 invalid_data '^X\[0\]\.messages\[1\]$' \
    "$M/on-ms/observe" '{"X":[{"messages":[{"normal":{"mean":0,"var":1}},{"gamma":{"shape":2,"rate":1}}]}],"y":[0]}'
check_jerr "observe: wrong arity of messages" 422 invalid_data '^X\[0\]\.messages$' \
    "$M/on-ms/observe" '{"X":[{"messages":[{"normal":{"mean":0,"var":1}}]}],"y":[0]}'
check_jerr "observe: a beta parameter that is not positive" 422 invalid_data '^X\[0\]\.messages\[1\]\.beta\.a$' \
    "$M/on-ms/observe" '{"X":[{"messages":[{"normal":{"mean":0,"var":1}},{"beta":{"a":0,"b":1}}]}],"y":[0]}'
check_jerr "fit: an input kind rfgp's spec refuses" 400 invalid_argument '^options\.input\.kind$' $M \
    '{"name":"on-bad","method":"rfgp","options":{"input":{"kind":"cloud","dim":1}}}'
check_jerr "fit: an empty exact model" 400 invalid_argument '^X$' $M '{"name":"on-bad","method":"exact"}'

# ---- crash safety: kill -9 mid-stream, restart, compare
ON_DB=$(db_for online)
on_batch() { # on_batch I: the I-th batch of 1 row (deterministic)
    awk -v i="$1" 'BEGIN { x = (i * 37 % 101) / 25.0; printf "{\"X\":[%.4f],\"y\":[%.6f]}", x, sin(x) }'
}
if start_daemon "$T/online-crash.log" --db "$ON_DB" --snapshot-interval 7; then
    ON_PID=$DPID
    SAVED_PORT=$PORT
    PORT=$DPORT
    ONSPEC='"method":"rfgp","seed":9,"options":{"input":{"kind":"point","dim":1},"features":40,"warmup":5}'
    check_json "crash: create the streamed model" 201 $M "{\"name\":\"on-cr\",$ONSPEC}"
    : >"$T/on_acked"
    (
        i=1
        while [ $i -le 400 ]; do
            b=$(on_batch $i)
            st=$(curl -s --max-time 10 -o "$T/on_ob_$i" -w '%{http_code}' -H 'Content-Type: application/json' \
                --data-binary "$b" "http://127.0.0.1:$DPORT$M/on-cr/observe" 2>/dev/null)
            [ "$st" = 200 ] || break
            echo $i >>"$T/on_acked"
            i=$((i + 1))
        done
    ) &
    ON_STREAM=$!
    # let a few dozen batches through (some after a snapshot), then kill mid-stream
    w=0
    while [ "$(count_lines <"$T/on_acked")" -lt 40 ] && [ $w -lt $((300 * SLOW)) ]; do sleep 0.1; w=$((w + 1)); done
    kill -KILL "$ON_PID" 2>/dev/null
    wait "$ON_PID" 2>/dev/null
    wait "$ON_STREAM" 2>/dev/null
    ACKED=$(count_lines <"$T/on_acked")
    [ "$ACKED" -ge 40 ]
    verdict "crash: the stream was killed after $ACKED acknowledged batches" $? "only $ACKED"
    if start_daemon "$T/online-crash2.log" --db "$ON_DB" --snapshot-interval 7; then
        PORT=$DPORT
        check "crash: GET after the restart" 200 GET $M/on-cr
        LOGGED=$(jqb '.online.observations')
        [ "$LOGGED" -ge "$ACKED" ] && [ "$LOGGED" -le $((ACKED + 1)) ]
        verdict "crash: every acknowledged batch is in the log ($ACKED acknowledged, $LOGGED logged)" $? "lost some"
        # the reference: a fresh model fed the same logged batches, in order
        check_json "crash: create the reference" 201 $M "{\"name\":\"on-cr-ref\",$ONSPEC}"
        i=1
        ok=0
        while [ $i -le "$LOGGED" ]; do
            jpost "$M/on-cr-ref/observe" "$(on_batch $i)"
            [ "$ST" = 200 ] || ok=1
            i=$((i + 1))
        done
        verdict "crash: the reference took the $LOGGED batches" $ok "status $ST"
        ONQ='{"X":[0.3,1.7,2.9,3.8],"full_covariance":true}'
        check_json "crash: predict the restarted model" 200 "$M/on-cr/predict" "$ONQ"
        jq -c 'del(.name, .version)' "$T/body" >"$T/on_cr_a.json"
        check_json "crash: predict the reference" 200 "$M/on-cr-ref/predict" "$ONQ"
        jq -c 'del(.name, .version)' "$T/body" >"$T/on_cr_b.json"
        cmp -s "$T/on_cr_a.json" "$T/on_cr_b.json"
        verdict "crash: the restarted model predicts bit for bit what the reference does" $? \
            "$(head -c 300 "$T/on_cr_a.json"; echo; head -c 300 "$T/on_cr_b.json")"
        jpost "$M/on-cr/observe" "$(on_batch 401)"
        [ "$ST" = 200 ] && [ "$(jqb '.observations')" = $((LOGGED + 1)) ]
        verdict "crash: the restarted model goes on observing" $? "status $ST $(jqb 'tostring')"
        stop_daemon "$DPID"
    fi
    PORT=$SAVED_PORT
fi
