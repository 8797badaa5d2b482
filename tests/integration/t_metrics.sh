#!/bin/sh
# Integration area "metrics": the Prometheus metrics
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "metrics"
# fits_total before and after two fits of this area.
fits_sum() { awk '/^gpserve_fits_total/ { s += $NF } END { print s + 0 }' "$1"; }
req GET /metrics
cp "$T/body" "$T/metrics0.txt"
jpost /v1/models '{"name":"metrics-a","X":[[0],[1],[2]],"y":[0,1,0]}' >/dev/null
jpost /v1/models '{"name":"metrics-b","X":[[0],[1],[2]],"y":[1,0,1]}' >/dev/null
check "GET /metrics" 200 GET /metrics
cp "$T/body" "$T/metrics.txt"
ct=$(header Content-Type)
case $ct in text/plain*) pass "metrics Content-Type $ct" ;; *) fail "metrics Content-Type text/plain" "'$ct'" ;; esac
for m in gpserve_http_requests_total gpserve_http_request_duration_seconds_bucket gpserve_fits_total \
    gpserve_jobs_queued gpserve_jobs_running gpserve_models_loaded gpserve_jitter_escalations_total \
    gpserve_variance_clamps_total gpserve_batches_total gpserve_batched_requests_total \
    gpserve_batched_points_total gpserve_batch_max_requests gpserve_blas_core_info; do
    grep -Eq "^$m(\{[^}]*\})? [-+0-9.eEInfa]+\$" "$T/metrics.txt"
    verdict "metric $m" $? "no sample line"
done
grep -q '^# TYPE gpserve_http_request_duration_seconds histogram' "$T/metrics.txt" &&
    grep -q '^gpserve_http_request_duration_seconds_bucket{.*le="+Inf"' "$T/metrics.txt"
verdict "request duration is a histogram with a +Inf bucket" $? "no TYPE histogram / +Inf bucket"
[ "$(fits_sum "$T/metrics.txt")" -ge $(($(fits_sum "$T/metrics0.txt") + 2)) ]
verdict "gpserve_fits_total counts the fits (+2 after two fits)" $? "$(fits_sum "$T/metrics0.txt") -> $(fits_sum "$T/metrics.txt")"
