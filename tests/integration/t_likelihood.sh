#!/bin/sh
# Integration area "likelihood": classification and counts over HTTP. The
# listing's likelihoods; svgp and pls fitted to 0/1 labels (JSON and CSV) and
# to counts; predict's probability, rate and count fields and their
# invariants; quantiles of y; samples with observations; labels that do not fit
# (422 naming the cell, also before an async fit is stored); likelihoods a
# method does not fit (422 naming the ones that do). Predict and sample bodies
# are remembered: the restart area replays them bit for bit.
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "likelihood"

# 0/1 labels (and counts) of a smooth function of two inputs, with flips.
awk 'BEGIN {
    srand(31);
    for (i = 0; i < 160; i++) {
        a = 4 * rand() - 2; b = 4 * rand() - 2; f = 2 * sin(2 * a) + cos(b);
        p = 1 / (1 + exp(-2 * f)); y = rand() < p ? 1 : 0;
        lam = exp(0.5 + 0.6 * f); c = 0; s = exp(-lam); u = rand(); acc = s;
        while (u > acc && c < 200) { c++; s *= lam / c; acc += s }
        printf "%.6f,%.6f,%d,%d\n", a, b, y, c;
    }
}' >"$T/lik.csv"
awk -F, '{ print $1 "," $2 "," $3 }' "$T/lik.csv" >"$T/bin.csv"
awk -F, '{ print $1 "," $2 "," $4 }' "$T/lik.csv" >"$T/count.csv"
LX='[[0.5,0.2],[-1.2,1.0],[1.9,-1.8],[0.0,0.0],[-0.4,-1.5]]'

# ---- the listing
check "GET /v1/methods" 200 GET /v1/methods
cp "$T/body" "$T/lik_methods.json"
lik_of() { jqb ".methods[] | select(.name == \"$1\") | .likelihoods | join(\",\")" "$T/lik_methods.json"; }
[ "$(lik_of exact)" = gaussian ]
verdict "exact lists gaussian only" $? "'$(lik_of exact)'"
[ "$(lik_of svgp)" = "gaussian,bernoulli,poisson,softmax" ]
verdict "svgp lists gaussian, bernoulli, poisson, softmax" $? "'$(lik_of svgp)'"
[ "$(lik_of pls)" = "gaussian,bernoulli,poisson,poisson_sq" ]
verdict "pls lists gaussian, bernoulli, poisson, poisson_sq" $? "'$(lik_of pls)'"

# ---- classification: svgp (JSON) and pls (CSV)
csv_to_json binsvgp '"method":"svgp","likelihood":"bernoulli","seed":4,' <"$T/bin.csv" >"$T/binsvgp.json"
check_json "fit svgp bernoulli (JSON)" 201 $M @"$T/binsvgp.json"
[ "$(jstr likelihood)" = bernoulli ]
verdict "svgp model names its likelihood" $? "'$(jstr likelihood)'"
jhas 'has("noise_variance") | not'
verdict "a bernoulli model has no noise_variance" $? "it has one"
{
    echo "a,b,label"
    cat "$T/bin.csv"
} >"$T/bin_h.csv"
check "fit pls bernoulli (CSV, ?likelihood=)" 201 POST "$M?name=binpls&method=pls&likelihood=bernoulli&seed=4" \
    -H 'Content-Type: text/csv' --data-binary @"$T/bin_h.csv"
[ "$(jstr likelihood)" = bernoulli ]
verdict "pls model names its likelihood" $? "'$(jstr likelihood)'"
[ "$(jstr hyper_target)" = "labels (laplace)" ] && [ -z "$(jnum hyper_noise)" ]
verdict "pls bernoulli: hyperparameters by the labels' Laplace marginal likelihood (the default)" $? "'$(jstr hyper_target)'"

# Probability: in (0, 1), mean = probability, variance = p(1 - p); without
# noise the latent moments; quantiles of y are 0 or 1.
binary_checks() {
    check_json "$1: predict" 200 "$M/$1/predict" "{\"X\":$LX,\"quantiles\":[0.1,0.5,0.9]}"
    jhas '(.probability | length) == 5 and all(.probability[]; . > 0 and . < 1)'
    verdict "$1: 5 probabilities in (0, 1)" $? "$(jqb .probability)"
    jhas '[.mean, .probability] | transpose | all(.[0] == .[1])'
    verdict "$1: mean is the probability" $? "differ"
    jhas '[.variance, .probability] | transpose | all(((.[0] - .[1] * (1 - .[1])) | fabs) < 1e-15)'
    verdict "$1: variance is p(1 - p)" $? "differ"
    jhas '(.latent_mean | length) == 5 and all(.latent_variance[]; . >= 0)'
    verdict "$1: latent moments" $? "missing or negative"
    jhas '[.probability, .latent_mean] | transpose | all((.[0] > 0.5) == (.[1] > 0))'
    verdict "$1: p > 1/2 exactly where the latent mean is positive" $? "not so"
    jhas '[.quantiles[][]] | length == 15 and all(. == 0 or . == 1)'
    verdict "$1: quantiles of y are 0 or 1" $? "$(jqb .quantiles)"
    remember "$1-predict" "$M/$1/predict" "{\"X\":$LX,\"quantiles\":[0.1,0.5,0.9]}"
    check_json "$1: latent predict" 200 "$M/$1/predict" "{\"X\":$LX,\"include_noise\":false,\"full_covariance\":true}"
    jhas '[.mean, .latent_mean] | transpose | all(.[0] == .[1])'
    verdict "$1: include_noise false gives the latent mean" $? "differ"
    jhas '(.covariance | length) == 5'
    verdict "$1: latent covariance" $? "missing"
    check_jerr "$1: covariance of labels" 422 unsupported full_covariance "$M/$1/predict" \
        "{\"X\":$LX,\"full_covariance\":true}"
    check_json "$1: sample with observations" 200 "$M/$1/sample" "{\"X\":$LX,\"n_samples\":6,\"seed\":3,\"observations\":true}"
    jhas '(.samples | length) == 6 and (.observations | length) == 6 and all(.observations[][]; . == 0 or . == 1)'
    verdict "$1: 6 latent draws and 6 label draws" $? "shape or values wrong"
    remember "$1-sample" "$M/$1/sample" "{\"X\":$LX,\"n_samples\":6,\"seed\":3,\"observations\":true}"
    check_jerr "$1: sample include_noise" 422 unsupported include_noise "$M/$1/sample" \
        "{\"X\":$LX,\"include_noise\":true}"
}
binary_checks binsvgp
binary_checks binpls

# ---- counts: svgp poisson (log link) and pls poisson_sq
csv_to_json cntsvgp '"method":"svgp","likelihood":"poisson","seed":4,' <"$T/count.csv" >"$T/cntsvgp.json"
check_json "fit svgp poisson" 201 $M @"$T/cntsvgp.json"
csv_to_json cntpls '"method":"pls","likelihood":"poisson_sq","seed":4,' <"$T/count.csv" >"$T/cntpls.json"
check_json "fit pls poisson_sq" 201 $M @"$T/cntpls.json"
count_checks() {
    check_json "$1: predict" 200 "$M/$1/predict" "{\"X\":$LX,\"quantiles\":[0.05,0.5,0.95]}"
    jhas 'all(.rate_mean[]; . > 0) and all(.rate_variance[]; . >= 0)'
    verdict "$1: rate moments" $? "$(jqb .rate_mean)"
    jhas '[.count_mean, .rate_mean] | transpose | all(.[0] == .[1])'
    verdict "$1: count mean = rate mean" $? "differ"
    jhas '[.count_variance, .rate_mean, .rate_variance] | transpose | all(((.[0] - .[1] - .[2]) | fabs) <= 1e-12 * .[0])'
    verdict "$1: count variance = rate mean + rate variance" $? "differ"
    jhas '[.mean, .count_mean] | transpose | all(.[0] == .[1])'
    verdict "$1: mean is the count's" $? "differ"
    jhas '.quantiles as $q | [$q["0.05"], $q["0.5"], $q["0.95"]] | transpose | all(.[0] <= .[1] and .[1] <= .[2] and all(.[]; . >= 0 and . == floor))'
    verdict "$1: count quantiles are ordered counts" $? "$(jqb .quantiles)"
    remember "$1-predict" "$M/$1/predict" "{\"X\":$LX,\"quantiles\":[0.05,0.5,0.95]}"
    check_json "$1: sample with observations" 200 "$M/$1/sample" "{\"X\":$LX,\"n_samples\":4,\"seed\":8,\"observations\":true}"
    jhas 'all(.observations[][]; . >= 0 and . == floor)'
    verdict "$1: count draws" $? "not counts"
    remember "$1-sample" "$M/$1/sample" "{\"X\":$LX,\"n_samples\":4,\"seed\":8,\"observations\":true}"
}
count_checks cntsvgp
count_checks cntpls

# ---- refusals
check_jerr "exact with bernoulli" 422 unsupported likelihood $M \
    "{\"name\":\"e\",\"likelihood\":\"bernoulli\",\"X\":[[0],[1]],\"y\":[0,1]}"
jqb .error.message | grep -q "svgp, pls fit it"
verdict "the refusal names the methods that fit it" $? "$(jqb .error.message)"
check_jerr "svgp with poisson_sq" 422 unsupported likelihood $M \
    "{\"name\":\"e\",\"method\":\"svgp\",\"likelihood\":\"poisson_sq\",\"X\":[[0],[1]],\"y\":[0,1]}"
jqb .error.message | grep -q "pls fits it"
verdict "poisson_sq: pls fits it" $? "$(jqb .error.message)"
check_jerr "label 2 in a bernoulli fit" 422 invalid_data '^y\[2\]$' $M \
    "{\"name\":\"e\",\"method\":\"svgp\",\"likelihood\":\"bernoulli\",\"X\":[[0],[1],[2]],\"y\":[0,1,2]}"
check_jerr "count -1 in a poisson fit" 422 invalid_data '^y\[1\]$' $M \
    "{\"name\":\"e\",\"method\":\"pls\",\"likelihood\":\"poisson\",\"X\":[[0],[1],[2]],\"y\":[0,-1,2]}"
check_jerr "count 2.5 in a poisson fit" 422 invalid_data '^y\[0\]$' $M \
    "{\"name\":\"e\",\"method\":\"svgp\",\"likelihood\":\"poisson\",\"X\":[[0],[1],[2]],\"y\":[2.5,1,2]}"
check_jerr "label 2 in an async bernoulli fit: 422, not 202" 422 invalid_data '^y\[1\]$' $M \
    "{\"name\":\"e\",\"method\":\"pls\",\"likelihood\":\"bernoulli\",\"async\":true,\"X\":[[0],[1],[2]],\"y\":[0,2,1]}"
printf 'a,y\n0,0\n1,3\n' >"$T/badlab.csv"
check_err "CSV label 3 in a bernoulli fit" 422 invalid_data '^y\[1\]$' POST \
    "$M?name=e&method=svgp&likelihood=bernoulli" -H 'Content-Type: text/csv' --data-binary @"$T/badlab.csv"
check_jerr "noise with bernoulli" 400 invalid_argument noise $M \
    "{\"name\":\"e\",\"method\":\"svgp\",\"likelihood\":\"bernoulli\",\"noise\":{\"variance\":0.1},\"X\":[[0],[1]],\"y\":[0,1]}"
check_err "GET e: nothing was stored" 404 not_found - GET /v1/models/e
