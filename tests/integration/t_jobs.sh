#!/bin/sh
# Integration area "jobs": an asynchronous fit and its job
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "async fit and jobs"
check_json "async fit -> 202" 202 /v1/models @"$T/async.json"
JOB=$(jstr job)
loc=$(header Location)
[ -n "$JOB" ] && [ "$loc" = "/v1/jobs/$JOB" ] && [ "$(jstr status)" = queued ]
verdict "202 body {\"job\",\"status\":\"queued\"}, Location /v1/jobs/ID" $? "job '$JOB', Location '$loc'"
if wait_job "$JOB" succeeded; then pass "job $JOB reaches succeeded"; else fail "job reaches succeeded" "status '$JOB_STATUS' after polling" body; fi
jhas '(.model | type == "object") and (.progress | type == "object")' 
verdict "succeeded job carries progress and model" $? "no model/progress object"
check "GET the model the job fitted" 200 GET /v1/models/asyncm
