#!/bin/sh
# Integration area "studies": suggest and complete loops (docs/design/api.md,
# "Studies"). A study of a 2-D quadratic: created (201, Location), its bad
# twins refused naming the field with nothing stored; 25 rounds of suggest
# and complete reach the optimum (best_trial within 0.25 of (0.3, -0.5)); its
# model is a normal model version (predict works on study.NAME); q = 4
# distinct trials, in the design and from the model; a client_id gets its
# active trial back; trial_timeout_s 1 expires a dead client's trial; each
# refused completion (not active 409, another study's id 404, a non-finite or
# unknown metric 422, a bad trial id 400) stores nothing; infeasible; attach;
# DELETE takes the study, its trials and its models. On daemons of its own:
# kill -9 between completions loses no completed trial; 8 clients suggesting
# and completing at once through two daemons on one database get distinct
# trials and a dense history. Runs on PostgreSQL too (GPSERVE_TEST_DB_URL).
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "studies"
ST_MAIN_PORT=$PORT
SC="python3 $ROOT/tests/integration/study_client.py"
QUAD='"parameters":[{"name":"x0","type":"double","bounds":[-2,2]},
                    {"name":"x1","type":"double","bounds":[-2,2]}],
      "objective":{"name":"y","goal":"minimize"}'
for s in quad bat cli exp err at; do req DELETE /v1/studies/$s; done

# ---- create, and refusals that store nothing
check_json "create a study" 201 /v1/studies "{\"name\":\"quad\",$QUAD,\"seed\":3}"
[ "$(header Location)" = /v1/studies/quad ] && pass "its Location" ||
    fail "its Location" "'$(header Location)'"
jhas '.best_trial == null and .model == null and .trials.total == 0 and
      .config.initial_design == 6 and .config.model.method == "exact"' &&
    pass "a new study: no trial, no model, the defaults written" ||
    fail "a new study: no trial, no model, the defaults written" "" body
check_jerr "the same name again: 409 naming name" 409 conflict '^name$' /v1/studies \
    "{\"name\":\"quad\",$QUAD}"
check_jerr "bounds lo >= hi: 400 naming parameters[1].bounds" 400 invalid_argument \
    '^parameters\[1\]\.bounds$' /v1/studies \
    '{"name":"bad","parameters":[{"name":"a","type":"double","bounds":[0,1]},
      {"name":"b","type":"double","bounds":[3,3]}],"objective":{"name":"y","goal":"minimize"}}'
check_jerr "an unknown parameter type: 400 naming parameters[0].type" 400 invalid_argument \
    '^parameters\[0\]\.type$' /v1/studies \
    '{"name":"bad","parameters":[{"name":"a","type":"real","bounds":[0,1]}],
      "objective":{"name":"y","goal":"minimize"}}'
check_jerr "an unknown goal: 400 naming objective.goal" 400 invalid_argument '^objective\.goal$' \
    /v1/studies '{"name":"bad","parameters":[{"name":"a","type":"double","bounds":[0,1]}],
      "objective":{"name":"y","goal":"least"}}'
check_err "nothing of the refused studies stored" 404 not_found '^name$' GET /v1/studies/bad

# ---- the loop converges on the quadratic
ST_BEST=$($SC loop "$PORT" quad 25 2>&1)
if awk -v b="$ST_BEST" 'BEGIN { exit !(b + 0 == b && b < 0.05) }'; then
    pass "25 rounds of suggest and complete: best y $ST_BEST < 0.05"
else
    fail "25 rounds of suggest and complete" "$ST_BEST"
fi
req GET /v1/studies/quad
jhas '.trials.completed == 25 and .trials.active == 0 and
      (.best_trial.parameters.x0 - 0.3 | fabs) < 0.25 and
      (.best_trial.parameters.x1 + 0.5 | fabs) < 0.25 and
      .best_trial.metrics.y == ([.best_trial.metrics.y] | min)' &&
    pass "best_trial near the optimum (0.3, -0.5)" ||
    fail "best_trial near the optimum (0.3, -0.5)" "" body
# the refits are async jobs: the model appears once one ends
i=0
while [ $i -lt $((JOBWAIT * 5)) ]; do
    req GET /v1/studies/quad
    jhas '.model.version >= 1' && break
    sleep 0.2
    i=$((i + 1))
done
jhas '.model.name == "study.quad" and .model.version >= 1 and .model.trials_included >= 6' &&
    pass "the study's model is a version of study.quad" ||
    fail "the study's model is a version of study.quad" "" body
check_json "predict on the study's model (encoded inputs)" 200 /v1/models/study.quad/predict \
    '{"X":[[0.575,0.375],[0.1,0.9]]}'
jhas '(.mean | length) == 2 and all(.mean[]; isfinite) and all(.variance[]; . >= 0)' &&
    pass "its prediction is finite" || fail "its prediction is finite" "" body

# ---- q = 4, in the design and from the model
check_json "create a study for batches" 201 /v1/studies "{\"name\":\"bat\",$QUAD,\"initial_design\":4}"
check_json "4 trials of the design at once" 200 /v1/studies/bat/suggestions '{"count":4}'
jhas '.source == "sobol" and (.trials | length) == 4 and ([.trials[].id] | unique | length) == 4
      and ([.trials[].parameters] | unique | length) == 4' &&
    pass "4 distinct trials from the Sobol design" || fail "4 distinct trials from the Sobol design" "" body
for id in $(jqb '.trials[].id'); do
    jpost /v1/studies/bat/trials/$id "{\"metrics\":{\"y\":$id.5}}"
done
check_json "4 trials from the model at once" 200 /v1/studies/bat/suggestions '{"count":4}'
cp "$T/body" "$T/bat4"
jhas '.source == "model" and (.trials | length) == 4 and ([.trials[].id] | unique | length) == 4
      and ([.trials[].parameters] | unique | length) == 4' &&
    pass "4 distinct trials from the model" || fail "4 distinct trials from the model" "" body
check_json "one more while those are active" 200 /v1/studies/bat/suggestions '{"count":1}'
jq -e --slurpfile four "$T/bat4" '.trials[0].parameters as $p |
    all($four[0].trials[]; .parameters != $p)' "$T/body" >/dev/null &&
    pass "an active trial is not suggested again" ||
    fail "an active trial is not suggested again" "" body

# ---- a client gets its active trial back (Vizier's rule)
check_json "create a study for clients" 201 /v1/studies "{\"name\":\"cli\",$QUAD}"
jpost /v1/studies/cli/suggestions '{"client_id":"w1"}'
ST_W1=$(jqb '.trials[0].id')
check_json "the same client asks again" 200 /v1/studies/cli/suggestions '{"client_id":"w1"}'
jhas ".source == \"client\" and (.trials | length) == 1 and .trials[0].id == $ST_W1" &&
    pass "it gets its active trial back" || fail "it gets its active trial back" "" body
jpost /v1/studies/cli/suggestions '{"client_id":"w2"}'
jhas ".trials[0].id != $ST_W1" && pass "another client gets another trial" ||
    fail "another client gets another trial" "" body

# ---- a dead client's trial expires
check_json "create a study with trial_timeout_s 1" 201 /v1/studies \
    "{\"name\":\"exp\",$QUAD,\"trial_timeout_s\":1}"
jpost /v1/studies/exp/suggestions '{"client_id":"gone"}'
sleep $((2 * SLOW))
check_json "a suggestion after the timeout" 200 /v1/studies/exp/suggestions '{"client_id":"other"}'
jhas '.trials[0].id == 2' && pass "it is a new trial" || fail "it is a new trial" "" body
req GET /v1/studies/exp/trials/1
jhas '.state == "expired"' && pass "the dead client's trial expired" ||
    fail "the dead client's trial expired" "" body
check_jerr "completing an expired trial: 409 naming trial" 409 conflict '^trial$' \
    /v1/studies/exp/trials/1 '{"metrics":{"y":1}}'

# ---- refused completions store nothing
check_json "create a study for errors" 201 /v1/studies \
    "{\"name\":\"err\",$QUAD,\"constraints\":[{\"name\":\"c\",\"max\":0.5}]}"
jpost /v1/studies/err/suggestions '{}'
check_jerr "a NaN metric: 422 naming metrics.y" 422 invalid_data '^metrics\.y$' \
    /v1/studies/err/trials/1 '{"metrics":{"y":"NaN","c":0}}'
check_jerr "an overflowing metric: 422 naming metrics.y" 422 invalid_data '^metrics\.y$' \
    /v1/studies/err/trials/1 '{"metrics":{"y":1e999,"c":0}}'
check_jerr "a missing constraint metric: 422 naming metrics.c" 422 invalid_data '^metrics\.c$' \
    /v1/studies/err/trials/1 '{"metrics":{"y":1}}'
check_jerr "an unknown metric: 422 naming metrics.z" 422 invalid_data '^metrics\.z$' \
    /v1/studies/err/trials/1 '{"metrics":{"y":1,"c":0,"z":3}}'
check_jerr "another study's trial id: 404 naming trial" 404 not_found '^trial$' \
    /v1/studies/err/trials/7 '{"metrics":{"y":1,"c":0}}'
check_jerr "a trial id that is not one: 400 naming trial" 400 invalid_argument '^trial$' \
    /v1/studies/err/trials/abc '{"metrics":{"y":1,"c":0}}'
check_jerr "an unknown study: 404 naming name" 404 not_found '^name$' \
    /v1/studies/nosuch/trials/1 '{"metrics":{"y":1}}'
req GET /v1/studies/err/trials/1
jhas '.state == "active" and (has("metrics") | not)' && pass "the trial is still active" ||
    fail "the trial is still active" "" body
check_json "completed" 200 /v1/studies/err/trials/1 '{"metrics":{"y":0.25,"c":0.75}}'
check_jerr "completing it again: 409 naming trial" 409 conflict '^trial$' \
    /v1/studies/err/trials/1 '{"metrics":{"y":1,"c":0}}'
req GET /v1/studies/err
jhas '.best_trial == null' && pass "a trial beyond its constraint is not the best" ||
    fail "a trial beyond its constraint is not the best" "" body
jpost /v1/studies/err/suggestions '{}'
check_json "reported infeasible" 200 /v1/studies/err/trials/2 \
    '{"infeasible":true,"reason":"out of memory"}'
jhas '.state == "infeasible" and .reason == "out of memory"' && pass "infeasible, with its reason" ||
    fail "infeasible, with its reason" "" body

# ---- attach a trial run elsewhere
check_json "create a study for attach" 201 /v1/studies "{\"name\":\"at\",$QUAD}"
check_json "attach a completed trial" 201 /v1/studies/at/trials \
    '{"parameters":{"x0":0.3,"x1":-0.5},"metrics":{"y":0}}'
jhas '.state == "completed" and .seq == 1' && pass "attached, completed" ||
    fail "attached, completed" "" body
check_jerr "attach out of bounds: 400 naming parameters.x0" 400 invalid_argument \
    '^parameters\.x0$' /v1/studies/at/trials '{"parameters":{"x0":3,"x1":0},"metrics":{"y":0}}'
req GET /v1/studies/at
jhas '.best_trial.id == 1 and .trials.total == 1' && pass "the attached trial is the best" ||
    fail "the attached trial is the best" "" body

# ---- delete
check "DELETE the study" 204 DELETE /v1/studies/quad
check_err "then GET is 404" 404 not_found '^name$' GET /v1/studies/quad
check_err "and its model is gone" 404 not_found - GET /v1/models/study.quad
check "the list" 200 GET /v1/studies
jhas '([.studies[].name] | index("quad")) == null and ([.studies[].name] | index("bat")) != null' &&
    pass "lists the studies left" || fail "lists the studies left" "" body

# ---- kill -9 between completions
ST_DB=$(db_for studies_kill)
if start_daemon "$T/studies_kill.log" --db "$ST_DB"; then
    ST_PID=$DPID
    PORT=$DPORT
    check_json "a daemon of its own: create" 201 /v1/studies "{\"name\":\"k\",$QUAD}"
    $SC loop "$PORT" k 5 >/dev/null
    jpost /v1/studies/k/suggestions '{}'
    kill -KILL "$ST_PID"
    wait "$ST_PID" 2>/dev/null
    if start_daemon "$T/studies_kill2.log" --db "$ST_DB"; then
        PORT=$DPORT
        req GET /v1/studies/k
        jhas '.trials.completed == 5 and .trials.active == 1' &&
            pass "after kill -9: every completed trial is there" ||
            fail "after kill -9: every completed trial is there" "" body
        [ "$($SC check "$PORT" k 5)" = ok ] && pass "and its history is dense" ||
            fail "and its history is dense" "$($SC check "$PORT" k 5)"
        stop_daemon "$DPID"
    else
        fail "the daemon restarts after kill -9"
    fi
else
    fail "a daemon of its own starts"
fi
PORT=$ST_MAIN_PORT

# ---- 8 clients through two daemons on one database
ST_DB=$(db_for studies_two)
if start_daemon "$T/studies_a.log" --db "$ST_DB" && ST_A=$DPORT && ST_APID=$DPID &&
    start_daemon "$T/studies_b.log" --db "$ST_DB"; then
    ST_B=$DPORT
    PORT=$ST_A
    check_json "create a study on daemon A" 201 /v1/studies \
        "{\"name\":\"many\",$QUAD,\"initial_design\":8}"
    ST_OUT=$($SC clients "$ST_A,$ST_B" many 8 4 2>&1)
    [ "$ST_OUT" = ok ] && pass "8 clients x 4 rounds through two daemons" ||
        fail "8 clients x 4 rounds through two daemons" "$ST_OUT"
    ST_OUT=$($SC check "$ST_B" many 32 2>&1)
    [ "$ST_OUT" = ok ] && pass "distinct trials, each completed once, seq dense (read on B)" ||
        fail "distinct trials, each completed once, seq dense (read on B)" "$ST_OUT"
    stop_daemon "$DPID"
    stop_daemon "$ST_APID"
else
    fail "two daemons on one database start"
fi
PORT=$ST_MAIN_PORT
