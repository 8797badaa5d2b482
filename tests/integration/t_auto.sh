#!/bin/sh
# Integration area "auto": method "auto" (docs/design/api.md, "Auto"). A
# regression set of 200 rows with budget_s 30 answers 202; the job's
# progress shows a growing leaderboard; the version's method is one of the
# candidates, the leaderboard's chosen entry, and the earliest within one
# standard error of the lowest validation nlpd; a budget only one candidate's
# plan fits runs it alone; a bernoulli set picks by log loss among its
# candidates; DELETE cancels the job; bad input case by case.
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "auto"

gen_xy 200 2 11 >"$T/auto.csv"
csv_to_json areg '"method":"auto","budget_s":30,"seed":1,' <"$T/auto.csv" >"$T/areg.json"
check_json "auto fit of 200 rows, budget 30 s -> 202" 202 $M @"$T/areg.json"
AJ=$(jstr job)
# the leaderboard grows: sample the progress while the job runs
: >"$T/alens"
_i=0
while [ $_i -lt $((JOBWAIT * 5)) ]; do
    req GET "/v1/jobs/$AJ"
    jqb '.progress.leaderboard // [] | length' >>"$T/alens"
    case $(jqb '.status') in succeeded | failed | cancelled) break ;; esac
    sleep 0.2
    _i=$((_i + 1))
done
cp "$T/body" "$T/ajob.json"
jhas '.status == "succeeded"'
verdict "the auto job succeeds" $? "$(jqb '{status, error}')"
DISTINCT=$(sort -n -u "$T/alens" | count_lines)
LAST=$(tail -n 1 "$T/alens")
[ "$DISTINCT" -ge 3 ] && sort -n -c "$T/alens" 2>/dev/null
verdict "progress shows the leaderboard growing ($DISTINCT sizes up to $LAST)" $? "$(sort -n -u "$T/alens" | tr '\n' ' ')"
jhas '.progress.max_iterations == 1000 and .progress.iteration <= 1000'
verdict "progress is per-mille of the stages" $? "$(jqb '.progress | del(.leaderboard)')"
req GET "$M/areg"
cp "$T/body" "$T/amodel.json"
jhas '.method as $m | .method_info.leaderboard as $l
      | ($l | map(.method) | index($m)) != null
      and ([$l[] | select(.chosen == true)] | length) == 1
      and ([$l[] | select(.chosen == true)][0].method == $m)'
verdict "the version's method is the chosen candidate" $? "$(jqb '{method, lb: [.method_info.leaderboard[] | {method, status, nlpd, nlpd_sd, seconds, chosen}]}')"
jhas '.method_info.leaderboard as $l | ([$l[] | select(.status == "done")] | min_by(.nlpd)) as $b
      | ([$l[] | select(.chosen == true)][0]) as $c
      | $c.nlpd <= $b.nlpd + $b.nlpd_sd / (5 | sqrt) + 1e-12
        and ([$l[] | select(.status == "done" and .nlpd <= $b.nlpd + $b.nlpd_sd / (5 | sqrt) + 1e-12)][0].method == $c.method)'
verdict "the chosen one: the earliest within one standard error of the best validation nlpd" $? "$(jqb '[.method_info.leaderboard[] | {method, nlpd, nlpd_sd}]')"
jhas '(.method_info.leaderboard | map(.method)) as $m
      | ($m | index("exact")) != null and ($m | index("ssgp")) != null and ($m | index("svgp")) == null
      and ($m | index("sgpr")) == null and ($m | index("hkd")) == null'
verdict "200 gaussian rows: exact and ssgp are candidates; svgp, sgpr (beyond 2000 rows) and hkd are not" $? "$(jqb '[.method_info.leaderboard[].method]')"
jhas '.validation.folds == 5 and (.validation.nlpd - ([.method_info.leaderboard[] | select(.chosen)][0].nlpd) | fabs) < 1e-12'
verdict "the version's validation is the winner's report" $? "$(jqb '.validation | {folds, nlpd}')"
jhas '.method_info.auto.budget_s == 30 and ([.method_info.leaderboard[] | select(.status == "done") | .seconds] | add) < 60'
verdict "method_info.auto states the budget; the candidates kept near it" $? "$(jqb '.method_info.auto')"
check_json "predict from the auto model" 200 "$M/areg/predict" '{"X":[[0.1,0.2]]}'

# ---- a budget only exact's plan fits (its 5 folds and final fit on 200 rows, ~2.1 s
# estimated; ssgp's next at ~3.2 s): exact alone runs, the others say why
csv_to_json aone '"method":"auto","budget_s":2.5,"seed":1,"async":false,' <"$T/auto.csv" >"$T/aone.json"
check_json "auto fit, a budget of 2.5 s -> 201" 201 $M @"$T/aone.json"
jhas '.method == "exact" and ([.method_info.leaderboard[] | select(.status == "done")] | length) == 1
      and ([.method_info.leaderboard[] | select(.status == "skipped" and (.reason | test("budget_s")))]
           | length) == (.method_info.leaderboard | length) - 1'
verdict "a budget for one candidate: it is done, every other skipped naming budget_s" $? "$(jqb '[.method_info.leaderboard[] | {method, status, estimated_seconds, reason}]')"
jhas '.method_info.auto as $a | $a.budget_s == 2.5 and ($a.seconds | type == "number")
      and ($a.within_budget | type == "boolean") and ($a.final_fit | type == "string")
      and ($a.validation | test("default")) and .validation.folds == 5'
verdict "method_info.auto: seconds, within_budget, final_fit; 200 rows validate 5 folds by default" $? "$(jqb '{auto: .method_info.auto, folds: .validation.folds}')"

# ---- bernoulli: picks by log loss, only classifiers
awk 'BEGIN { srand(5); for (i = 0; i < 120; i++) { a = 4 * rand() - 2; b = 4 * rand() - 2;
    f = 2 * sin(2 * a) + b; printf "%.6f,%.6f,%d\n", a, b, rand() < 1 / (1 + exp(-2 * f)) ? 1 : 0 } }' \
    | csv_to_json abin '"method":"auto","likelihood":"bernoulli","budget_s":20,"async":false,' >"$T/abin.json"
check_json "auto bernoulli fit, async false -> 201 (waits)" 201 $M @"$T/abin.json"
jhas '.method_info.leaderboard as $l | (.method == "svgp" or .method == "pls")
      and ([$l[].method] - ["svgp", "pls"] | length) == 0
      and (.validation.log_loss | type == "number")
      and ([$l[] | select(.status == "done")] | min_by(.nlpd)) as $b
      | ([$l[] | select(.chosen)][0].nlpd) <= $b.nlpd + $b.nlpd_sd / (5 | sqrt) + 1e-12'
verdict "bernoulli: svgp or pls, picked by log loss" $? "$(jqb '{method, lb: [.method_info.leaderboard[] | {method, status, nlpd, accuracy}]}')"

# ---- cancel
gen_xy 400 3 4 | csv_to_json acan '"method":"auto","budget_s":120,' >"$T/acan.json"
check_json "auto fit to cancel -> 202" 202 $M @"$T/acan.json"
CJ=$(jstr job)
sleep 1
req DELETE "/v1/jobs/$CJ"
case $ST in 200 | 202 | 204) pass "DELETE the auto job -> $ST" ;; *) fail "DELETE the auto job" "status $ST" body ;; esac
wait_job "$CJ" cancelled
verdict "the auto job ends cancelled" $? "$(jqb '{status, error}')"

# ---- bad input
B='"method":"auto","X":[[0],[1],[2],[3],[4],[5],[6],[7],[8],[9],[10],[11]],"y":[0,1,0,1,0,1,0,1,0,1,0,2]'
check_jerr "budget_s 0 -> 400" 400 invalid_argument '^budget_s$' $M "{\"name\":\"ab\",$B,\"budget_s\":0}"
check_jerr "budget_s string -> 400" 400 invalid_argument '^budget_s$' $M "{\"name\":\"ab\",$B,\"budget_s\":\"x\"}"
check_jerr "budget_s -1 -> 400" 400 invalid_argument '^budget_s$' $M "{\"name\":\"ab\",$B,\"budget_s\":-1}"
check_jerr "budget_s 1e9 -> 400" 400 invalid_argument '^budget_s$' $M "{\"name\":\"ab\",$B,\"budget_s\":1e9}"
check_jerr "budget_s on exact -> 422" 422 unsupported '^budget_s$' $M \
    '{"name":"ab","method":"exact","budget_s":5,"X":[[0],[1],[2]],"y":[0,1,2]}'
check_jerr "auto with another method's option -> 422 naming it" 422 unsupported '^options\.inducing$' $M \
    "{\"name\":\"ab\",$B,\"options\":{\"inducing\":5}}"
check_jerr "auto with validation false -> 400" 400 invalid_argument '^validation$' $M \
    "{\"name\":\"ab\",$B,\"validation\":false}"
check_jerr "auto with an unknown key -> 400" 400 invalid_argument '^budget$' $M \
    "{\"name\":\"ab\",$B,\"budget\":5}"
check_jerr "auto, budget too small for any candidate -> 422" 422 unsupported '^budget_s$' $M \
    "{\"name\":\"ab\",$B,\"budget_s\":0.01}"

# ---- a symmetry makes hkd a candidate, with the request's symmetry
awk 'BEGIN { srand(8); for (i = 0; i < 80; i++) { a = 4 * rand() - 2; b = 4 * rand() - 2;
    printf "%.6f,%.6f,%.6f\n", a, b, cos(a) + b * b + 0.05 * (rand() - 0.5) } }' \
    | csv_to_json asym '"method":"auto","budget_s":60,"options":{"symmetry":{"generators":[{"type":"negate","dims":[0]}]}},' >"$T/asym.json"
check_json "auto with options.symmetry -> 202" 202 $M @"$T/asym.json"
wait_job "$(jstr job)" succeeded
verdict "the symmetry job succeeds" $? "$(jqb '{status, error}')"
jhas '[.model.method_info.leaderboard[] | select(.method == "hkd")][0]
      | .options.symmetry.generators[0].type == "negate" and (.status == "done" or .status == "failed")'
verdict "hkd is a candidate with the request's symmetry" $? "$(jqb '[.model.method_info.leaderboard[] | {method, status, nlpd, reason, options}]')"
check_jerr "auto with a symmetry beyond the inputs -> 4xx naming it" 400 invalid_argument 'options\.symmetry' $M \
    "{\"name\":\"ab\",$B,\"options\":{\"symmetry\":{\"generators\":[{\"type\":\"negate\",\"dims\":[5]}]}}}"

# ---- a CSV fit takes budget_s as a query parameter
{ echo "a,b,y"; gen_xy 40 2 3; } >"$T/acsv.csv"
check "CSV auto fit with ?budget_s -> 201" 201 POST "$M?name=acsv&method=auto&budget_s=20&async=false" \
    -H 'Content-Type: text/csv' --data-binary @"$T/acsv.csv"
jhas '(.method_info.leaderboard | length) >= 3 and .method_info.auto.budget_s == 20'
verdict "the CSV fit's leaderboard and budget" $? "$(jqb '.method_info.auto')"

# ---- durable: a daemon killed during an auto job, restarted on its file, runs it again
AU_MAIN_PORT=$PORT
if start_daemon "$T/auto1.log" --db "$T/auto.db" --job-lease 2; then
    PORT=$DPORT
    AU_PID=$DPID
    check_json "auto job on a daemon of its own -> 202" 202 $M @"$T/areg.json"
    AUJ=$(jstr job)
    sleep 1.5
    kill -KILL "$AU_PID" 2>/dev/null
    wait "$AU_PID" 2>/dev/null
    if start_daemon "$T/auto2.log" --db "$T/auto.db" --job-lease 2; then
        PORT=$DPORT
        wait_job "$AUJ" succeeded
        verdict "the restarted daemon runs the auto job to its end" $? "$(jqb '{status, attempts, error}')"
        jhas '.attempts >= 2 and (.model.method_info.leaderboard | length) >= 3
              and ([.model.method_info.leaderboard[] | select(.chosen)][0].method == .model.method)'
        verdict "its model: the second attempt's leaderboard and winner" $? "$(jqb '{attempts, method: .model.method}')"
        stop_daemon "$DPID"
    else
        fail "a daemon restarts on the auto job's database" "see $T/auto2.log"
    fi
else
    fail "a daemon of its own for the restart case" "see $T/auto1.log"
fi
PORT=$AU_MAIN_PORT
