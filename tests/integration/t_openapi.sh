#!/bin/sh
# Integration area "openapi": /openapi.yaml is valid YAML, lints clean under
# Redocly's recommended rules (redocly.yaml), and every path and verb answers.
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "OpenAPI"
need_sine
need_finished_job
check "GET /openapi.yaml" 200 GET /openapi.yaml
cp "$T/body" "$T/openapi.yaml"
grep -q '^openapi: *["'"'"']\{0,1\}3' "$T/openapi.yaml"
verdict "openapi.yaml declares openapi: 3.x" $? "no 'openapi: 3' line"
# The whole document parses as YAML (the method schemas are generated, an
# object option's schema spliced in as flow text), where a YAML parser is at hand.
if command -v python3 >/dev/null 2>&1 && python3 -c 'import yaml' 2>/dev/null; then
    python3 -c 'import sys, yaml; d = yaml.safe_load(open(sys.argv[1])); sys.exit(not (isinstance(d, dict) and "paths" in d and "components" in d))' \
        "$T/openapi.yaml" 2>"$T/yamlerr"
    verdict "openapi.yaml parses as YAML (python3 yaml)" $? "$(tail -n 3 "$T/yamlerr" | tr '\n' ' ')"
else
    note "no python3 with the yaml module: openapi.yaml not parsed as YAML"
fi
# Redocly's linter, recommended rules (redocly.yaml), on the document served:
# no error and no warning. Needs node and the package of tests/js (make deps).
REDOCLY=$ROOT/tests/js/node_modules/.bin/redocly
if ! command -v node >/dev/null 2>&1; then
    note "no node: openapi.yaml not linted (make deps installs nodejs and @redocly/cli)"
elif [ ! -x "$REDOCLY" ]; then
    note "no $REDOCLY: openapi.yaml not linted (make deps runs npm ci in tests/js)"
else
    REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_NOTIFICATIONS=true \
        "$REDOCLY" lint --config "$ROOT/redocly.yaml" --format=json "$T/openapi.yaml" \
        >"$T/lint.json" 2>"$T/lint.err"
    lint_rc=$?
    lint_totals=$(jq -r '.totals | "\(.errors) errors, \(.warnings) warnings"' "$T/lint.json" 2>/dev/null)
    if [ "$lint_rc" -eq 0 ] && [ "$lint_totals" = "0 errors, 0 warnings" ]; then
        pass "openapi.yaml lints clean (redocly, recommended rules)"
    else
        fail "openapi.yaml lints clean (redocly, recommended rules)" \
            "exit $lint_rc, ${lint_totals:-no report}; $(jq -r '.problems[:5][] |
                "\(.ruleId) at \(.location[0].pointer): \(.message)"' "$T/lint.json" 2>/dev/null |
                tr '\n' ';') $(tail -n 2 "$T/lint.err" | tr '\n' ' ')"
    fi
fi
# Every path and verb of the document's paths: section, as "VERB PATH".
awk '/^paths:/ { on = 1; next }
     on && /^[^[:space:]#]/ { on = 0 }
     !on { next }
     /^[[:space:]]*["'"'"']?\// {
         p = $0; sub(/^[[:space:]]*["'"'"']?/, "", p); sub(/["'"'"']?[[:space:]]*:.*$/, "", p);
         match($0, /^[[:space:]]*/); pind = RLENGTH; vind = -1; next }
     p != "" && /^[[:space:]]*(get|put|post|delete|patch|options|head|trace):[[:space:]]*$/ {
         match($0, /^[[:space:]]*/);
         if (RLENGTH <= pind) next;
         if (vind < 0) vind = RLENGTH;
         if (RLENGTH == vind) { v = $0; gsub(/[[:space:]:]/, "", v); print toupper(v), p } }' \
    "$T/openapi.yaml" >"$T/routes.txt"
nroutes=$(count_lines <"$T/routes.txt")
[ "$nroutes" -ge 26 ]
verdict "openapi.yaml lists $nroutes path+verb pairs (docs/design/api.md has 26)" $? "too few"
# Every route of docs/design/api.md is documented (placeholders compared as {}).
sed 's/{[^}]*}/{}/g' "$T/routes.txt" | sort -u >"$T/routes.norm"
missing=""
for r in "GET /healthz" "GET /readyz" "GET /metrics" "GET /openapi.yaml" "GET /v1/methods" \
    "POST /v1/models" "GET /v1/models" "GET /v1/models/{}" "GET /v1/models/{}/versions/{}" \
    "DELETE /v1/models/{}" "DELETE /v1/models/{}/versions/{}" "POST /v1/models/{}/predict" "POST /v1/models/{}/sample" \
    "POST /v1/models/{}/observe" "GET /v1/jobs/{}" "DELETE /v1/jobs/{}" \
    "GET /v2" "GET /v2/health/live" "GET /v2/health/ready" "GET /v2/models/{}" \
    "GET /v2/models/{}/ready" "POST /v2/models/{}/infer" "GET /v2/models/{}/versions/{}" \
    "GET /v2/models/{}/versions/{}/ready" "POST /v2/models/{}/versions/{}/infer" "GET /" \
    "GET /ui/{}"; do
    grep -qxF "$r" "$T/routes.norm" || missing="$missing, $r"
done
[ -z "$missing" ]
verdict "openapi.yaml documents every route of docs/design/api.md" $? "missing ${missing#, }"
# Each documented route answers (not a 404 for the route, not 405, not 5xx).
jpost /v1/models '{"name":"oa-del","X":[[0],[1],[2]],"y":[0,1,0]}' >/dev/null
# two versions of a model whose version 1 the version DELETE route removes
jpost /v1/models '{"name":"oa-delv","X":[[0],[1],[2]],"y":[0,1,0]}' >/dev/null
jpost /v1/models '{"name":"oa-delv","X":[[0],[1],[2]],"y":[0,1,0]}' >/dev/null
# an alias for the alias routes to find (the DELETE route removes it again)
req PUT /v1/models/sine/aliases/oa -H 'Content-Type: application/json' --data-binary '{"version":1}'
# a study for the study routes, and one the study DELETE route removes
for s in sine oa-sdel; do
    req DELETE /v1/studies/$s
    jpost /v1/studies "{\"name\":\"$s\",\"parameters\":[{\"name\":\"x\",\"type\":\"double\",
        \"bounds\":[0,1]}],\"objective\":{\"name\":\"y\",\"goal\":\"minimize\"}}" >/dev/null
done
while read -r verb path; do
    p=$(printf '%s\n' "$path" | sed -e 's#/v1/jobs/{[^}]*}#/v1/jobs/'"$JOB"'#' \
        -e 's#/versions/{[^}]*}#/versions/1#' -e 's#/aliases/{[^}]*}#/aliases/oa#')
    case "$verb $p" in
    "DELETE /v1/models/{"*/aliases/*) p=$(printf '%s\n' "$p" | sed 's/{[^}]*}/sine/') ;;
    "DELETE /v1/models/{"*/versions/*) p=$(printf '%s\n' "$p" | sed 's/{[^}]*}/oa-delv/') ;;
    "DELETE /v1/models/{"*) p=$(printf '%s\n' "$p" | sed 's/{[^}]*}/oa-del/') ;;
    "DELETE /v1/studies/{"*) p=$(printf '%s\n' "$p" | sed 's/{[^}]*}/oa-sdel/') ;;
    "GET /ui/{"*) p=/ui/app.js ;;
    *) p=$(printf '%s\n' "$p" | sed 's/{[^}]*}/sine/') ;;
    esac
    case "$verb $p" in
    "POST /v1/models") set -- -H 'Content-Type: application/json' --data-binary '{"name":"oa-fit","X":[[0],[1],[2]],"y":[0,1,0]}' ;;
    # two columns: answered (422), and the shared sine model stays as it is
    "POST "*/observe) set -- -H 'Content-Type: application/json' --data-binary '{"X":[[0.5,0.5]],"y":[0.4]}' ;;
    # a data set for the GET and DELETE that follow it
    "PUT /v1/datasets/"*) set -- -H 'Content-Type: text/csv' --data-binary "x,y
0,1
1,2" ;;
    "POST /v2/"*) set -- -H 'Content-Type: application/json' --data-binary '{"inputs":[{"name":"X","datatype":"FP64","shape":[1,1],"data":[0.5]}]}' ;;
    "POST "*) set -- -H 'Content-Type: application/json' --data-binary '{"X":[[0.5]]}' ;;
    *) set -- ;;
    esac
    req "$verb" "$p" "$@"
    case $ST in
    404 | 405 | 5?? | 000) fail "openapi route $verb $path answers" "$verb $p -> $ST" body ;;
    *) pass "openapi route $verb $path answers ($verb $p -> $ST)" ;;
    esac
done <"$T/routes.txt"
req DELETE /v1/models/oa-delv
req DELETE /v1/studies/sine
