#!/bin/sh
# Integration area "hkd": harmonic kernel decomposition over HTTP, and its
# structured option "symmetry" (a JSON object). The listing (an object option
# with its schema; additive); a sync fit of 200 rows of a function even under
# x -> -x with an explicit symmetry, and the CSV path (?options= as JSON
# text); method_info; predict (mean, variance, latent, full covariance,
# quantiles) and "components" (2 parts, symmetric and antisymmetric, whose
# means add up to the mean and variances to the latent variance); samples; an
# async fit; every bad symmetry with its exact status and field, the ones that
# need X's columns refused before an async fit becomes a job. Predict,
# components and sample bodies are remembered: the restart area replays them
# bit for bit.
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "hkd"

# 200 rows of f(a, b) = cos(1.3 a) cos(0.9 b) + 0.5 a b on [-2, 2]^2, with a
# little noise: f(-x) = f(x).
awk 'BEGIN {
    srand(41);
    for (i = 0; i < 200; i++) {
        a = 4 * rand() - 2; b = 4 * rand() - 2;
        printf "%.6f,%.6f,%.6f\n", a, b, cos(1.3 * a) * cos(0.9 * b) + 0.5 * a * b + 0.05 * (rand() - 0.5);
    }
}' >"$T/hkd.csv"
HX='[[0.1,-0.3],[1.2,0.4],[-1.5,1.9],[0.0,0.0],[-0.7,-1.1]]'
HSYM='{"generators":[{"type":"negate","dims":[0,1]}],"resolve":"per_axis_real","share_inducing":true,"validate":true}'
# A tiny body for the requests that must be refused (2 columns).
HB='"X":[[0,1],[1,0],[2,2],[0.5,0.3]],"y":[1,2,3,2]'

# ---- the listing
check "GET /v1/methods" 200 GET /v1/methods
jq '.methods[] | select(.name == "hkd")' "$T/body" >"$T/hkd_listing.json"
jhas '.additive == true and .mixture == false' "$T/hkd_listing.json"
verdict "hkd: listed as additive, not a mixture" $? "$(jqb '{additive, mixture}' "$T/hkd_listing.json")"
jhas '.options[] | select(.name == "symmetry") | .type == "object" and .default == null and
      .schema.type == "object" and .schema.additionalProperties == false and
      (.schema.properties.generators.items.properties.type.enum | index("rotate2d")) and
      (.help | length > 0)' "$T/hkd_listing.json"
verdict "hkd: symmetry is an object option with its schema" $? "$(jqb '.options[0]' "$T/hkd_listing.json")"
jhas '[.methods[] | select(.name != "hkd") | .additive] | all(. == false)'
verdict "no other method is additive" $? "some is"

# ---- the sync fit (JSON)
csv_to_json hk "\"method\":\"hkd\",\"seed\":3,\"options\":{\"inducing\":24,\"symmetry\":$HSYM}," <"$T/hkd.csv" >"$T/hkd_fit.json"
check_json "fit hkd with an explicit symmetry" 201 $M @"$T/hkd_fit.json"
[ "$(jstr method)" = hkd ] && [ "$(jqb '.diagnostics.objective_name')" = elbo ]
verdict "hkd: the fit reports the method and its objective (elbo)" $? "$(jqb '{method, o: .diagnostics.objective_name}')"
check "GET the hkd model" 200 GET /v1/models/hk
jhas '.method_info | (.n_blocks == 2) and (.group_size == 2) and (.collapsed_bound | type == "number") and
      (.pcg_iterations | type == "number" and . >= 1) and (.pcg_residual | type == "number" and . >= 0 and . < 1e-6)'
verdict "hkd: method_info has n_blocks 2, group_size 2, collapsed_bound, pcg_iterations, pcg_residual" $? \
    "$(jqb '.method_info | tostring')"
jhas '.method_info.collapsed_bound == .diagnostics.objective'
verdict "hkd: collapsed_bound is the objective" $? "differ"

# ---- predict
check_json "hkd: predict" 200 "$M/hk/predict" "{\"X\":$HX}"
cp "$T/body" "$T/hkd_pred.json"
jhas '(.mean | length) == 5 and (.variance | length) == 5 and all(.variance[]; . > 0)'
verdict "hkd: 5 means, 5 positive variances" $? "wrong shape"
# the function itself, within the data's noise and the fit's error
jq -e --argjson x "$HX" '[.mean, ($x | map(((1.3 * .[0]) | cos) * ((0.9 * .[1]) | cos) + 0.5 * .[0] * .[1]))] |
      transpose | all(((.[0] - .[1]) | fabs) < 0.05)' "$T/body" >/dev/null 2>&1
verdict "hkd: the mean follows f (0.05)" $? "$(jqb '.mean | tostring')"
check_json "hkd: latent predict with covariance and quantiles" 200 "$M/hk/predict" \
    "{\"X\":$HX,\"include_noise\":false,\"full_covariance\":true,\"quantiles\":[0.05,0.5,0.95]}"
cp "$T/body" "$T/hkd_lat.json"
jq -n --slurpfile o "$T/hkd_pred.json" --slurpfile l "$T/hkd_lat.json" -e \
    '[$o[0].variance, $l[0].variance] | transpose | all(.[0] > .[1] and .[1] > 0)' >/dev/null
verdict "hkd: observation variance > latent variance > 0" $? "not ordered"
jhas '(.covariance | length) == 5 and all(.covariance[]; length == 5) and
      ([range(5) as $i | [.covariance[$i][$i], .variance[$i]]] | all(((.[0] - .[1]) | fabs) <= 1e-9 * .[1]))'
verdict "hkd: the covariance's diagonal is the latent variance" $? "differs"
jhas '[.quantiles["0.05"], .quantiles["0.5"], .quantiles["0.95"], .mean] | transpose |
      all(.[0] < .[1] and .[1] < .[2] and ((.[1] - .[3]) | fabs) <= 1e-12 * (1 + (.[3] | fabs)))'
verdict "hkd: quantiles ordered, the median is the mean" $? "$(jqb '.quantiles | tostring')"
remember hkd-predict "$M/hk/predict" "{\"X\":$HX,\"full_covariance\":true,\"quantiles\":[0.1,0.9]}"

# ---- components: the additive parts
check_json "hkd: predict components (latent)" 200 "$M/hk/predict" \
    "{\"X\":$HX,\"include_noise\":false,\"components\":true}"
jhas '.components.kind == "additive" and .components.names == ["symmetric", "antisymmetric"] and
      (.components.mean | length) == 2 and all(.components.mean[]; length == 5) and
      (.components.variance | length) == 2 and all(.components.variance[]; length == 5)'
verdict "hkd components: kind additive, parts symmetric and antisymmetric, 2 x 5 values" $? \
    "$(jqb '.components | {kind, names}')"
jhas '[.variance, (.components.variance | transpose | map(add))] | transpose |
      all(((.[0] - .[1]) | fabs) <= 1e-9 * .[0])'
verdict "hkd components: the parts' variances sum to the latent variance (1e-9 relative)" $? \
    "$(jqb '[.variance, (.components.variance | transpose | map(add))] | tostring')"
jhas '[.mean, (.components.mean | transpose | map(add))] | transpose |
      all(((.[0] - .[1]) | fabs) <= 1e-9 * (1 + (.[0] | fabs)))'
verdict "hkd components: the parts' means sum to the mean" $? \
    "$(jqb '[.mean, (.components.mean | transpose | map(add))] | tostring')"
jhas 'all(.components.variance[][]; . >= 0)'
verdict "hkd components: no negative variance" $? "negative"
check_json "hkd: predict components with noise" 200 "$M/hk/predict" "{\"X\":$HX,\"components\":true}"
jq -n --slurpfile a "$T/body" --slurpfile b "$T/hkd_pred.json" -e \
    '$a[0].mean == $b[0].mean and $a[0].variance == $b[0].variance' >/dev/null
verdict "hkd: components change nothing else of the answer" $? "mean or variance differ"
remember hkd-components "$M/hk/predict" "{\"X\":$HX,\"include_noise\":false,\"components\":true,\"quantiles\":[0.25]}"

# ---- samples
check_json "hkd: sample" 200 "$M/hk/sample" "{\"X\":$HX,\"n_samples\":4,\"seed\":9}"
cp "$T/body" "$T/hkd_sample.json"
jmat samples | awk -F, '{ if (NF != 5) bad = 1; n++ } END { exit bad || n != 4 }'
verdict "hkd: 4 joint draws of 5 points" $? "wrong shape"
check_json "hkd: sample again" 200 "$M/hk/sample" "{\"X\":$HX,\"n_samples\":4,\"seed\":9}"
cmp -s "$T/body" "$T/hkd_sample.json"
verdict "hkd: the same seed gives the same samples" $? "bodies differ"
remember hkd-sample "$M/hk/sample" "{\"X\":$HX,\"n_samples\":4,\"seed\":9}"

# ---- the defaults: no symmetry (negate every input) and no generators (one block)
csv_to_json hk-default '"method":"hkd","seed":3,"options":{"inducing":16},' <"$T/hkd.csv" >"$T/hkd_def.json"
check_json "fit hkd without a symmetry (negate every input)" 201 $M @"$T/hkd_def.json"
jhas '.method_info.n_blocks == 2 and .method_info.group_size == 2'
verdict "hkd default: 2 blocks" $? "$(jqb '.method_info | tostring')"
csv_to_json hk-one '"method":"hkd","seed":3,"options":{"inducing":16,"symmetry":{"generators":[]}},' <"$T/hkd.csv" >"$T/hkd_one.json"
check_json "fit hkd with no generators (one block)" 201 $M @"$T/hkd_one.json"
jhas '.method_info.n_blocks == 1 and .method_info.group_size == 1'
verdict "hkd generators []: 1 block" $? "$(jqb '.method_info | tostring')"
check_json "hkd one block: predict components" 200 "$M/hk-one/predict" "{\"X\":$HX,\"components\":true}"
jhas '.components.kind == "additive" and (.components.names | length) == 1'
verdict "hkd one block: one part" $? "$(jqb '.components | tostring')"

# ---- the CSV path takes the object as JSON text in ?options=
{
    echo "a,b,y"
    cat "$T/hkd.csv"
} >"$T/hkd_h.csv"
opts=$(printf '{"inducing":24,"symmetry":%s}' "$HSYM" | jq -sRr @uri)
check "fit hkd from CSV with ?options= (the symmetry as JSON text)" 201 POST \
    "$M?name=hk-csv&method=hkd&seed=3&options=$opts" -H 'Content-Type: text/csv' --data-binary @"$T/hkd_h.csv"
check_json "hkd CSV model: predict" 200 "$M/hk-csv/predict" "{\"X\":$HX}"
jq -n --slurpfile a "$T/body" --slurpfile b "$T/hkd_pred.json" -e \
    '$a[0].mean == $b[0].mean and $a[0].variance == $b[0].variance' >/dev/null
verdict "hkd: the CSV fit predicts exactly as the JSON fit" $? "differ"
bad_csv_opts=$(printf '{"symmetry":{"generators":[{"type":"negate","dims":[5]}]}}' | jq -sRr @uri)
check_err "hkd CSV: a dimension beyond X's columns" 400 invalid_argument \
    '^options\.symmetry\.generators\[0\]\.dims\[0\]$' POST \
    "$M?name=hk-bad&method=hkd&options=$bad_csv_opts" -H 'Content-Type: text/csv' --data-binary @"$T/hkd_h.csv"

# ---- an async fit
csv_to_json hk-async "\"method\":\"hkd\",\"seed\":4,\"async\":true,\"validation\":false,\"options\":{\"inducing\":12,\"max_iterations\":20,\"symmetry\":$HSYM}," <"$T/hkd.csv" >"$T/hkd_async.json"
check_json "hkd: async fit" 202 $M @"$T/hkd_async.json"
hjob=$(jstr job)
if [ -n "$hjob" ] && wait_job "$hjob" succeeded; then
    pass "hkd: the job succeeds"
    jhas '.model.method == "hkd" and .model.method_info.n_blocks == 2 and .progress.max_iterations == 20'
    verdict "hkd: the job's model and budget (max_iterations 20)" $? "$(jqb '{m: .model.method, p: .progress}')"
else
    fail "hkd: the job succeeds" "job '$hjob' status '$JOB_STATUS'" body
fi

# ---- a Z per block ("share_inducing": false, issue 40)
HSYM_PB='{"generators":[{"type":"negate","dims":[0,1]}],"share_inducing":false}'
csv_to_json hk-pb "\"method\":\"hkd\",\"seed\":3,\"options\":{\"inducing\":8,\"max_iterations\":10,\"symmetry\":$HSYM_PB}," <"$T/hkd.csv" >"$T/hkd_pb.json"
check_json "fit hkd with a Z per block" 201 $M @"$T/hkd_pb.json"
check "GET the per-block hkd model" 200 GET /v1/models/hk-pb
jhas '.method_info | .inducing_per_block == 1 and .inducing == 8 and .n_blocks == 2'
verdict "hkd: method_info says the blocks have their own Z" $? "$(jqb '.method_info | tostring')"
check_json "hkd per block: predict" 200 "$M/hk-pb/predict" "{\"X\":$HX}"
jhas '(.mean | length) == 5 and all(.variance[]; . > 0)'
verdict "hkd per block: 5 means, positive variances" $? "wrong shape"
check "delete the per-block hkd model" 204 DELETE /v1/models/hk-pb

# ---- bad symmetries: status, code and field of each
hbad() { # NAME STATUS CODE FIELD_REGEX OPTIONS_JSON [EXTRA_FIELDS]
    check_jerr "hkd: $1" "$2" "$3" "$4" $M \
        "{\"name\":\"hk-bad\",\"method\":\"hkd\",${6:+$6,}\"options\":$5,$HB}"
}
hbad "symmetry not an object (an array)" 400 invalid_argument '^options\.symmetry$' \
    '{"symmetry":[{"type":"negate","dims":[0]}]}'
hbad "symmetry not an object (a string)" 400 invalid_argument '^options\.symmetry$' '{"symmetry":"negate"}'
hbad "symmetry: unknown member" 400 invalid_argument '^options\.symmetry\.colour$' '{"symmetry":{"colour":1}}'
jqb .error.message | grep -q "colour"
verdict "hkd: the refusal names the unknown member" $? "$(jqb .error.message)"
hbad "generator: unknown member" 400 invalid_argument '^options\.symmetry\.generators\[0\]\.axis$' \
    '{"symmetry":{"generators":[{"type":"negate","dims":[0],"axis":1}]}}'
hbad "generators not an array" 400 invalid_argument '^options\.symmetry\.generators$' \
    '{"symmetry":{"generators":{"type":"negate","dims":[0]}}}'
hbad "generator not an object" 400 invalid_argument '^options\.symmetry\.generators\[0\]$' \
    '{"symmetry":{"generators":["negate"]}}'
hbad "unknown generator type" 400 invalid_argument '^options\.symmetry\.generators\[1\]\.type$' \
    '{"symmetry":{"generators":[{"type":"negate","dims":[0]},{"type":"mirror","dims":[1]}]}}'
hbad "negative dimension" 400 invalid_argument '^options\.symmetry\.generators\[0\]\.dims\[1\]$' \
    '{"symmetry":{"generators":[{"type":"negate","dims":[0,-1]}]}}'
hbad "dimension beyond X's columns" 400 invalid_argument '^options\.symmetry\.generators\[0\]\.dims\[1\]$' \
    '{"symmetry":{"generators":[{"type":"negate","dims":[0,2]}]}}'
hbad "dimension beyond X's columns, async: 400, not 202" 400 invalid_argument \
    '^options\.symmetry\.generators\[0\]\.dims\[1\]$' \
    '{"symmetry":{"generators":[{"type":"negate","dims":[0,2]}]}}' '"async":true'
hbad "translate dim beyond X's columns, async: 400, not 202" 400 invalid_argument \
    '^options\.symmetry\.generators\[0\]\.dim$' \
    '{"symmetry":{"generators":[{"type":"translate","dim":7,"period":360,"order":4}]}}' '"async":true'
hbad "negative dimension, async: 400, not 202" 400 invalid_argument \
    '^options\.symmetry\.generators\[0\]\.dims\[0\]$' \
    '{"symmetry":{"generators":[{"type":"rotate2d","dims":[-1,0],"order":4}]}}' '"async":true'
hbad "rotate2d with an ARD kernel" 422 unsupported '^options\.symmetry\.generators\[0\]$' \
    '{"inducing":3,"symmetry":{"generators":[{"type":"rotate2d","dims":[0,1],"order":4}]}}' \
    '"kernel":{"type":"rbf","ard":true}'
jqb .error.message | grep -q "rotate2d"
verdict "hkd: the refusal names the generator" $? "$(jqb .error.message)"
hbad "rotate2d order 1" 400 invalid_argument '^options\.symmetry\.generators\[0\]\.order$' \
    '{"symmetry":{"generators":[{"type":"rotate2d","dims":[0,1],"order":1}]}}' '"kernel":{"type":"rbf","ard":false}'
hbad "rotate2d without an order" 400 invalid_argument '^options\.symmetry\.generators\[0\]\.order$' \
    '{"symmetry":{"generators":[{"type":"rotate2d","dims":[0,1]}]}}' '"kernel":{"type":"rbf","ard":false}'
hbad "translate order 1" 400 invalid_argument '^options\.symmetry\.generators\[0\]\.order$' \
    '{"symmetry":{"generators":[{"type":"translate","dim":0,"period":360,"order":1}]}}'
hbad "share_inducing false with a translate generator, async: 422, not 202" 422 unsupported \
    '^options\.symmetry\.share_inducing$' \
    '{"symmetry":{"generators":[{"type":"translate","dim":0,"period":360,"order":4}],"share_inducing":false}}' \
    '"async":true'
hbad "share_inducing false with optimize_inducing false" 422 unsupported \
    '^options\.symmetry\.share_inducing$' \
    '{"optimize_inducing":false,"symmetry":{"generators":[],"share_inducing":false}}'
hbad "share_inducing not a boolean" 400 invalid_argument '^options\.symmetry\.share_inducing$' \
    '{"symmetry":{"share_inducing":"no"}}'
hbad "resolve other than per_axis_real" 400 invalid_argument '^options\.symmetry\.resolve$' \
    '{"symmetry":{"resolve":"complex"}}'
hbad "a number beyond a double" 400 invalid_argument '^options\.symmetry\.generators\[0\]\.period$' \
    '{"symmetry":{"generators":[{"type":"translate","dim":0,"period":1e999,"order":4}]}}'
deep='{"a":1}'
for _i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do deep="{\"a\":$deep}"; done
hbad "symmetry nested 17 deep" 400 invalid_argument '^options\.symmetry$' "{\"symmetry\":$deep}"
check_err "hkd: nothing of the refused fits was stored" 404 not_found - GET /v1/models/hk-bad
req GET /v1/models
jhas '[.models[].name] | index("hk-bad") | not'
verdict "hkd: no refused fit is listed" $? "hk-bad listed"
