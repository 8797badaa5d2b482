#!/bin/sh
# Integration area "validation": a fit's validation report (docs/design/api.md,
# "Validation"). k folds and a hold-out part over HTTP (the report's fields,
# every held-out row scored once, the same report on GET); the default (on for
# 10..500 rows, off for fewer, off with false); every method and likelihood
# the daemon serves (exact, sgpr, ssgp, svgp, renyi, msrfr, pls, gwi, hkd with a
# symmetry, rfgp; svgp and pls bernoulli with the reliability table, svgp
# softmax with its top-label one, svgp and pls poisson and pls poisson_sq with
# count coverage; several outputs of sgpr, exact, svgp and rfgp; rfgp whose folds are
# below its warm-up 422 naming validation); an async validated job (its budget counts the folds and
# the final fit); a data set fit refused 422 naming validation; on a daemon of
# its own, the report kept with the version across a restart.
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "validation"

gen_xy 60 2 7 >"$T/val.csv"
csv_to_json vexact '"method":"exact","seed":2,"validation":{"folds":4},' <"$T/val.csv" >"$T/vexact.json"
check_json "exact fit with 4 folds" 201 $M @"$T/vexact.json"
cp "$T/body" "$T/vexact_fit.json"
jhas '.validation | .folds == 4 and (.per_fold | length) == 4 and ([.per_fold[].n] | add) == 60
      and .n == 60 and (.rmse | type == "number") and (.nlpd | type == "number")
      and ([.coverage["0.5", "0.9", "0.95"] | select(. >= 0 and . <= 1)] | length) == 3
      and (.calibration | length) == 11 and .seconds > 0 and .default == false
      and .stratified == false and .seed == 2 and (.sd.nlpd | type == "number")'
verdict "exact: the report's fields, every row held out once" $? "$(jqb '.validation | del(.calibration)')"
jhas '.validation as $v | ([.validation.per_fold[].nlpd] | add / length) as $m | ($m - $v.nlpd | fabs) < 1e-12'
verdict "exact: nlpd is the mean of the folds'" $? "$(jqb '.validation.nlpd')"
req GET "$M/vexact"
jq -e --slurpfile f "$T/vexact_fit.json" '.validation == $f[0].validation' "$T/body" >/dev/null
verdict "GET /v1/models/vexact shows the fit's report" $? "$(jqb '.validation.nlpd')"
req GET "$M/vexact/versions/1"
jq -e --slurpfile f "$T/vexact_fit.json" '.validation == $f[0].validation' "$T/body" >/dev/null
verdict "GET .../versions/1 shows it too" $? "$(jqb '.validation.nlpd')"

csv_to_json vhold '"method":"exact","seed":2,"validation":{"fraction":0.25,"seed":9},' <"$T/val.csv" >"$T/vhold.json"
check_json "exact fit with a hold-out quarter" 201 $M @"$T/vhold.json"
jhas '.validation | .fraction == 0.25 and .seed == 9 and (.per_fold | length) == 1 and .n == 15 and .sd.nlpd == 0'
verdict "hold-out: 15 of 60 rows, one fold, no spread" $? "$(jqb '.validation | del(.calibration)')"

# ---- the default
csv_to_json vdef '"method":"exact","seed":2,' <"$T/val.csv" >"$T/vdef.json"
check_json "exact fit without validation" 201 $M @"$T/vdef.json"
jhas '.validation | .default == true and .folds == 5 and .n == 60'
verdict "60 rows: 5 folds by default" $? "$(jqb '.validation | {default, folds, n}')"
csv_to_json voff '"method":"exact","seed":2,"validation":false,' <"$T/val.csv" >"$T/voff.json"
check_json "exact fit with validation false" 201 $M @"$T/voff.json"
jhas 'has("validation") | not'
verdict "validation false: no report" $? "$(jqb '.validation | type')"
head -n 6 "$T/val.csv" | csv_to_json vsmall '"method":"exact",' >"$T/vsmall.json"
check_json "exact fit of 6 rows" 201 $M @"$T/vsmall.json"
jhas 'has("validation") | not'
verdict "6 rows: no report by default" $? "$(jqb '.validation | type')"

# ---- every likelihood
awk 'BEGIN {
    srand(17);
    for (i = 0; i < 90; i++) {
        a = 4 * rand() - 2; b = 4 * rand() - 2; f = 2 * sin(2 * a) + cos(b);
        y = rand() < 1 / (1 + exp(-2 * f)) ? 1 : 0; c = int(exp(0.5 + 0.5 * f) + rand());
        k = f < -0.5 ? 0 : (f < 1 ? 1 : 2);
        printf "%.6f,%.6f,%d,%d,%d\n", a, b, y, c, k;
    }
}' >"$T/vlik.csv"
lik_fit() { # NAME METHOD LIKELIHOOD COLUMN [OPTIONS]
    _lo=${5:-'{"max_iterations":60,"inducing":12}'}
    awk -F, -v c="$4" '{ print $1 "," $2 "," $c }' "$T/vlik.csv" |
        csv_to_json "$1" "\"method\":\"$2\",\"likelihood\":\"$3\",\"seed\":1,\"options\":$_lo,\"validation\":{\"folds\":3}," >"$T/$1.json"
    check_json "$2 $3 fit with 3 folds" 201 $M @"$T/$1.json"
}
lik_fit vbin svgp bernoulli 3
jhas '.validation | .stratified == true and (.log_loss | type == "number") and .accuracy >= 0.5
      and .accuracy <= 1 and (has("rmse") | not) and ([.reliability[].count] | add) == 90
      and ([.reliability[] | select(.mean_predicted >= .lower and .mean_predicted <= .upper)] | length) == (.reliability | length)'
verdict "svgp bernoulli: log loss, accuracy, a reliability table of 90 rows" $? "$(jqb '.validation')"
lik_fit vcount svgp poisson 4
jhas '.validation | (.nlpd | type == "number") and (.rmse | type == "number")
      and (.coverage["0.95"] >= .coverage["0.5"]) and (.calibration | length) == 11'
verdict "svgp poisson: count nlpd, rmse, coverage" $? "$(jqb '.validation | del(.calibration)')"
lik_fit vclass svgp softmax 5
jhas '.validation | .stratified == true and (.log_loss | type == "number") and .accuracy > 0.34'
verdict "svgp softmax: log loss and accuracy" $? "$(jqb '.validation')"
csv_to_json vms '"method":"msrfr","seed":1,"options":{"particles":4,"features":30,"iterations":40},"validation":{"folds":3},' <"$T/val.csv" >"$T/vms.json"
check_json "msrfr fit with 3 folds" 201 $M @"$T/vms.json"
jhas '.validation | (.nlpd | type == "number") and (.coverage["0.9"] | type == "number")'
verdict "msrfr: its mixture's nlpd and coverage" $? "$(jqb '.validation | del(.calibration)')"

lik_fit vpbin pls bernoulli 3 '{}'
jhas '.validation | .stratified == true and (.log_loss | type == "number") and .accuracy >= 0.5
      and .accuracy <= 1 and ([.reliability[].count] | add) == 90'
verdict "pls bernoulli: log loss, accuracy, a reliability table of 90 rows" $? "$(jqb '.validation | del(.reliability)')"
req GET "$M/vclass"
jhas '.validation as $v | ([$v.reliability[] | .observed * .count] | add) as $hits
      | ($hits - $v.accuracy * 90 | fabs) < 1e-6 and ([$v.reliability[].count] | add) == 90
      and all($v.reliability[]; .lower >= 0.3 and .mean_predicted >= .lower and .mean_predicted <= .upper)'
verdict "svgp softmax: a top-label reliability table whose hits are the correct rows (p >= 1/3)" $? \
    "$(jqb '.validation.reliability')"

# ---- every method the daemon serves: the fields, coverage in [0, 1], nlpd finite
# (JSON carries no non-finite number: a number is finite)
REG_OK='.validation | (.rmse | type == "number") and (.nlpd | type == "number") and .n > 0
      and ([.coverage["0.5", "0.9", "0.95"] | select(type == "number" and . >= 0 and . <= 1)] | length) == 3
      and (.calibration | length) == 11 and all(.calibration[]; .coverage >= 0 and .coverage <= 1)
      and (.per_fold | length) == 3 and .default == false and .seconds > 0'
reg_fit() { # NAME METHOD OPTIONS
    csv_to_json "$1" "\"method\":\"$2\",\"seed\":1,\"options\":$3,\"validation\":{\"folds\":3}," \
        <"$T/val.csv" >"$T/$1.json"
    check_json "$2 fit with 3 folds" 201 $M @"$T/$1.json"
    jhas "$REG_OK"
    verdict "$2: rmse, finite nlpd, coverage and calibration in [0, 1], 3 folds" $? \
        "$(jqb '.validation | del(.calibration, .per_fold)')"
}
reg_fit vrenyi renyi '{"inducing":12,"max_iterations":60}'
reg_fit vsgpr sgpr '{"inducing":12,"max_iterations":60}'
reg_fit vssgp ssgp '{"features":30,"max_iterations":60}'
reg_fit vsvgpg svgp '{"inducing":12,"max_iterations":60}'
reg_fit vplsg pls '{}'
reg_fit vgwi gwi '{}'
reg_fit vhkd hkd '{"inducing":12,"symmetry":{"generators":[{"type":"negate","dims":[0,1]}],"resolve":"per_axis_real","share_inducing":true,"validate":false}}'
jhas '.method == "hkd" and .method_info.n_blocks == 2'
verdict "hkd: validated with its symmetry's two blocks" $? "$(jqb '.method_info | tostring')"
reg_fit vrfgp rfgp '{"input":{"kind":"point","dim":2},"features":32,"warmup":20}'
csv_to_json vrfgpw '"method":"rfgp","seed":1,"options":{"input":{"kind":"point","dim":2},"features":32,"warmup":50},"validation":{"folds":3},' \
    <"$T/val.csv" >"$T/vrfgpw.json"
check_jerr "rfgp whose training parts (40 rows) are below its warm-up (50)" 422 unsupported '^validation$' \
    $M @"$T/vrfgpw.json"
check "nothing stored for it" 404 GET "$M/vrfgpw"

# counts: count nlpd, rmse of the count's mean, coverage in [0, 1] and nested
CNT_OK='.validation | (.rmse | type == "number") and (.nlpd | type == "number") and (has("log_loss") | not)
      and ([.coverage["0.5", "0.9", "0.95"] | select(type == "number" and . >= 0 and . <= 1)] | length) == 3
      and .coverage["0.5"] <= .coverage["0.9"] and .coverage["0.9"] <= .coverage["0.95"]
      and (.calibration | length) == 11'
lik_fit vppois pls poisson 4 '{}'
jhas "$CNT_OK"
verdict "pls poisson: count nlpd, rmse, nested coverage in [0, 1]" $? "$(jqb '.validation | del(.calibration)')"
lik_fit vppsq pls poisson_sq 4 '{}'
jhas "$CNT_OK"
verdict "pls poisson_sq: count nlpd, rmse, nested coverage in [0, 1]" $? "$(jqb '.validation | del(.calibration)')"

# several outputs: a report per output, the top level's nlpd their mean
awk -F, '{ r = r (NR > 1 ? "," : "") "[" $1 "," $2 "]";
           y = y (NR > 1 ? "," : "") sprintf("[%s,%.6f]", $3, 0.5 * $3 + $1) }
    END { printf "\"X\":[%s],\"y\":[%s]}", r, y }' "$T/val.csv" >"$T/val2_xy.txt"
mo_fit() { # NAME METHOD OPTIONS
    printf '{"name":"%s","method":"%s","seed":1,"options":%s,"validation":{"folds":3},' "$1" "$2" "$3" >"$T/$1.json"
    cat "$T/val2_xy.txt" >>"$T/$1.json"
    check_json "$2 fit of two outputs with 3 folds" 201 $M @"$T/$1.json"
    jhas "$REG_OK"' and (.per_output | length) == 2
          and ((.per_output[0].nlpd + .per_output[1].nlpd) / 2 - .nlpd | fabs) < 1e-9
          and all(.per_output[]; [.coverage[] | select(. >= 0 and . <= 1)] | length == 3)'
    verdict "$2, two outputs: a report per output, nlpd their mean" $? "$(jqb '.validation | del(.calibration, .per_fold)')"
}
mo_fit vmosgpr sgpr '{"inducing":12,"max_iterations":60,"coregionalization":{"type":"icm","rank":1}}'
mo_fit vmoexact exact '{"coregionalization":{"type":"icm","rank":1}}'
mo_fit vmosvgp svgp '{"inducing":12,"max_iterations":60,"coregionalization":{"type":"icm","rank":1}}'
mo_fit vmorfgp rfgp '{"input":{"kind":"point","dim":2},"features":32,"warmup":20}'

# ---- an async job counts the folds
csv_to_json vjob '"method":"sgpr","seed":1,"async":true,"options":{"max_iterations":30,"inducing":10},"validation":{"folds":3},' <"$T/val.csv" >"$T/vjob.json"
check_json "async sgpr fit with 3 folds" 202 $M @"$T/vjob.json"
VJ=$(jstr job)
req GET "/v1/jobs/$VJ"
jhas '.progress.max_iterations == 120'
verdict "the job's budget: 3 folds and the final fit of 30 iterations" $? "$(jqb '.progress')"
if wait_job "$VJ" succeeded; then
    jhas '.model.validation.folds == 3 and (.model.validation.per_fold | length) == 3'
    verdict "the job's model has the report" $? "$(jqb '.model.validation | type')"
else
    fail "async validated job succeeds" "status '$JOB_STATUS'" body
fi

# ---- the default report: made after the fit, the job's budget the fit's alone
csv_to_json vdef '"method":"sgpr","seed":1,"async":true,"options":{"max_iterations":30,"inducing":10},' <"$T/val.csv" >"$T/vdef.json"
check_json "async sgpr fit, validation by default" 202 $M @"$T/vdef.json"
VD=$(jstr job)
req GET "/v1/jobs/$VD"
jhas '.progress.max_iterations == 30'
verdict "the default report leaves the job's budget the fit's (30)" $? "$(jqb '.progress')"
if wait_job "$VD" succeeded; then
    jhas '.model.validation.folds == 5 and (.model.validation.per_fold | length) == 5 and .progress.iteration <= 30'
    verdict "the default job's model has a 5-fold report, progress within the budget" $? "$(jqb '{v: .model.validation.folds, p: .progress}')"
else
    fail "async job with the default report succeeds" "status '$JOB_STATUS'" body
fi

# ---- a data set's rows are streamed: no validation
printf 'a,b,y\n' >"$T/vds.csv"
cat "$T/val.csv" >>"$T/vds.csv"
check "PUT a data set" 201 PUT /v1/datasets/vds -H 'Content-Type: text/csv' --data-binary @"$T/vds.csv"
check_jerr "validation of a data set fit" 422 unsupported '^validation$' $M \
    '{"name":"vdsfit","method":"sgpr","data":{"dataset":"vds","target":"y"},"validation":{"folds":3}}'

# ---- kept with the version across a restart (a daemon of its own)
VDB=$(db_for validation)
if start_daemon "$T/vd.log" --db "$VDB"; then
    VP=$DPORT
    curl -sS -o "$T/vr1.json" -H 'Content-Type: application/json' --data-binary @"$T/vexact.json" \
        "http://127.0.0.1:$VP/v1/models" >/dev/null
    stop_daemon "$DPID"
    if start_daemon "$T/vd2.log" --db "$VDB"; then
        curl -sS -o "$T/vr2.json" "http://127.0.0.1:$DPORT/v1/models/vexact" >/dev/null
        jq -e --slurpfile a "$T/vr1.json" '.validation == $a[0].validation and (.validation.per_fold | length) == 4' \
            "$T/vr2.json" >/dev/null
        verdict "the report comes back after a restart" $? "$(head -c 300 "$T/vr2.json")"
        jq -e --slurpfile a "$T/vexact_fit.json" '.validation.nlpd == $a[0].validation.nlpd' "$T/vr2.json" >/dev/null
        verdict "the same seed gives the same report on another daemon" $? "$(jq -c .validation.nlpd "$T/vr2.json")"
        stop_daemon "$DPID"
    else
        fail "validation daemon restarts" "no start"
    fi
else
    fail "validation daemon starts" "no start"
fi
