#!/bin/sh
# Integration area "bad_requests": bad requests: status, code and field of each
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "bad requests"
need_sine
sine_reference
need_finished_job
check_jerr "malformed JSON (fit)" 400 malformed_json - $M '{"name": "x", "X": [[1]'
check_jerr "malformed JSON (predict)" 400 malformed_json - $P '{"X": [[1]],}'
check_jerr "empty body" 400 malformed_json - $M ''
check_jerr "body is not an object" 400 invalid_argument - $M '[1,2,3]'
check_jerr "X is a string" 400 invalid_argument '^X$' $M '{"name":"b","X":"abc","y":[1,2]}'
check_jerr "y is an object" 400 invalid_argument '^y$' $M "{\"name\":\"b\",\"X\":$X2,\"y\":{\"a\":1}}"
check_jerr "missing X" 400 invalid_argument '^X$' $M '{"name":"b","y":[1,2,3]}'
check_jerr "missing y" 400 invalid_argument '^y$' $M "{\"name\":\"b\",\"X\":$X2}"
check_jerr "missing name" 400 invalid_argument '^name$' $M "{\"X\":$X2,\"y\":[1,2,3]}"
check_jerr "\"NaN\" string in X" 422 invalid_data '^X\[1\]' $M '{"name":"b","X":[[0],["NaN"],[2]],"y":[1,2,3]}'
check_jerr "\"Inf\" string in X" 422 invalid_data '^X\[2\]' $M '{"name":"b","X":[[0],[1],["Infinity"]],"y":[1,2,3]}'
check_jerr "NaN literal (not JSON)" 400 malformed_json - $M "{\"name\":\"b\",\"X\":$X2,\"y\":[1,NaN,3]}"
check_jerr "1e999 in y (overflows a double)" 422 invalid_data '^y\[1\]$' $M "{\"name\":\"b\",\"X\":$X2,\"y\":[1,1e999,3]}"
check_jerr "string cell in X" 422 invalid_data '^X\[0\]\[1\]$' $M '{"name":"b","X":[[0,"abc"],[1,2],[2,3]],"y":[1,2,3]}'
check_jerr "string in y" 422 invalid_data '^y\[2\]$' $M "{\"name\":\"b\",\"X\":$X2,\"y\":[1,2,\"3\"]}"
check_jerr "ragged rows" 422 invalid_data '^X\[1\]$' $M '{"name":"b","X":[[0,1],[1],[2,3]],"y":[1,2,3]}'
check_jerr "X/y length mismatch" 422 invalid_data '^(y|X)$' $M "{\"name\":\"b\",\"X\":$X2,\"y\":[1,2]}"
check_jerr "empty X" 422 invalid_data '^X$' $M '{"name":"b","X":[],"y":[]}'
check_jerr "dimension mismatch on predict" 422 invalid_data '^X' $P '{"X":[[1,2],[3,4]]}'
check_jerr "predict without X" 400 invalid_argument '^X$' $P '{"include_noise":true}'
check_jerr "include_noise not a bool" 400 invalid_argument '^include_noise$' $P "{\"X\":$SINE_X,\"include_noise\":\"yes\"}"
check_jerr "unknown model (predict)" 404 not_found - /v1/models/nosuchmodel/predict "{\"X\":$SINE_X}"
check_err "unknown model (GET)" 404 not_found - GET /v1/models/nosuchmodel
check_err "unknown model (DELETE)" 404 not_found - DELETE /v1/models/nosuchmodel
check_err "unknown version (GET)" 404 not_found - GET /v1/models/sine/versions/99
check_jerr "unknown version (predict)" 404 not_found - $P "{\"X\":$SINE_X,\"version\":99}"
check_err "unknown route" 404 not_found - GET /v1/nosuchroute
check_err "unknown route under a model" 404 not_found - POST /v1/models/sine/nosuchaction \
    -H 'Content-Type: application/json' --data-binary '{}'
check_jerr "unknown method name" 400 invalid_argument '^method$' $M "{\"name\":\"b\",\"method\":\"nosuch\",\"X\":$X2,\"y\":[1,2,3]}"
check_err "wrong verb PUT /v1/models" 405 method_not_allowed - PUT /v1/models
allow=$(header Allow)
case ",$(printf '%s' "$allow" | tr -d ' ')," in
*,GET,*POST,* | *,POST,*GET,*) pass "405 has Allow: $allow" ;;
*) fail "405 has Allow: GET, POST" "Allow: '$allow'" ;;
esac
check_err "wrong verb GET predict" 405 method_not_allowed - GET $P
allow=$(header Allow)
[ "$(printf '%s' "$allow" | tr -d ' ')" = POST ]
verdict "405 on predict has Allow: POST" $? "Allow: '$allow'"
check_err "wrong verb POST /healthz" 405 method_not_allowed - POST /healthz -H 'Content-Type: application/json' --data-binary '{}'
check_err "wrong content type (text/plain)" 415 unsupported_media_type - POST $M -H 'Content-Type: text/plain' --data-binary "$SINE_BODY"
check_err "form content type" 415 unsupported_media_type - POST $P --data-binary "{\"X\":$SINE_X}"
check_jerr "bad name characters" 400 invalid_argument '^name$' $M "{\"name\":\"a b/c\",\"X\":$X2,\"y\":[1,2,3]}"
long_name=$(awk 'BEGIN { for (i = 0; i < 65; i++) printf "n" }')
check_jerr "name too long (65)" 400 invalid_argument '^name$' $M "{\"name\":\"$long_name\",\"X\":$X2,\"y\":[1,2,3]}"
check_json "name of 64 characters accepted" 201 $M "{\"name\":\"${long_name#n}\",\"X\":$X2,\"y\":[1,2,3]}"
check_jerr "unknown kernel type" 400 invalid_argument '^kernel' $M "{\"name\":\"b\",\"kernel\":{\"type\":\"nosuch\"},\"X\":$X2,\"y\":[1,2,3]}"
check_jerr "negative lengthscale" 400 invalid_argument '^kernel' $M "{\"name\":\"b\",\"kernel\":{\"type\":\"rbf\",\"lengthscale\":-1},\"X\":$X2,\"y\":[1,2,3]}"
# periodic takes the Euclidean distance of its columns: not positive definite
# over several, refused at parsing naming the leaf (once not_positive_definite
# from the optimiser's start, or a model only the jitter let through).
XP='[[0,1],[1,0],[2,2],[3,1]]'
check_jerr "periodic over two columns" 422 unsupported '^kernel$' $M "{\"name\":\"perb\",\"kernel\":{\"type\":\"periodic\"},\"X\":$XP,\"y\":[1,2,3,4]}"
jhas '.error.message | test("active_dims to one column") and test("product")'
verdict "the periodic refusal says to set active_dims or multiply one-column periodics" $? "$(jqb .error.message)"
check_jerr "periodic with two active_dims" 422 unsupported '^kernel\.active_dims$' $M "{\"name\":\"perb\",\"kernel\":{\"type\":\"periodic\",\"active_dims\":[0,1]},\"X\":$XP,\"y\":[1,2,3,4]}"
check_jerr "periodic over two columns inside a sum of products" 422 unsupported '^kernel\.terms\[0\]\.terms\[1\]$' $M "{\"name\":\"perb\",\"kernel\":{\"type\":\"sum\",\"terms\":[{\"type\":\"product\",\"terms\":[{\"type\":\"rbf\"},{\"type\":\"periodic\"}]},{\"type\":\"white\"}]},\"X\":$XP,\"y\":[1,2,3,4]}"
check_jerr "periodic over two columns, async" 422 unsupported '^kernel$' $M "{\"name\":\"perb\",\"async\":true,\"kernel\":{\"type\":\"periodic\"},\"X\":$XP,\"y\":[1,2,3,4]}"
check_err "periodic over two columns, CSV" 422 unsupported '^kernel$' POST "$M?name=perb&kernel=%7B%22type%22%3A%22periodic%22%7D" \
    -H 'Content-Type: text/csv' --data-binary "$(printf 'a,b,y\n0,1,1\n1,0,2\n2,2,3\n3,1,4\n')"
check_err "a refused periodic stored nothing" 404 not_found - GET /v1/models/perb
check_json "a product of one-column periodic kernels fits" 201 $M "{\"name\":\"perok\",\"kernel\":{\"type\":\"product\",\"terms\":[{\"type\":\"periodic\",\"active_dims\":[0]},{\"type\":\"periodic\",\"active_dims\":[1]}]},\"X\":$XP,\"y\":[1,2,3,4]}"
req DELETE /v1/models/perok
check_jerr "negative noise variance" 400 invalid_argument '^noise' $M "{\"name\":\"b\",\"noise\":{\"variance\":-0.1},\"X\":$X2,\"y\":[1,2,3]}"
check_jerr "unknown option" 400 invalid_argument '^options' $M "{\"name\":\"b\",\"options\":{\"nosuch\":1},\"X\":$X2,\"y\":[1,2,3]}"
check_jerr "option out of range" 400 invalid_argument '^options' $M "{\"name\":\"b\",\"options\":{\"max_iterations\":-5},\"X\":$X2,\"y\":[1,2,3]}"
check_jerr "unknown top-level field" 400 invalid_argument - $M "{\"name\":\"b\",\"nosuchfield\":1,\"X\":$X2,\"y\":[1,2,3]}"
check_jerr "seed is a string" 400 invalid_argument '^seed$' $M "{\"name\":\"b\",\"seed\":\"x\",\"X\":$X2,\"y\":[1,2,3]}"
check_jerr "bad quantile (1.5)" 400 invalid_argument '^quantiles' $P "{\"X\":$SINE_X,\"quantiles\":[0.5,1.5]}"
check_jerr "bad quantile (0)" 400 invalid_argument '^quantiles' $P "{\"X\":$SINE_X,\"quantiles\":[0]}"
check_jerr "n_samples 0" 400 invalid_argument '^n_samples$' $S "{\"X\":$SINE_X,\"n_samples\":0,\"seed\":1}"
check_jerr "observe with a wrong arity" 422 invalid_data '^X\[0\]$' /v1/models/sine/observe '{"X":[[0.5,1]],"y":[0.4]}'
check_err "CSV with a text cell" 422 invalid_data - POST "$M?name=b" -H 'Content-Type: text/csv' \
    --data-binary "$(printf 'a,y\n1,2\nzz,3\n4,5\n')"
# Only decimal numbers are numbers (strtod would read 0x10 as 16, and inf, nan).
check_err "CSV with a hexadecimal cell" 422 invalid_data '^X\[1\]\[0\]$' POST "$M?name=csvhex" \
    -H 'Content-Type: text/csv' --data-binary "$(printf 'a,y\n1,2\n0x10,3\n4,5\n')"
check_err "CSV with inf in the target" 422 invalid_data '^y\[0\]$' POST "$M?name=csvinf" \
    -H 'Content-Type: text/csv' --data-binary "$(printf 'a,y\n1,inf\n2,3\n4,5\n')"
check_err "CSV query seed=0x10" 400 invalid_argument '^seed$' POST "$M?name=csvseed&seed=0x10" \
    -H 'Content-Type: text/csv' --data-binary "$(printf 'a,y\n1,2\n2,3\n4,5\n')"
check_err "CSV with a duplicate column name" 422 invalid_data '^X$' POST "$M?name=csvdup" \
    -H 'Content-Type: text/csv' --data-binary "$(printf 'a,b,a,y\n1,2,3,4\n2,3,4,5\n4,5,6,7\n')"
jhas '.error.message | test("column .a. appears twice")'
verdict "the duplicate column is named" $? "message: $(jqb .error.message)"
check_err "CSV with an unknown ?target" 400 invalid_argument '^target$' POST "$M?name=b&target=nosuch" \
    -H 'Content-Type: text/csv' --data-binary @"$T/plane_h.csv"
check_err "cancel a finished job" 409 conflict - DELETE "/v1/jobs/$JOB"
check_err "unknown job (GET)" 404 not_found - GET /v1/jobs/nosuchjob
check_err "unknown job (DELETE)" 404 not_found - DELETE /v1/jobs/nosuchjob
# Body limits (the daemon runs with --max-body-mb 1).
awk 'BEGIN { printf "{\"name\":\"big\",\"X\":["; for (i = 0; i < 100000; i++) printf "%s[%d.123456789]", (i ? "," : ""), i; printf "],\"y\":[0]}" }' >"$T/big.json"
check_err "2 MB body (limit 1 MB)" 413 payload_too_large - POST $M -H 'Content-Type: application/json' --data-binary @"$T/big.json"
check_err "2 MB body without Expect: 100-continue" 413 payload_too_large - POST $M -H 'Content-Type: application/json' -H 'Expect:' --data-binary @"$T/big.json"
check_err "Content-Length above the cap" 413 payload_too_large - POST $M -H 'Content-Type: application/json' \
    -H 'Content-Length: 5000000' --data-binary '{"name":"x"}'
# More input columns than --max-input-dim (default 1000), JSON and CSV: 413 naming X.
awk 'BEGIN { printf "{\"name\":\"wide\",\"X\":[["; for (i = 0; i < 1001; i++) printf "%s%d", (i ? "," : ""), i; printf "]],\"y\":[1]}" }' >"$T/wide.json"
check_jerr "1001 input columns (JSON)" 413 payload_too_large '^X$' $M @"$T/wide.json"
awk 'BEGIN { for (i = 0; i <= 100000; i++) printf "%sc%d", (i ? "," : ""), i; printf "\n";
             for (i = 0; i <= 100000; i++) printf "%s1", (i ? "," : ""); printf "\n" }' >"$T/wide.csv"
check_err "100000 input columns (CSV)" 413 payload_too_large '^X$' POST "$M?name=wide" \
    -H 'Content-Type: text/csv' --data-binary @"$T/wide.csv"
check "daemon still healthy after the bad requests" 200 GET /healthz
check "model sine still predicts after the bad requests" 200 POST $P -H 'Content-Type: application/json' --data-binary "{\"X\":$SINE_X}"
cmp -s "$T/body" "$T/pred_noise.json"
verdict "same prediction as before the bad requests" $? "body changed"
