#!/bin/sh
# Integration area "multiclass": the softmax likelihood over HTTP (issue 35). svgp
# fitted to labels 0..2 of a seeded 3-class set (JSON, CSV ?likelihood=softmax, async)
# with its quick preset; the model's "classes"; predict's "probabilities",
# "latent_mean" and "latent_variance" as rows of 3 and their invariants (each row sums
# to 1, mean = probabilities, variance = p(1 - p), the latents without noise); samples
# of the latents (rows of 3) and of labels (one per point and draw); OIP V2 metadata
# and infer with [-1, 3] tensors equal to v1's; bad input, each its own case with
# status and field. Predict and sample bodies are remembered after the model's last
# change: the restart area replays them bit for bit.
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "multiclass"

# Three classes by the angle around (0, 0) of a point of [-2, 2]^2, 1 in 20 flipped.
awk 'BEGIN {
    srand(35); pi = atan2(0, -1);
    for (i = 0; i < 90; i++) {
        a = 4 * rand() - 2; b = 4 * rand() - 2;
        c = int((atan2(b, a) + pi) / (2 * pi / 3)) % 3;
        if (rand() < 0.05) c = (c + 1) % 3;
        printf "%.6f,%.6f,%d\n", a, b, c;
    }
}' >"$T/mc.csv"
MCX='[[0.5,0.2],[-1.2,1.0],[1.9,-1.8],[0.0,0.0],[-0.4,-1.5]]'

# ---- the listing: svgp fits softmax, exact does not
check "multiclass: GET /v1/methods" 200 GET /v1/methods
cp "$T/body" "$T/mc_methods.json"
jhas '.methods[] | select(.name == "svgp") | .likelihoods | index("softmax") != null' "$T/mc_methods.json"
verdict "svgp lists softmax" $? "$(jq -c '.methods[] | select(.name == "svgp") | .likelihoods' "$T/mc_methods.json")"
MCQ=$(jq -c '.methods[] | select(.name == "svgp") | .quick' "$T/mc_methods.json")

# ---- fits: JSON, CSV, async
csv_to_json mc3 "\"method\":\"svgp\",\"likelihood\":\"softmax\",\"seed\":4,\"options\":$MCQ," <"$T/mc.csv" >"$T/mc3.json"
check_json "fit svgp softmax (JSON)" 201 $M @"$T/mc3.json"
jhas '.likelihood == "softmax" and .classes == 3 and (has("noise_variance") | not) and (has("outputs") | not)'
verdict "the fit answer: likelihood softmax, classes 3, no noise, no output names" $? "$(jq -c '{likelihood, classes, noise_variance, outputs}' "$T/body")"
check "GET the softmax model" 200 GET $M/mc3
jhas '.likelihood == "softmax" and .classes == 3'
verdict "GET shows likelihood softmax and classes 3" $? "$(jq -c '{likelihood, classes}' "$T/body")"
{
    echo "a,b,label"
    cat "$T/mc.csv"
} >"$T/mc_h.csv"
check "fit svgp softmax (CSV, ?likelihood=softmax)" 201 POST \
    "$M?name=mc3csv&method=svgp&likelihood=softmax&seed=4&options=$(printf '%s' "$MCQ" | jq -sRr @uri)" \
    -H 'Content-Type: text/csv' --data-binary @"$T/mc_h.csv"
jhas '.likelihood == "softmax" and .classes == 3'
verdict "the CSV fit is a softmax model of 3 classes" $? "$(jq -c '{likelihood, classes}' "$T/body")"
csv_to_json mc3async "\"method\":\"svgp\",\"likelihood\":\"softmax\",\"seed\":4,\"async\":true,\"options\":$MCQ," <"$T/mc.csv" >"$T/mc3async.json"
check_json "fit svgp softmax (async): 202" 202 $M @"$T/mc3async.json"
MCJOB=$(jstr job)
[ -n "$MCJOB" ] && wait_job "$MCJOB" succeeded
verdict "the async softmax job succeeds" $? "job '$MCJOB': $JOB_STATUS"
check "GET the async softmax model" 200 GET $M/mc3async
jhas '.likelihood == "softmax" and .classes == 3'
verdict "the async fit is a softmax model of 3 classes" $? "$(jq -c '{likelihood, classes}' "$T/body")"

# ---- predict
check_json "softmax: predict" 200 "$M/mc3/predict" "{\"X\":$MCX}"
cp "$T/body" "$T/mc_pred.json"
jhas '(.probabilities | length) == 5 and all(.probabilities[]; length == 3 and all(.[]; . > 0 and . < 1))'
verdict "softmax: 5 rows of 3 probabilities in (0, 1)" $? "$(jq -c .probabilities "$T/body")"
jhas 'all(.probabilities[]; ((add - 1) | fabs) <= 1e-9)'
verdict "softmax: each row of probabilities sums to 1" $? "$(jq -c '[.probabilities[] | add]' "$T/body")"
jhas '.mean == .probabilities'
verdict "softmax: mean is the probabilities" $? "differ"
jhas '[.variance, .probabilities] | transpose | all(transpose | all(((.[0] - .[1] * (1 - .[1])) | fabs) < 1e-15))'
verdict "softmax: variance is p(1 - p)" $? "differ"
jhas '(.latent_mean | length) == 5 and all(.latent_mean[]; length == 3) and (.latent_variance | length) == 5 and all(.latent_variance[]; length == 3 and all(.[]; . >= 0))'
verdict "softmax: latent_mean and latent_variance rows of 3" $? "$(jq -c '{latent_mean, latent_variance}' "$T/body")"
jhas '(has("probability") | not) and (has("outputs") | not) and (has("quantiles") | not)'
verdict "softmax: no probability, outputs or quantiles keys" $? "$(jq -c 'keys' "$T/body")"
check_json "softmax: latent predict" 200 "$M/mc3/predict" "{\"X\":$MCX,\"include_noise\":false}"
jhas '.mean == .latent_mean and .variance == .latent_variance and (.probabilities | length) == 5'
verdict "softmax: include_noise false gives the latents' moments" $? "differ"
jpost "$M/mc3/predict" "{\"X\":[$(printf '%s' "$MCX" | jq -c '.[0]')]}"
[ "$(jq -c '.probabilities[0]' "$T/body")" = "$(jq -c '.probabilities[0]' "$T/mc_pred.json")" ]
verdict "softmax: a point alone gets its probabilities among others bit for bit" $? "$(jq -c .probabilities "$T/body")"
remember "mc3-predict" "$M/mc3/predict" "{\"X\":$MCX}"
remember "mc3-latent" "$M/mc3/predict" "{\"X\":$MCX,\"include_noise\":false}"

# ---- samples: the latents, and labels with observations
check_json "softmax: sample with observations" 200 "$M/mc3/sample" "{\"X\":$MCX,\"n_samples\":4,\"seed\":3,\"observations\":true}"
jhas '(.samples | length) == 4 and all(.samples[]; length == 5 and all(.[]; length == 3))'
verdict "softmax: 4 latent draws of 5 rows of 3" $? "$(jq -c .samples "$T/body" | head -c 300)"
jhas '(.observations | length) == 4 and all(.observations[]; length == 5 and all(.[]; . == 0 or . == 1 or . == 2))'
verdict "softmax: 4 label draws of 5 labels in {0, 1, 2}" $? "$(jq -c .observations "$T/body")"
remember "mc3-sample" "$M/mc3/sample" "{\"X\":$MCX,\"n_samples\":4,\"seed\":3,\"observations\":true}"
check_jerr "softmax: sample include_noise" 422 unsupported include_noise "$M/mc3/sample" \
    "{\"X\":$MCX,\"include_noise\":true}"

# ---- OIP V2: metadata and infer
check "softmax: OIP model metadata" 200 GET /v2/models/mc3
jhas '[.outputs[].name] == ["mean", "variance", "latent_mean", "latent_variance", "probabilities"] and all(.outputs[]; .shape == [-1, 3] and .datatype == "FP64")'
verdict "softmax metadata: five [-1, 3] outputs with probabilities" $? "$(jq -c .outputs "$T/body")"
jpost /v2/models/mc3/infer "{\"inputs\":[{\"name\":\"X\",\"shape\":[5,2],\"datatype\":\"FP64\",\"data\":$(printf '%s' "$MCX" | jq -c flatten)}],\"outputs\":[{\"name\":\"probabilities\"},{\"name\":\"latent_mean\"}]}"
cp "$T/body" "$T/mc_oip.json"
jhas '.outputs[0].name == "probabilities" and .outputs[0].shape == [5, 3] and .outputs[1].shape == [5, 3]' "$T/mc_oip.json" &&
    [ "$(jq -c '.outputs[0].data' "$T/mc_oip.json")" = "$(jq -c '.probabilities | flatten' "$T/mc_pred.json")" ] &&
    [ "$(jq -c '.outputs[1].data' "$T/mc_oip.json")" = "$(jq -c '.latent_mean | flatten' "$T/mc_pred.json")" ]
verdict "softmax infer: [5, 3] probabilities and latent_mean, row-major, = v1 predict's" $? "$(jq -c . "$T/mc_oip.json" | head -c 300)"

# ---- bad input, each naming its field
MCB='"X":[[0],[1],[2],[3]]'
check_jerr "softmax: label 1.5" 422 invalid_data '^y\[1\]$' $M \
    "{\"name\":\"mcbad\",\"method\":\"svgp\",\"likelihood\":\"softmax\",$MCB,\"y\":[0,1.5,2,1]}"
check_jerr "softmax: label -1" 422 invalid_data '^y\[2\]$' $M \
    "{\"name\":\"mcbad\",\"method\":\"svgp\",\"likelihood\":\"softmax\",$MCB,\"y\":[0,1,-1,1]}"
check_jerr "softmax: label 64 (above the 64 classes)" 422 invalid_data '^y\[3\]$' $M \
    "{\"name\":\"mcbad\",\"method\":\"svgp\",\"likelihood\":\"softmax\",$MCB,\"y\":[0,1,2,64]}"
check_jerr "softmax: one class only" 422 invalid_data '^y$' $M \
    "{\"name\":\"mcbad\",\"method\":\"svgp\",\"likelihood\":\"softmax\",$MCB,\"y\":[2,2,2,2]}"
check_jerr "softmax: label 1.5 in an async fit: 422, not 202" 422 invalid_data '^y\[1\]$' $M \
    "{\"name\":\"mcbad\",\"method\":\"svgp\",\"likelihood\":\"softmax\",\"async\":true,$MCB,\"y\":[0,1.5,2,1]}"
printf 'a,y\n0,0\n1,1\n2,-1\n' >"$T/mc_badlab.csv"
check_err "softmax: CSV label -1" 422 invalid_data '^y\[2\]$' POST \
    "$M?name=mcbad&method=svgp&likelihood=softmax" -H 'Content-Type: text/csv' --data-binary @"$T/mc_badlab.csv"
check_jerr "softmax on method exact" 422 unsupported likelihood $M \
    "{\"name\":\"mcbad\",\"method\":\"exact\",\"likelihood\":\"softmax\",$MCB,\"y\":[0,1,2,1]}"
jqb .error.message | grep -q "svgp"
verdict "the refusal lists svgp among the methods that fit softmax" $? "$(jqb .error.message)"
check_jerr "an unknown likelihood lists softmax" 400 invalid_argument likelihood $M \
    "{\"name\":\"mcbad\",\"method\":\"svgp\",\"likelihood\":\"multinomial\",$MCB,\"y\":[0,1,2,1]}"
jqb .error.message | grep -q "softmax"
verdict "the message lists softmax" $? "$(jqb .error.message)"
check_err "GET mcbad: nothing was stored" 404 not_found - GET $M/mcbad
check_jerr "softmax: quantiles" 422 unsupported quantiles "$M/mc3/predict" \
    "{\"X\":$MCX,\"quantiles\":[0.1,0.5]}"
check_jerr "softmax: full covariance of labels" 422 unsupported full_covariance "$M/mc3/predict" \
    "{\"X\":$MCX,\"full_covariance\":true}"
