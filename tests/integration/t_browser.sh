#!/bin/sh
# Integration area "browser": the browser view. Every file of web/ served byte for byte at
# /ui/PATH (and / as index.html) with its type, ETag (304 on If-None-Match), no-cache,
# nosniff and the page's Content-Security-Policy; the API key also as the password of HTTP
# Basic credentials (a daemon of its own with --api-key-file), with the Basic challenge on
# the page's 401s and the Bearer one on the API's; then the page itself in headless Chromium
# (tests/js/browser_test.mjs, playwright-core): fits through the form, each plot's series
# compared with the API's answers, a cancelled fit, errors shown, the page behind the key;
# a screenshot of each view in BUILD/screenshots. Without node, chromium or
# tests/js/node_modules/playwright-core (make deps) the Chromium part is skipped with a note.
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

BR_MAIN_PORT=$PORT

section "browser view: the embedded files"
n_same=0
bad=""
for f in $(cd web && find . -type f ! -name '.*' | sed 's#^\./##' | LC_ALL=C sort); do
    req GET "/ui/$f"
    if [ "$ST" = 200 ] && cmp -s "$T/body" "web/$f"; then
        n_same=$((n_same + 1))
    else
        bad="$bad $f($ST)"
    fi
done
[ -z "$bad" ] && [ "$n_same" -ge 5 ]
verdict "every file of web/ ($n_same) is served byte for byte at /ui/PATH" $? "differ or missing:$bad"

check "GET / -> 200" 200 GET /
cmp -s "$T/body" web/index.html
verdict "GET / is web/index.html byte for byte" $? "differs"
[ "$(header Content-Type)" = "text/html; charset=utf-8" ]
verdict "GET /: Content-Type text/html; charset=utf-8" $? "$(header Content-Type)"
csp=$(header Content-Security-Policy)
case $csp in
*"default-src 'self'"*"object-src 'none'"*"frame-ancestors 'none'"*)
    case $csp in *unsafe* | *"*"*) false ;; *) true ;; esac ;;
*) false ;;
esac
verdict "GET /: a strict Content-Security-Policy (self only, nothing unsafe)" $? "'$csp'"
[ "$(header X-Content-Type-Options)" = nosniff ] && [ "$(header Cache-Control)" = no-cache ]
verdict "GET /: X-Content-Type-Options nosniff, Cache-Control no-cache" $? \
    "'$(header X-Content-Type-Options)' '$(header Cache-Control)'"
etag=$(header ETag)
[ "$etag" = "\"$(sha256sum web/index.html | cut -c1-32)\"" ]
verdict "GET /: the ETag is the sha256 of the file (32 hex digits, quoted)" $? "$etag"
check "GET / with If-None-Match of its ETag -> 304" 304 GET / -H "If-None-Match: $etag"
[ ! -s "$T/body" ] && [ "$(header ETag)" = "$etag" ]
verdict "the 304 has no body and the same ETag" $? "$(wc -c <"$T/body") bytes"
check "GET / with another If-None-Match -> 200" 200 GET / -H 'If-None-Match: "0123"'
req GET /ui/app.js
[ "$(header Content-Type)" = "text/javascript; charset=utf-8" ]
verdict "/ui/app.js: Content-Type text/javascript" $? "$(header Content-Type)"
req GET /ui/style.css
[ "$(header Content-Type)" = "text/css; charset=utf-8" ]
verdict "/ui/style.css: Content-Type text/css" $? "$(header Content-Type)"
check "HEAD / -> 200" 200 HEAD / -I
check_err "POST / -> 405" 405 method_not_allowed none POST / -H 'Content-Type: application/json' -d '{}'
check_err "/ui/nope.js -> 404 in the usual shape" 404 not_found none GET /ui/nope.js
check_err "/ui/../Makefile -> 404 (no file outside the table)" 404 not_found none GET /ui/../Makefile --path-as-is
check_err "/ui/%2e%2e/Makefile -> 404" 404 not_found none GET /ui/%2e%2e/Makefile --path-as-is
# The CSP forbids inline script and style: the page must not need them.
if grep -Eiq '<script>|<script[^>]*>[^<]|<style|[[:space:]]style=|[[:space:]]on[a-z]+=' web/index.html; then
    fail "web/index.html has no inline script, style or event handler (the CSP would block it)" \
        "$(grep -Ein '<script>|<script[^>]*>[^<]|<style|[[:space:]]style=|[[:space:]]on[a-z]+=' web/index.html | head -n 2)"
else
    pass "web/index.html has no inline script, style or event handler (the CSP would block it)"
fi
# The vendored plotting library is the one its README names.
want=$(sed -n 's/.*| `\([0-9a-f]\{64\}\)` |$/\1/p' web/vendor/README.md | head -n 1)
[ -n "$want" ] && [ "$(sha256sum web/vendor/chart.umd.min.js | cut -d' ' -f1)" = "$want" ] &&
    grep -q 'Chart.js v4.6.1' web/vendor/chart.umd.min.js && grep -q 'MIT License' web/vendor/chart.js-LICENSE.md
verdict "web/vendor: Chart.js 4.6.1 with the sha256 of its README, and its MIT licence" $? "sha256 '$want'"

section "browser view: the Studies panel and the requests it makes"
grep -q 'id="view-studies"' web/index.html && grep -q 'id="view-study"' web/index.html &&
    grep -q 'href="#/studies"' web/index.html && grep -q '<script src="/ui/studies.js" defer></script>' web/index.html
verdict "index.html: the Studies views, their nav link and web/studies.js" $? "missing"
for path in "'/v1/studies'" '`${studyPath(name)}/trials`' '/predict`'; do
    grep -qF "$path" web/studies.js || fail "web/studies.js asks for $path" "not found"
done
# What the panel asks for, on a study of one double (linear) and one log-scaled double: the
# list, the study (config.parameters: how to encode), its trials, and its model's predict
# at points encoded into [0, 1] (the page encodes them itself).
BR_STUDY=br-study-$$
check_json "studies panel: POST /v1/studies -> 201" 201 /v1/studies \
    "{\"name\":\"$BR_STUDY\",\"parameters\":[{\"name\":\"a\",\"type\":\"double\",\"bounds\":[0,2]},{\"name\":\"b\",\"type\":\"double\",\"bounds\":[0.01,1],\"scale\":\"log\"}],\"objective\":{\"name\":\"y\",\"goal\":\"minimize\"},\"initial_design\":4,\"seed\":1}"
for i in 1 2 3 4 5 6; do
    jpost "/v1/studies/$BR_STUDY/trials" \
        "{\"parameters\":{\"a\":0.$i,\"b\":0.0$i},\"metrics\":{\"y\":$i}}" >/dev/null
done
check "studies panel: GET /v1/studies -> 200" 200 GET /v1/studies
jhas ".studies | map(.name) | index(\"$BR_STUDY\") != null"
verdict "studies panel: the list names the study" $? "$(head -c 200 "$T/body")"
br_model=""
for _ in $(seq 1 $((120 * SLOW))); do
    req GET "/v1/studies/$BR_STUDY"
    br_model=$(jqb '.model.name // empty')
    [ -n "$br_model" ] && break
    sleep 0.5
done
jhas '.config.parameters[1].scale == "log" and (.config.parameters | length) == 2 and .best_trial.id == 1'
verdict "studies panel: GET /v1/studies/NAME has config.parameters (with scale) and best_trial" $? "$(head -c 300 "$T/body")"
[ "$br_model" = "study.$BR_STUDY" ]
verdict "studies panel: the study names its model study.NAME" $? "model '$br_model'"
check "studies panel: GET /v1/studies/NAME/trials -> 200" 200 GET "/v1/studies/$BR_STUDY/trials"
jhas '(.trials | length) == 6 and .trials[0].parameters.a == 0.1'
verdict "studies panel: the trials with their parameters by name" $? "$(head -c 200 "$T/body")"
check_json "studies panel: predict at encoded points -> 200" 200 "/v1/models/$br_model/predict" \
    '{"X":[[0.05,0.0],[0.5,0.5],[1,1]],"include_noise":false}'
jhas '(.mean | length) == 3 and (.variance | all(. > 0))'
verdict "studies panel: the model predicts on the 2 encoded columns" $? "$(head -c 200 "$T/body")"
check "studies panel: DELETE the study -> 204" 204 DELETE "/v1/studies/$BR_STUDY"

section "browser view: the API key as a Basic password"
printf 'browser-key-0123456789\n' >"$T/br_keyfile"
BR_KEY=browser-key-0123456789
BR_KPORT=""
if start_daemon "$T/br_key.log" --db "$T/br_key.db" --api-key-file "$T/br_keyfile"; then
    BR_KPID=$DPID
    BR_KPORT=$DPORT
    PORT=$BR_KPORT
    b64() { printf '%s' "$1" | base64 | tr -d '\n'; }
    check "Basic (any user, the key as password): GET /v1/models -> 200" 200 GET /v1/models \
        -H "Authorization: Basic $(b64 "anyone:$BR_KEY")"
    check "Basic with curl -u: GET / -> 200" 200 GET / -u "me:$BR_KEY"
    check "Basic with an empty user name: GET /ui/app.js -> 200" 200 GET /ui/app.js \
        -H "Authorization: Basic $(b64 ":$BR_KEY")"
    check_json "Basic: a fit -> 201" 201 /v1/models '{"name":"b","X":[0,1,2],"y":[0,1,0]}' -u "me:$BR_KEY"
    check "Bearer opens the page too: GET / -> 200" 200 GET / -H "Authorization: Bearer $BR_KEY"
    check_err "Basic with a wrong key: /v1/models -> 401" 401 unauthorized - GET /v1/models -u "me:${BR_KEY}x"
    check_err "Basic with a wrong key: / -> 401" 401 unauthorized - GET / -u "me:${BR_KEY%?}"
    check_err "Basic with the key as the user name -> 401" 401 unauthorized - GET / -u "$BR_KEY:"
    check_err "Basic that is not base64 -> 401" 401 unauthorized - GET / -H "Authorization: Basic $BR_KEY"
    check_err "/ without credentials -> 401" 401 unauthorized - GET /
    [ "$(header WWW-Authenticate)" = 'Basic realm="gpserve", charset="UTF-8"' ]
    verdict "the 401 of / asks for Basic (the browser prompts)" $? "'$(header WWW-Authenticate)'"
    check_err "/ui/app.js without credentials -> 401" 401 unauthorized - GET /ui/app.js
    header WWW-Authenticate | grep -q '^Basic realm="gpserve"'
    verdict "the 401 of /ui/... asks for Basic" $? "'$(header WWW-Authenticate)'"
    check_err "/v1/models without credentials -> 401" 401 unauthorized - GET /v1/models
    [ "$(header WWW-Authenticate)" = 'Bearer realm="gpserve"' ]
    verdict "the 401 of the API asks for Bearer" $? "'$(header WWW-Authenticate)'"
    check "/healthz still needs nothing" 200 GET /healthz
    PORT=$BR_MAIN_PORT
else
    fail "a daemon with --api-key-file starts (browser area)"
fi

section "browser view: headless Chromium"
BR_CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
if ! command -v node >/dev/null 2>&1; then
    note "skipped: the browser view in Chromium: no node (make deps installs nodejs)"
elif [ ! -x "$BR_CHROMIUM" ]; then
    note "skipped: the browser view in Chromium: no $BR_CHROMIUM (make deps installs chromium)"
elif [ ! -f tests/js/node_modules/playwright-core/package.json ]; then
    note "skipped: the browser view in Chromium: no tests/js/node_modules/playwright-core (make deps runs npm ci)"
else
    case $BUILD in /*) BR_SHOTS=$BUILD/screenshots ;; *) BR_SHOTS=$ROOT/$BUILD/screenshots ;; esac
    rm -f "$BR_SHOTS"/*.png
    set -- --base "http://127.0.0.1:$BR_MAIN_PORT" --out "$BR_SHOTS" --timeout $((60000 * SLOW))
    [ -n "$BR_KPORT" ] && set -- "$@" --auth-base "http://127.0.0.1:$BR_KPORT" --key "$BR_KEY"
    CHROMIUM=$BR_CHROMIUM timeout $((300 * SLOW)) node tests/js/browser_test.mjs "$@" \
        >"$T/browser.out" 2>"$T/browser.err"
    br_rc=$?
    while IFS= read -r line; do
        case $line in
        "ok   "*) pass "browser: ${line#ok   }" ;;
        "FAIL "*)
            rest=${line#FAIL }
            fail "browser: ${rest%%: *}" "${rest#*: }"
            ;;
        "note"*) echo "$line" ;;
        esac
    done <"$T/browser.out"
    grep -q '^browser checks done' "$T/browser.out"
    verdict "the browser test ran to its end" $? "exit $br_rc: $(tail -n 3 "$T/browser.err" | tr '\n' ' ')"
    missing=""
    for s in models fit-succeeded fit-running fit-cancelled model-1d model-2d model-class model-softmax studies study auth-model; do
        [ -s "$BR_SHOTS/$s.png" ] || missing="$missing $s"
    done
    [ -z "$missing" ]
    verdict "a screenshot of each view in $BUILD/screenshots/" $? "missing:$missing"
fi
[ -n "$BR_KPORT" ] && stop_daemon "$BR_KPID"
PORT=$BR_MAIN_PORT
