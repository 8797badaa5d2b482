#!/bin/sh
# Integration area "methods": every method over HTTP, driven by one table.
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).
#
# The common checks run for every row: the listing (/v1/methods) describes the
# method, kernels it does not list are refused, the fit reports only the
# method_info keys it lists, predict and sample keep their invariants, the
# predict body is remembered for the restart area, a queued job's budget is
# the one the listing names, and options of another method are refused. Then
# each method's own checks (method_ssgp, ...) run.

# name | model | fit fields (kernel, seed, options) of a small fit on ss.csv |
# an option of another method, refused | options added to the quick fits. The
# kernel fits and the async job take the method's quick preset from the
# listing (`quick`, the descriptor's) plus the row's additions: rfgp's
# default width selection runs no optimiser (its job would report one
# iteration), so its quick job selects by marginal likelihood.
METHOD_TABLE='ssgp|ssgp2d|"kernel":{"type":"rbf","ard":true},"seed":5,"options":{"features":40}|restarts
msrfr|ms2d|"kernel":{"type":"rbf","ard":true},"seed":5,"options":{"particles":3,"features":20,"iterations":60}|frequencies
sgpr|sg2d|"kernel":{"type":"rbf","ard":true},"seed":5,"options":{"inducing":20}|particles
renyi|re2d|"kernel":{"type":"rbf","ard":true},"seed":5,"options":{"inducing":15,"alpha":0.5}|features
pls|pl2d|"kernel":{"type":"rbf","ard":true},"seed":5,"options":{"landmarks":15}|features
svgp|sv2d|"kernel":{"type":"rbf","ard":true},"seed":5,"options":{"inducing":15}|features
hkd|hk2d|"kernel":{"type":"rbf","ard":true},"seed":5,"options":{"inducing":15}|features
rfgp|rf2d|"kernel":{"type":"rbf","ard":true},"seed":5,"options":{"features":64,"warmup":50}|inducing|{"width_selection":"ml"}
gwi|gw2d|"kernel":{"type":"rbf","ard":true},"seed":5,"options":{"inducing":12,"epochs":40}|particles'

# The listing of method $1 in $T/methods.json (GET /v1/methods).
listing() {
    jq --arg m "$1" '.methods[] | select(.name == $m)' "$T/methods.json"
}

# The quick preset of method $1 from the listing (a JSON object of options).
quick_options() {
    listing "$1" | jq -c '.quick'
}

# method_listing_checks NAME QUICK_OPTIONS (a JSON object for the kernel fits)
method_listing_checks() {
    m=$1
    listing "$m" >"$T/listing.json"
    jhas '.name' "$T/listing.json"
    verdict "$m: listed by /v1/methods" $? "not listed"
    jhas '(.quick | type == "object") and (.progress.iterations_option as $it | .quick | has($it)) and
          (.options as $o | .quick | to_entries | all(.key as $k | .value | type == "number" and
           ($o | any(.name == $k and (.type == "integer" or .type == "number")))))' "$T/listing.json"
    verdict "$m: the quick preset sets the iterations option and numeric options only" $? "quick: $(jq -c .quick "$T/listing.json")"
    jhas '(.options | length > 0) and all(.options[]; (.help | length > 0) and has("default")) and
          all(.method_info[]; (.key | length > 0) and (.help | length > 0))' "$T/listing.json"
    verdict "$m: every option and method_info key has help" $? "missing help"
    # Kernels: every listed type is taken (a fit may still fail for other
    # reasons, never as unsupported) and every unlisted one refused. The
    # listing once offered sum and product to methods that refuse them.
    for k in rbf matern12 matern32 matern52 rq periodic linear white sum product; do
        case $k in
        sum | product) kj="{\"type\":\"$k\",\"terms\":[{\"type\":\"rbf\"},{\"type\":\"rbf\"}]}" ;;
        periodic) kj='{"type":"periodic","active_dims":[0]}' ;; # one column: several are refused
        *) kj="{\"type\":\"$k\"}" ;;
        esac
        body="{\"name\":\"kernel-$m-$k\",\"method\":\"$m\",\"kernel\":$kj,\"options\":$2,$SSB}"
        if jq -e --arg k "$k" '.kernels | index($k)' "$T/listing.json" >/dev/null 2>&1; then
            jpost $M "$body"
            case $ST/$(jqb '.error.code // empty')/$(jqb '.error.field // empty') in
            201/*) true ;;
            422/not_positive_definite/* | 422/invalid_data/[!k]*) true ;; # the data, not the kernel
            *) false ;;
            esac
            verdict "$m: listed kernel $k is accepted ($ST)" $? "refused"
        else
            check_jerr "$m: unlisted kernel $k refused" 422 unsupported '^kernel\.type$' $M "$body"
        fi
    done
}

method_fit_checks() {
    m=$1 model=$2 fields=$3
    csv_to_json "$model" "\"method\":\"$m\",$fields," <"$T/ss.csv" >"$T/fit_$m.json"
    check_json "fit $m" 201 /v1/models @"$T/fit_$m.json"
    cp "$T/body" "$T/fit_$m.out"
    [ "$(jstr method)" = "$m" ] &&
        [ "$(jqb '.diagnostics.objective_name')" = "$(jqb '.objective' "$T/listing.json")" ] &&
        jhas '.diagnostics.objective | type == "number"'
    verdict "$m: fit reports the method and the listed objective" $? "method '$(jstr method)'"
    jq -r '.method_info // {} | keys[]' "$T/body" >"$T/info_keys.txt"
    jq -r '.method_info[].key' "$T/listing.json" >"$T/listed_keys.txt"
    extra=$(grep -vxF -f "$T/listed_keys.txt" "$T/info_keys.txt" | tr '\n' ' ')
    [ -s "$T/info_keys.txt" ] && [ -z "$extra" ]
    verdict "$m: method_info keys are all listed" $? "unlisted: $extra"
}

method_predict_checks() {
    m=$1 model=$2
    check_json "predict $m" 200 "/v1/models/$model/predict" \
        "{\"X\":$SSX,\"full_covariance\":true,\"quantiles\":[0.1,0.9]}"
    cp "$T/body" "$T/pred_$m.json"
    [ "$(jarr mean | count_lines)" = 4 ] && [ "$(jarr variance | count_lines)" = 4 ] &&
        jhas '(.covariance | length) == 4 and all(.covariance[]; length == 4)'
    verdict "$m predict: 4 means, 4 variances, 4 x 4 covariance" $? "wrong lengths"
    jarr 0.1 >"$T/q_lo.txt"
    jarr 0.9 | paste -d' ' "$T/q_lo.txt" - | awk '{ if (!($1 < $2)) bad = 1; n++ } END { exit bad || n != 4 }'
    verdict "$m: quantile 0.1 below 0.9 at every point" $? "not ordered"
    check_json "predict $m latent" 200 "/v1/models/$model/predict" "{\"X\":$SSX,\"include_noise\":false}"
    jarr variance >"$T/lat.txt"
    jarr variance "$T/pred_$m.json" | paste -d' ' - "$T/lat.txt" |
        awk '{ if (!($2 > 0 && $1 > $2)) bad = 1; n++ } END { exit bad || n != 4 }'
    verdict "$m: observation variance > latent variance > 0" $? "not ordered"
    remember "$m-predict" "/v1/models/$model/predict" "{\"X\":$SSX,\"full_covariance\":true,\"quantiles\":[0.1,0.9]}"
    check_jerr "predict $m: wrong dimension" 422 invalid_data '^X' "/v1/models/$model/predict" '{"X":[[1,2,3]]}'
}

method_sample_checks() {
    m=$1 model=$2
    check_json "sample $m" 200 "/v1/models/$model/sample" "{\"X\":$SSX,\"n_samples\":5,\"seed\":3}"
    cp "$T/body" "$T/sample_$m.json"
    jmat samples | awk -F, '{ if (NF != 4) bad = 1; n++ } END { exit bad || n != 5 }'
    verdict "$m samples: 5 draws of 4 points" $? "wrong shape"
    check_json "sample $m again" 200 "/v1/models/$model/sample" "{\"X\":$SSX,\"n_samples\":5,\"seed\":3}"
    cmp -s "$T/body" "$T/sample_$m.json"
    verdict "$m: same seed -> identical samples" $? "bodies differ"
    remember "$m-sample" "/v1/models/$model/sample" "{\"X\":$SSX,\"n_samples\":5,\"seed\":3}"
}

# A queued or running job reports the budget the listing's progress options
# give for these options (msrfr's was once 0: its option is "iterations").
method_job_checks() {
    m=$1 opts=$2
    it_opt=$(jqb '.progress.iterations_option // empty' "$T/listing.json")
    rs_opt=$(jqb '.progress.restarts_option // empty' "$T/listing.json")
    budget=$(jq -n --argjson o "$opts" --slurpfile l "$T/listing.json" --arg it "$it_opt" --arg rs "$rs_opt" '
        def val($n): if ($o | has($n)) then $o[$n] else ($l[0].options[] | select(.name == $n) | .default) end;
        if $it == "" then 0 else val($it) * (if $rs == "" then 1 else val($rs) + 1 end) end')
    # (the default validation report runs after the fit and leaves the budget the fit's;
    # t_validation checks an asked validation's)
    csv_to_json "job-$m" "\"method\":\"$m\",\"async\":true,\"options\":$opts," <"$T/ss.csv" >"$T/job_$m.json"
    check_json "async fit $m" 202 $M @"$T/job_$m.json"
    jid=$(jstr job)
    req GET "/v1/jobs/$jid"
    got=$(jqb '.progress.max_iterations')
    [ -n "$it_opt" ] && [ "$got" = "$budget" ] && [ "$budget" -gt 0 ]
    verdict "$m: job budget is $it_opt from the listing ($budget)" $? "max_iterations '$got', expected $budget"
    if wait_job "$jid" succeeded; then pass "$m: async job succeeds"; else
        fail "$m: async job succeeds" "status '$JOB_STATUS'" body
    fi
}

method_option_checks() {
    m=$1 foreign=$2
    check_jerr "$m: option '$foreign' of another method" 400 invalid_argument "^options\\.$foreign\$" $M \
        "{\"name\":\"b\",\"method\":\"$m\",\"options\":{\"$foreign\":2},$SSB}"
    check_jerr "$m: unknown option" 400 invalid_argument '^options\.nosuch$' $M \
        "{\"name\":\"b\",\"method\":\"$m\",\"options\":{\"nosuch\":1},$SSB}"
}

# ---------------------------------------------------------------- per method

method_ssgp() {
    req GET /v1/models/ssgp2d
    case $(jstr frequencies) in mc | qmc | orf | stein) true ;; *) false ;; esac
    verdict "method_info.frequencies names the sampler auto chose" $? "frequencies '$(jstr frequencies)'"
    [ "$(jnum features)" = 40 ]
    verdict "ssgp reports 40 features" $? "features '$(jnum features)'"
    jhas '.options[] | select(.name == "frequencies") | .choices == ["auto","mc","qmc","orf","stein"]' "$T/listing.json"
    verdict "/v1/methods lists the ssgp samplers" $? "choices differ"
    for f in mc qmc orf stein; do
        csv_to_json "ss-$f" "\"method\":\"ssgp\",\"kernel\":{\"type\":\"matern32\",\"ard\":true},\"options\":{\"features\":30,\"frequencies\":\"$f\",\"stein_iterations\":50}," <"$T/ss.csv" >"$T/ss_$f.json"
        check_json "fit ssgp frequencies=$f (matern32)" 201 /v1/models @"$T/ss_$f.json"
        [ "$(jstr frequencies)" = "$f" ]
        verdict "ssgp frequencies=$f reported" $? "frequencies '$(jstr frequencies)'"
    done
    csv_to_json ss-learn '"method":"ssgp","options":{"features":20,"frequencies":"qmc","learn_frequencies":true,"max_iterations":50},' <"$T/ss.csv" >"$T/ss_learn.json"
    check_json "fit ssgp learn_frequencies" 201 /v1/models @"$T/ss_learn.json"
    [ "$(jqb '.method_info.learn_frequencies')" = true ]
    verdict "ssgp learn_frequencies reported" $? "not reported"
    check_json "predict learned-frequency ssgp" 200 /v1/models/ss-learn/predict "{\"X\":$SSX}"
    check_jerr "ssgp: periodic kernel" 422 unsupported '^kernel\.type$' $M "{\"name\":\"b\",\"method\":\"ssgp\",\"kernel\":{\"type\":\"periodic\"},$SSB}"
    grep -q 'rbf, matern12, matern32, matern52' "$T/body"
    verdict "unsupported kernel message names the kernels that work" $? "not named"
    check_jerr "ssgp: features 0" 400 invalid_argument '^options\.features$' $M "{\"name\":\"b\",\"method\":\"ssgp\",\"options\":{\"features\":0},$SSB}"
    check_jerr "ssgp: 20000 features (workspace above the budget)" 413 payload_too_large '^options\.features$' $M "{\"name\":\"b\",\"method\":\"ssgp\",\"options\":{\"features\":20000},$SSB}"
    check_jerr "ssgp: features not an integer" 400 invalid_argument '^options\.features$' $M "{\"name\":\"b\",\"method\":\"ssgp\",\"options\":{\"features\":2.5},$SSB}"
    check_jerr "ssgp: unknown sampler" 400 invalid_argument '^options\.frequencies$' $M "{\"name\":\"b\",\"method\":\"ssgp\",\"options\":{\"frequencies\":\"sobol\"},$SSB}"
    check_jerr "ssgp: unknown bandwidth" 400 invalid_argument '^options\.bandwidth$' $M "{\"name\":\"b\",\"method\":\"ssgp\",\"options\":{\"bandwidth\":\"silverman\"},$SSB}"
    check_jerr "ssgp: learn_frequencies not a bool" 400 invalid_argument '^options\.learn_frequencies$' $M "{\"name\":\"b\",\"method\":\"ssgp\",\"options\":{\"learn_frequencies\":\"yes\"},$SSB}"
    check_jerr "ssgp: stein_step negative" 400 invalid_argument '^options\.stein_step$' $M "{\"name\":\"b\",\"method\":\"ssgp\",\"options\":{\"stein_step\":-1},$SSB}"
    check_jerr "ssgp predict: NaN string" 422 invalid_data '^X\[0\]' /v1/models/ssgp2d/predict '{"X":[["NaN",1]]}'
}

method_msrfr() {
    req GET /v1/models/ms2d
    [ "$(jnum particles)" = 3 ] && [ "$(jnum features)" = 20 ] && [ "$(jstr bandwidth)" = per_dim ]
    verdict "msrfr model reports particles 3, features 20, bandwidth per_dim" $? "particles '$(jnum particles)' features '$(jnum features)' bandwidth '$(jstr bandwidth)'"
    jhas '.mixture == true' "$T/listing.json"
    verdict "/v1/methods: msrfr predicts with a mixture" $? "mixture not true"
    check_json "predict msrfr (components, quantiles, covariance)" 200 /v1/models/ms2d/predict "{\"X\":$SSX,\"components\":true,\"quantiles\":[0.05,0.5,0.95],\"full_covariance\":true}"
    jhas '(.components.mean | length) == 3 and all(.components.mean[]; length == 4)'
    verdict "msrfr components: 3 mean arrays of 4 points" $? "wrong shape"
    jhas '(.components.variance | length) == 3'
    verdict "msrfr components carry variances" $? "no variances"
    jhas '.components.kind == "mixture" and (.components | has("names") | not)'
    verdict "msrfr components are of kind mixture" $? "kind $(jqb '.components.kind')"
    jhas '[.quantiles["0.05"], .quantiles["0.95"]] | transpose | all(.[0] < .[1]) and length == 4'
    verdict "msrfr quantiles: 0.05 below 0.95 at every point" $? "not ordered"
    remember msrfr-components /v1/models/ms2d/predict "{\"X\":$SSX,\"components\":true,\"quantiles\":[0.05,0.5,0.95],\"full_covariance\":true}"
    for bw in total none; do
        csv_to_json "ms-$bw" "\"method\":\"msrfr\",\"kernel\":{\"type\":\"matern52\"},\"options\":{\"particles\":2,\"features\":10,\"iterations\":20,\"bandwidth\":\"$bw\",\"init\":\"mc\",\"likelihood_weight\":\"1\"}," <"$T/ss.csv" >"$T/ms_$bw.json"
        check_json "fit msrfr bandwidth=$bw (matern52, shared lengthscale)" 201 /v1/models @"$T/ms_$bw.json"
        [ "$(jstr bandwidth)" = "$bw" ]
        verdict "msrfr bandwidth=$bw reported" $? "bandwidth '$(jstr bandwidth)'"
    done
    csv_to_json ms-cal '"method":"msrfr","noise":{"variance":0.01,"fixed":true},"options":{"particles":2,"features":10,"iterations":30,"calibrate":true},' <"$T/ss.csv" >"$T/ms_cal.json"
    check_json "fit msrfr calibrate (fixed noise)" 201 /v1/models @"$T/ms_cal.json"
    [ -n "$(jnum variance_scale)" ] && [ "$(jnum variance_scale)" != 1 ] && [ "$(jstr noise)" = fixed ]
    verdict "msrfr calibrate reports its variance_scale" $? "variance_scale '$(jnum variance_scale)'"
    check_jerr "predict ssgp with components" 422 unsupported '^components$' /v1/models/ssgp2d/predict "{\"X\":$SSX,\"components\":true}"
    check_jerr "components not a bool" 400 invalid_argument '^components$' /v1/models/ms2d/predict "{\"X\":$SSX,\"components\":1}"
    check_jerr "msrfr: particles 0" 400 invalid_argument '^options\.particles$' $M "{\"name\":\"b\",\"method\":\"msrfr\",\"options\":{\"particles\":0},$SSB}"
    check_jerr "msrfr: unknown bandwidth" 400 invalid_argument '^options\.bandwidth$' $M "{\"name\":\"b\",\"method\":\"msrfr\",\"options\":{\"bandwidth\":\"silverman\"},$SSB}"
    check_jerr "msrfr: likelihood_weight 2" 400 invalid_argument '^options\.likelihood_weight$' $M "{\"name\":\"b\",\"method\":\"msrfr\",\"options\":{\"likelihood_weight\":\"2\"},$SSB}"
    check_jerr "msrfr: calibrate not a bool" 400 invalid_argument '^options\.calibrate$' $M "{\"name\":\"b\",\"method\":\"msrfr\",\"options\":{\"calibrate\":\"yes\"},$SSB}"
    check_jerr "msrfr: negative step" 400 invalid_argument '^options\.step$' $M "{\"name\":\"b\",\"method\":\"msrfr\",\"options\":{\"step\":-0.1},$SSB}"
    check_jerr "msrfr: calibrate on 3 rows" 400 invalid_argument '^options\.calibrate$' $M "{\"name\":\"b\",\"method\":\"msrfr\",\"options\":{\"calibrate\":true,\"iterations\":5},$SSB}"
    check_jerr "msrfr: workspace above the budget" 413 payload_too_large '^options\.particles$' $M "{\"name\":\"b\",\"method\":\"msrfr\",\"options\":{\"particles\":200,\"features\":20000},$SSB}"
    gen_xy 400 3 31 | csv_to_json mslong '"method":"msrfr","options":{"particles":4,"features":50,"iterations":1000000},"async":true,"validation":false,' >"$T/mslong.json"
    check_json "long async msrfr fit" 202 $M @"$T/mslong.json"
    MJOB=$(jstr job)
    if [ -n "$MJOB" ] && wait_job "$MJOB" running; then
        sleep 0.5
        req GET "/v1/jobs/$MJOB"
        jhas '.progress.iteration >= 1 and (.progress.objective | type == "number") and .progress.max_iterations == 1000000'
        verdict "running msrfr job reports iteration, objective and its 1000000 iterations" $? "no progress"
        req DELETE "/v1/jobs/$MJOB"
        if wait_job "$MJOB" cancelled; then pass "msrfr job cancelled between iterations"; else fail "msrfr job cancelled between iterations" "status '$JOB_STATUS'" body; fi
    else
        fail "long msrfr job is running" "status '$JOB_STATUS'" body
    fi
}

method_sgpr() {
    req GET /v1/models/sg2d
    [ "$(jnum inducing)" = 20 ] && [ "$(jstr inducing_selection)" = greedy ] &&
        [ -n "$(jnum trace_term)" ] && [ -n "$(jnum exact_lml)" ] && [ -n "$(jnum gap)" ] &&
        [ "$(jqb '.diagnostics.objective_name')" = elbo ]
    verdict "sgpr reports inducing 20, greedy, the bound, trace term, exact LML and gap" $? "inducing '$(jnum inducing)' gap '$(jnum gap)'"
    awk -v g="$(jnum gap)" 'BEGIN { exit !(g >= -1e-6) }'
    verdict "sgpr gap (exact LML - bound) is not negative" $? "gap $(jnum gap)"
    jhas '.options[] | select(.name == "inducing_selection") | .choices == ["greedy","kmeans","random"]' "$T/listing.json"
    verdict "/v1/methods lists the sgpr selections" $? "choices differ"
    for sel in kmeans random; do
        csv_to_json "sg-$sel" "\"method\":\"sgpr\",\"kernel\":{\"type\":\"matern32\",\"ard\":true},\"options\":{\"inducing\":15,\"inducing_selection\":\"$sel\",\"optimize_inducing\":true,\"max_iterations\":40}," <"$T/ss.csv" >"$T/sg_$sel.json"
        check_json "fit sgpr $sel + optimize_inducing (matern32)" 201 /v1/models @"$T/sg_$sel.json"
        [ "$(jstr inducing_selection)" = "$sel" ] && [ "$(jnum optimize_inducing)" = 1 ]
        verdict "sgpr $sel with optimize_inducing reported" $? "selection '$(jstr inducing_selection)'"
    done
    check_jerr "sgpr: inducing 0" 400 invalid_argument '^options\.inducing$' $M "{\"name\":\"b\",\"method\":\"sgpr\",\"options\":{\"inducing\":0},$SSB}"
    check_jerr "sgpr: unknown selection" 400 invalid_argument '^options\.inducing_selection$' $M "{\"name\":\"b\",\"method\":\"sgpr\",\"options\":{\"inducing_selection\":\"kdpp\"},$SSB}"
    check_jerr "sgpr: optimize_inducing not a bool" 400 invalid_argument '^options\.optimize_inducing$' $M "{\"name\":\"b\",\"method\":\"sgpr\",\"options\":{\"optimize_inducing\":1},$SSB}"
}

method_pls() {
    req GET /v1/models/pl2d
    [ "$(jstr sampler)" = closed_form ] && [ "$(jnum landmarks)" = 15 ] && [ -n "$(jnum eigenpairs)" ] &&
        [ "$(jqb '.diagnostics.objective_name')" = negative_mean_energy ]
    verdict "pls reports the closed form, landmarks and kept eigenpairs" $? "sampler '$(jstr sampler)'"
    check_jerr "pls: unknown sampler" 400 invalid_argument '^options\.sampler$' $M "{\"name\":\"b\",\"method\":\"pls\",\"options\":{\"sampler\":\"hmc\"},$SSB}"
    check_jerr "pls: unknown hyper" 400 invalid_argument '^options\.hyper$' $M "{\"name\":\"b\",\"method\":\"pls\",\"options\":{\"hyper\":\"ep\"},$SSB}"
    check_jerr "pls: hyper laplace needs bernoulli or poisson" 400 invalid_argument '^options\.hyper$' $M "{\"name\":\"b\",\"method\":\"pls\",\"options\":{\"hyper\":\"laplace\"},$SSB}"
}

method_svgp() {
    req GET /v1/models/sv2d
    [ "$(jnum inducing)" = 15 ] && [ "$(jstr optimizer)" = lbfgs ] && [ -n "$(jnum expected_log_lik)" ] &&
        [ -n "$(jnum kl)" ] && [ "$(jqb '.diagnostics.objective_name')" = elbo ]
    verdict "svgp reports inducing 15, lbfgs, the expected log-likelihood and the KL" $? "inducing '$(jnum inducing)' optimizer '$(jstr optimizer)'"
    jhas 'any(.options[]; .name == "natgrad_step") and any(.options[]; .name == "quadrature_points")' "$T/listing.json"
    verdict "/v1/methods lists svgp with natgrad_step and quadrature_points" $? "not listed"
    check_jerr "svgp: optimizer sgd" 400 invalid_argument '^options\.optimizer$' $M "{\"name\":\"b\",\"method\":\"svgp\",\"options\":{\"optimizer\":\"sgd\"},$SSB}"
}

method_hkd() {
    req GET /v1/models/hk2d
    [ "$(jnum n_blocks)" = 2 ] && [ "$(jnum inducing)" = 15 ] && [ -n "$(jnum collapsed_bound)" ] &&
        [ "$(jqb '.diagnostics.objective_name')" = elbo ]
    verdict "hkd reports 2 blocks (the default symmetry), inducing 15 and its bound" $? "n_blocks '$(jnum n_blocks)' inducing '$(jnum inducing)'"
    jhas '.additive == true and (.options[] | select(.name == "symmetry") | .type == "object")' "$T/listing.json"
    verdict "/v1/methods lists hkd as additive with an object option symmetry" $? "not listed"
    # the rest of hkd (symmetries, components, their errors) is the hkd area
}

method_rfgp() {
    req GET /v1/models/rf2d
    [ "$(jstr state)" = online ] && [ "$(jnum features)" = 64 ] && [ "$(jstr width_selection)" = median ]
    verdict "rfgp reports state online, 64 features and median widths" $? "state '$(jstr state)' features '$(jnum features)'"
    # observe, the warm-up and the gate are the online area (t_online.sh)
}

method_gwi() {
    req GET /v1/models/gw2d
    [ "$(jnum inducing)" = 12 ] && [ "$(jstr mean)" = kernel_sum ] && [ -n "$(jnum prior_objective)" ] &&
        [ "$(jqb '.diagnostics.objective_name')" = validation_nll ] &&
        awk -v a="$(jnum temper)" -v e="$(jnum best_epoch)" -v r="$(jnum epochs_run)" \
            'BEGIN { exit !(a >= 1e-6 && a <= 2 && e >= 0 && e <= r && r <= 40) }'
    verdict "gwi reports inducing 12, kernel_sum, the prior fit, temper in [1e-6, 2], best epoch <= epochs run" $? "inducing '$(jnum inducing)' temper '$(jnum temper)'"
    # GWI-net, the thesis's estimator and objective: fit, predict, sample, remembered for restart
    csv_to_json gw-net '"method":"gwi","kernel":{"type":"rbf","ard":true},"seed":3,"options":{"mean":"mlp","hidden":6,"w2_estimator":"thesis_nonsym","objective":"code_w","inducing":10,"epochs":30,"w2_points":20,"prior":"inducing","temper":false},' <"$T/ss.csv" >"$T/gw_net.json"
    check_json "fit gwi mlp + thesis_nonsym + code_w" 201 /v1/models @"$T/gw_net.json"
    [ "$(jstr mean)" = mlp ] && [ "$(jnum temper)" = 1 ] && [ "$(jnum w2_points)" = 20 ]
    verdict "gwi mlp reports the network mean, no tempering, 20 W2 points" $? "mean '$(jstr mean)' temper '$(jnum temper)'"
    check_json "predict gwi mlp" 200 /v1/models/gw-net/predict "{\"X\":$SSX,\"full_covariance\":true,\"quantiles\":[0.05,0.95]}"
    jhas 'all(.mean[]; type == "number") and all(.variance[]; . > 0)'
    verdict "gwi mlp predicts finite means and positive variances" $? "bad values"
    remember gwi-mlp-predict /v1/models/gw-net/predict "{\"X\":$SSX,\"full_covariance\":true,\"quantiles\":[0.05,0.95]}"
    remember gwi-mlp-sample /v1/models/gw-net/sample "{\"X\":$SSX,\"n_samples\":4,\"seed\":9,\"include_noise\":true}"
    jhas '(.options[] | select(.name == "mean") | .choices == ["kernel_sum","mlp"]) and (.options[] | select(.name == "w2_estimator") | .choices == ["bures_sym","thesis_nonsym"])' "$T/listing.json"
    verdict "/v1/methods lists the gwi means and W2 estimators" $? "choices differ"
    check_jerr "gwi: mean foo" 400 invalid_argument '^options\.mean$' $M "{\"name\":\"b\",\"method\":\"gwi\",\"options\":{\"mean\":\"foo\"},$SSB}"
    check_jerr "gwi: hidden 0" 400 invalid_argument '^options\.hidden$' $M "{\"name\":\"b\",\"method\":\"gwi\",\"options\":{\"hidden\":0},$SSB}"
    check_jerr "gwi: validation_fraction 0.9" 400 invalid_argument '^options\.validation_fraction$' $M "{\"name\":\"b\",\"method\":\"gwi\",\"options\":{\"validation_fraction\":0.9},$SSB}"
    check_jerr "gwi: objective w2" 400 invalid_argument '^options\.objective$' $M "{\"name\":\"b\",\"method\":\"gwi\",\"options\":{\"objective\":\"w2\"},$SSB}"
    check_jerr "gwi: temper 1" 400 invalid_argument '^options\.temper$' $M "{\"name\":\"b\",\"method\":\"gwi\",\"options\":{\"temper\":1},$SSB}"
    check_jerr "gwi: w2_points 0" 400 invalid_argument '^options\.w2_points$' $M "{\"name\":\"b\",\"method\":\"gwi\",\"options\":{\"w2_points\":0},$SSB}"
    check_jerr "gwi: greedy selection with prior inducing" 400 invalid_argument '^options\.inducing_selection$' $M "{\"name\":\"b\",\"method\":\"gwi\",\"options\":{\"inducing_selection\":\"greedy\",\"prior\":\"inducing\"},$SSB}"
    # inducing_factor "auto" (B1): the mlp grid, the lowest validation NLL kept, every score reported
    jhas '.options[] | select(.name == "inducing_factor") | .keywords == ["auto"]' "$T/listing.json"
    verdict "/v1/methods lists gwi's inducing_factor with the keyword auto" $? "not listed"
    csv_to_json gw-auto '"method":"gwi","kernel":{"type":"rbf","ard":true},"seed":4,"options":{"mean":"mlp","hidden":4,"inducing_factor":"auto","epochs":10,"w2_points":20},' <"$T/ss.csv" >"$T/gw_auto.json"
    check_json "fit gwi inducing_factor auto" 201 /v1/models @"$T/gw_auto.json"
    jhas 'first(.. | objects | select(has("method_info"))) as $m | $m.method_info as $i | [$i["auto_nll_0.5"], $i["auto_nll_1"], $i["auto_nll_1.5"], $i["auto_nll_2"]] as $s
          | ($s | all(type == "number")) and $i.inducing_factor_selection == "auto"
          and ({"0.5": 0, "1": 1, "1.5": 2, "2": 3}[$i.inducing_factor | tostring]) as $k
          | $k != null and $s[$k] == ($s | min) and $m.diagnostics.objective == ($s | min)'
    verdict "gwi auto: the factor of the lowest validation NLL of the grid's four, each reported" $? "factor '$(jnum inducing_factor)'"
    check_jerr "gwi: inducing_factor \"best\"" 400 invalid_argument '^options\.inducing_factor$' $M "{\"name\":\"b\",\"method\":\"gwi\",\"options\":{\"inducing_factor\":\"best\"},$SSB}"
    check_jerr "gwi: inducing_factor 0" 400 invalid_argument '^options\.inducing_factor$' $M "{\"name\":\"b\",\"method\":\"gwi\",\"options\":{\"inducing_factor\":0},$SSB}"
    check_jerr "gwi: inducing_factor auto with inducing 12" 400 invalid_argument '^options\.inducing_factor$' $M "{\"name\":\"b\",\"method\":\"gwi\",\"options\":{\"inducing_factor\":\"auto\",\"inducing\":12},$SSB}"
    check_jerr "gwi: inducing_factor auto without validation rows" 400 invalid_argument '^options\.inducing_factor$' $M "{\"name\":\"b\",\"method\":\"gwi\",\"options\":{\"inducing_factor\":\"auto\",\"validation_fraction\":0},$SSB}"
}

method_renyi() {
    req GET /v1/models/re2d
    [ "$(jnum alpha)" = 0.5 ] && [ "$(jstr alpha_selection)" = fixed ] && [ -n "$(jnum exact_lml)" ] &&
        [ -n "$(jnum gap)" ] && [ -n "$(jnum certified_gap)" ] && [ -n "$(jnum upper_bound)" ] &&
        [ -n "$(jnum trace_term)" ] && [ "$(jqb '.diagnostics.objective_name')" = renyi_bound ]
    verdict "renyi reports alpha, L_a, exact LML, gap, certified gap G(a), upper bound, trace term" $? "alpha '$(jnum alpha)' gap '$(jnum gap)'"
    awk -v g="$(jnum gap)" -v c="$(jnum certified_gap)" 'BEGIN { exit !(g >= -1e-6 && g <= c) }'
    verdict "renyi: 0 <= gap <= G(a)" $? "gap $(jnum gap), G $(jnum certified_gap)"
    jhas '(.options[] | select(.name == "alpha") | .keywords == ["auto"]) and any(.options[]; .name == "dense_max_points")' "$T/listing.json"
    verdict "/v1/methods lists renyi with alpha (keyword auto) and dense_max_points" $? "not listed"
    csv_to_json re-auto '"method":"renyi","seed":2,"options":{"inducing":10,"alpha":"auto","max_iterations":30},' <"$T/ss.csv" >"$T/re_auto.json"
    check_json "fit renyi alpha auto" 201 /v1/models @"$T/re_auto.json"
    [ "$(jstr alpha_selection)" = auto ] && [ -n "$(jnum validation_rmse)" ] &&
        awk -v a="$(jnum alpha)" 'BEGIN { g = a * 20; exit !(a >= 0.3 - 1e-12 && a <= 0.7 + 1e-12 && (g - int(g + 0.5))^2 < 1e-18) }'
    verdict "renyi auto: alpha on the grid 0.30..0.70, validation RMSE reported" $? "alpha '$(jnum alpha)'"
    check_jerr "renyi: alpha 1" 400 invalid_argument '^options\.alpha$' $M "{\"name\":\"b\",\"method\":\"renyi\",\"options\":{\"alpha\":1},$SSB}"
    check_jerr "renyi: alpha -0.1" 400 invalid_argument '^options\.alpha$' $M "{\"name\":\"b\",\"method\":\"renyi\",\"options\":{\"alpha\":-0.1},$SSB}"
    check_jerr "renyi: alpha \"best\"" 400 invalid_argument '^options\.alpha$' $M "{\"name\":\"b\",\"method\":\"renyi\",\"options\":{\"alpha\":\"best\"},$SSB}"
    grep -q 'auto' "$T/body"
    verdict "bad alpha message names the keyword auto" $? "not named"
    check_jerr "renyi: alpha true" 400 invalid_argument '^options\.alpha$' $M "{\"name\":\"b\",\"method\":\"renyi\",\"options\":{\"alpha\":true},$SSB}"
    check_jerr "renyi: N above dense_max_points" 413 payload_too_large '^options\.dense_max_points$' $M "{\"name\":\"b\",\"method\":\"renyi\",\"options\":{\"dense_max_points\":2},$SSB}"
    grep -q 'sgpr' "$T/body"
    verdict "dense cap message names sgpr" $? "not named"
    check_jerr "exact: a keyword for a plain number option" 400 invalid_argument '^options\.tolerance$' $M "{\"name\":\"b\",\"options\":{\"tolerance\":\"auto\"},$SSB}"
}

# ---------------------------------------------------------------- the loop
check "GET /v1/methods" 200 GET /v1/methods
cp "$T/body" "$T/methods.json"
listed=$(jqb '[.methods[].name] | join(" ")' "$T/methods.json")
in_table=$(printf '%s\n' "$METHOD_TABLE" | cut -d'|' -f1 | tr '\n' ' ')
missing=""
for m in $listed; do
    case " $in_table " in *" $m "*) ;; *) [ "$m" = exact ] || missing="$missing $m" ;; esac
done
[ -z "$missing" ]
verdict "every listed method but exact has a row in METHOD_TABLE" $? "no row:$missing"
method_listing_checks exact "$(quick_options exact)"
printf '%s\n' "$METHOD_TABLE" >"$T/method_table.txt"
# One row at a time (not a while-read over the file: the checks must not
# share the table's stdin).
rows=$(count_lines <"$T/method_table.txt")
row=1
while [ $row -le "$rows" ]; do
    IFS='|' read -r m model fields foreign extra <<EOF
$(sed -n "${row}p" "$T/method_table.txt")
EOF
    row=$((row + 1))
    section "method $m"
    [ -n "$extra" ] || extra='{}'
    jobopts=$(quick_options "$m" | jq -c --argjson x "$extra" '. + $x')
    method_listing_checks "$m" "$jobopts"
    method_fit_checks "$m" "$model" "$fields"
    method_predict_checks "$m" "$model"
    method_sample_checks "$m" "$model"
    method_job_checks "$m" "$jobopts"
    method_option_checks "$m" "$foreign"
    "method_$m"
done
