#!/bin/sh
# Integration area "fit": fits from JSON (closed form with fixed hyperparameters), CSV and concrete.csv
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "fits"
# An exact GP with every hyperparameter fixed: predictions have a closed form.
# rbf, lengthscale 1, variance 1, noise 0.1, no standardisation, X = {0, 1}, y = {1, -1}.
check_json "fit JSON, fixed hyperparameters (closed form)" 201 /v1/models \
    '{"name":"closed","method":"exact","standardize":false,"kernel":{"type":"rbf","lengthscale":1.0,"variance":1.0,"fixed":true},"noise":{"variance":0.1,"fixed":true},"X":[[0],[1]],"y":[1,-1]}'
check_json "predict closed form" 200 /v1/models/closed/predict '{"X":[[0.25],[0.5],[2.0]],"include_noise":false}'
jarr mean >"$T/cf.mean"
jarr variance >"$T/cf.var"
awk 'function k(a, b) { return exp(-0.5 * (a - b) * (a - b)) }
     BEGIN {
        e = k(0, 1); a = 1.1; det = a * a - e * e;          # A = [[a, e], [e, a]]
        split("0.25 0.5 2.0", xs, " "); bad = 0;
        while ((getline m < ARGV[1]) > 0 && (getline v < ARGV[2]) > 0) {
            i++; x = xs[i]; k0 = k(x, 0); k1 = k(x, 1);
            w0 = (a * 1 - e * -1) / det; w1 = (-e * 1 + a * -1) / det;  # A^-1 y
            mu = k0 * w0 + k1 * w1;
            q = (k0 * (a * k0 - e * k1) + k1 * (-e * k0 + a * k1)) / det;
            va = 1 - q;
            if ((m - mu) ^ 2 > 1e-20 + 1e-18 * mu * mu || (v - va) ^ 2 > 1e-20 + 1e-18 * va * va) {
                printf "     point %s: got mean %s var %s, expected %.17g %.17g\n", x, m, v, mu, va; bad = 1
            }
        }
        if (i != 3) { print "     expected 3 means and variances, got " i; bad = 1 }
        exit bad
     }' "$T/cf.mean" "$T/cf.var"
verdict "closed-form mean and latent variance match to 1e-9" $? "wrong numbers"

req DELETE /v1/models/sine # a fresh sine: this area checks its version 1
check_json "fit JSON sine" 201 /v1/models "$SINE_BODY"
ok=0
[ "$(jstr name)" = sine ] && [ "$(jnum version)" = 1 ] && [ "$(jstr method)" = exact ] &&
    [ "$(jstr status)" = ready ] && [ "$(jnum n_train)" = 21 ] && [ "$(jnum input_dim)" = 1 ] &&
    jhas '(.kernel | type == "object") and (.noise_variance | type == "number") and
          (.diagnostics | type == "object") and .diagnostics.objective_name == "log_marginal_likelihood" and
          (.created_at | type == "string")' || ok=1
verdict "fit response: name, version 1, method, status ready, n_train, input_dim, kernel, noise, diagnostics" $ok "missing or wrong fields"
check "fit CSV (header row, target last)" 201 POST '/v1/models?name=plane&method=exact' \
    -H 'Content-Type: text/csv' --data-binary @"$T/plane_h.csv"
[ "$(jnum n_train)" = 40 ] && [ "$(jnum input_dim)" = 2 ]
verdict "fit CSV: n_train 40, input_dim 2" $? "wrong n_train / input_dim"
# The target named explicitly (?target=a): then b and target are the inputs.
check "fit CSV with ?target=COL" 201 POST '/v1/models?name=plane-t&target=a' \
    -H 'Content-Type: text/csv' --data-binary @"$T/plane_h.csv"
# RFC 4180: the quoted header R's write.csv writes; the target named with a comma in it.
check "fit CSV written by R's write.csv (quoted header)" 201 POST '/v1/models?name=r-csv' \
    -H 'Content-Type: text/csv' --data-binary @tests/fixtures/csv/r_write_csv.csv
[ "$(jnum n_train)" = 6 ] && [ "$(jnum input_dim)" = 2 ]
verdict "R's CSV: n_train 6, input_dim 2" $? "wrong n_train / input_dim"
check "fit CSV from Python (QUOTE_ALL, BOM, CRLF), ?target with a comma" 201 POST \
    '/v1/models?name=py-csv&target=cement%2C%20kg' \
    -H 'Content-Type: text/csv' --data-binary @tests/fixtures/csv/py_quote_all_bom.csv
if [ -n "$CONCRETE" ]; then
    check "fit CSV concrete.csv (1030 x 8)" 201 POST '/v1/models?name=concrete&method=exact' \
        -H 'Content-Type: text/csv' --data-binary @"$CONCRETE"
    [ "$(jnum n_train)" = 1030 ] && [ "$(jnum input_dim)" = 8 ]
    verdict "concrete: n_train 1030, input_dim 8" $? "wrong n_train / input_dim"
    check_json "predict concrete" 200 /v1/models/concrete/predict \
        '{"X":[[540,0,0,162,2.5,1040,676,28],[332.5,142.5,0,228,0,932,594,270]]}'
    cp "$T/body" "$T/concrete_pred.json"
    jarr mean "$T/concrete_pred.json" | awk '{ if ($1 < 20 || $1 > 100) exit 1 }' 
    verdict "concrete predictions are plausible strengths (20..100 MPa)" $? "implausible means"
    remember concrete /v1/models/concrete/predict '{"X":[[540,0,0,162,2.5,1040,676,28]]}'
else
    note "concrete cases skipped: no $DATASETS/concrete.csv"
fi
