#!/bin/sh
# Integration area "logs": the daemons' logs: request lines, no 5xx, no sanitizer report
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "daemon logs"
# One line per request on stderr; no 500 anywhere; no sanitizer report.
# A request of this area's own (the main daemon may already be stopped by the
# restart area; then the other daemons' lines are there), its line awaited.
alive "$MAIN_PID" && req GET /healthz
i=0
while ! grep -Eq 'GET /healthz 200' "$T"/*.log && [ $i -lt 20 ]; do
    sleep 0.1
    i=$((i + 1))
done
grep -Eq 'GET /healthz 200' "$T"/*.log
verdict "request log line (method, path, status) on stderr" $? "no 'GET /healthz 200' in the logs"
# The datasets area's quota daemon answers 507 on purpose (its log is only
# scanned for sanitizer reports below).
LOGS_5XX=$(ls "$T"/*.log | grep -v '/datasets_quota\.log$')
if grep -Eq '(GET|POST|PUT|DELETE|PATCH) [^ ]* 5[0-9][0-9] ' $LOGS_5XX; then
    fail "no request was answered 5xx" "$(grep -Eh '(GET|POST|PUT|DELETE|PATCH) [^ ]* 5[0-9][0-9] ' $LOGS_5XX | head -n 3 | tr '\n' ';')"
else
    pass "no request was answered 5xx"
fi
if grep -Eq 'AddressSanitizer|LeakSanitizer|runtime error:' "$T"/*.log; then
    fail "no sanitizer report in the daemon logs" "$(grep -Eh -m 3 'AddressSanitizer|LeakSanitizer|runtime error:' "$T"/*.log | tr '\n' ';')"
else
    pass "no sanitizer report in the daemon logs"
fi
