#!/bin/sh
# Integration area "ts_client": the TypeScript client of clients/typescript
# (openapi-fetch over the types openapi-typescript generates from
# api/openapi.yaml). schema.d.ts is what the document generates today; tsc
# type-checks the client and its tests against it, and fails on a copy whose
# schema lost a route the tests call; node's test runner runs the tests
# (clients/typescript/test/) against the main daemon (fits sync and async,
# predictions against the closed form and against curl, samples, typed
# errors, a CSV fit) and a daemon of this area that needs an API key, each
# node test one line here; the README's example is example.mjs, and runs.
# Skipped with a note without node or the npm packages.
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "TypeScript client"
TSC_DIR=$ROOT/clients/typescript
TSC_BIN=$TSC_DIR/node_modules/.bin

# The command of package.json's "generate" script, to standard output.
ts_generate() {
    (cd "$TSC_DIR" && "$TSC_BIN/openapi-typescript" ../../api/openapi.yaml --default-non-nullable=false)
}

# ts_typecheck DIR: tsc --noEmit on the package in DIR; output in $T/tsc.out.
ts_typecheck() {
    (cd "$1" && "$TSC_BIN/tsc" --noEmit -p .) >"$T/tsc.out" 2>&1
}

# The node tests' TAP: one pass or fail line per top-level test.
ts_report() {
    awk '/^ok [0-9]+ - / && / # SKIP/ { sub(/^ok [0-9]+ - /, ""); print "SKIP " $0; next }
         /^ok [0-9]+ - / { sub(/^ok [0-9]+ - /, ""); print "PASS " $0; next }
         /^not ok [0-9]+ - / { sub(/^not ok [0-9]+ - /, ""); name = $0; why = ""; inerr = 1; next }
         inerr && /^  \.\.\.$/ { print "FAIL " name "\t" why; inerr = 0; next }
         inerr && more { sub(/^ +/, ""); why = why $0; more = 0; next }
         inerr && /^  (error|expected|actual):/ {
             sub(/^  /, ""); more = / [|>]-?$/; if (more) sub(/ [|>]-?$/, " ");
             why = why (why == "" ? "" : "; ") $0 }' \
        "$T/node.tap" >"$T/node.results"
    while IFS= read -r line; do
        name=${line#* }
        case $line in
        PASS*) pass "ts client: $name" ;;
        SKIP*) note "ts client: skipped: $name" ;;
        FAIL*) fail "ts client: ${name%%	*}" "${name#*	}" ;;
        esac
    done <"$T/node.results"
}

ts_client_tests() {
    # schema.d.ts is what api/openapi.yaml generates today.
    if ts_generate >"$T/schema.d.ts" 2>"$T/ots.err" && [ -s "$T/schema.d.ts" ]; then
        cmp -s "$T/schema.d.ts" "$TSC_DIR/schema.d.ts"
        verdict "clients/typescript/schema.d.ts is current" $? \
            "stale: run 'npm run generate' in clients/typescript ($(diff "$TSC_DIR/schema.d.ts" "$T/schema.d.ts" | head -n 6 | tr '\n' ' '))"
    else
        fail "openapi-typescript generates the schema" "$(tail -n 3 "$T/ots.err" | tr '\n' ' ')"
    fi
    # The client and its tests type-check against it...
    ts_typecheck "$TSC_DIR"
    verdict "tsc --noEmit: the client and its tests fit schema.d.ts" $? \
        "$(head -n 5 "$T/tsc.out" | tr '\n' ' ')"
    # ... and would not against a schema without the predict route.
    rm -rf "$T/tsmut"
    mkdir -p "$T/tsmut"
    cp -R "$TSC_DIR/client.mjs" "$TSC_DIR/client.d.ts" "$TSC_DIR/tsconfig.json" \
        "$TSC_DIR/package.json" "$TSC_DIR/test" "$T/tsmut/"
    ln -s "$TSC_DIR/node_modules" "$T/tsmut/node_modules"
    sed 's#"/v1/models/{name}/predict"#"/v1/models/{name}/forecast"#' "$TSC_DIR/schema.d.ts" \
        >"$T/tsmut/schema.d.ts"
    if ts_typecheck "$T/tsmut"; then
        fail "tsc fails when the schema loses a route the tests call" "tsc passed"
    else
        grep -q 'predict' "$T/tsc.out"
        verdict "tsc fails when the schema loses a route the tests call" $? \
            "$(head -n 3 "$T/tsc.out" | tr '\n' ' ')"
    fi
    # The README's example is example.mjs, and it runs.
    awk '/^```js$/ { on = 1; next } on && /^```$/ { exit } on' "$TSC_DIR/README.md" >"$T/example.js"
    cmp -s "$T/example.js" "$TSC_DIR/example.mjs"
    verdict "clients/typescript/README.md shows example.mjs as it is" $? \
        "$(diff "$T/example.js" "$TSC_DIR/example.mjs" | head -n 6 | tr '\n' ' ')"
    (cd "$TSC_DIR" && GPSERVE_URL=http://127.0.0.1:$PORT timeout $((120 * SLOW)) node example.mjs) \
        >"$T/example.out" 2>&1
    ex_rc=$?
    [ "$ex_rc" -eq 0 ] && grep -q '^fit: succeeded version [0-9]' "$T/example.out" &&
        grep -q '^samples:' "$T/example.out"
    verdict "node example.mjs fits, predicts and samples" $? \
        "exit $ex_rc: $(tail -n 4 "$T/example.out" | tr '\n' ' ')"
    # A daemon that needs a key, for the auth test.
    TS_KEY="ts-client-key-$$-0123456789"
    printf '%s\n' "$TS_KEY" >"$T/ts_keyfile"
    TS_AUTH=""
    if start_daemon "$T/ts_key.log" --db "$T/ts_key.db" --api-key-file "$T/ts_keyfile"; then
        TS_AUTH=http://127.0.0.1:$DPORT
        TS_KEY_PID=$DPID
    else
        fail "daemon with an API key for the client starts"
    fi
    # node's test runner, bounded (a request the daemon never answers ends it).
    (cd "$TSC_DIR" && GPSERVE_URL=http://127.0.0.1:$PORT GPSERVE_AUTH_URL=$TS_AUTH \
        GPSERVE_AUTH_KEY=$TS_KEY timeout $((180 * SLOW)) node --test --test-reporter=tap test/) \
        >"$T/node.tap" 2>&1
    node_rc=$?
    ts_report
    if ! grep -q '^PASS' "$T/node.results"; then
        fail "node tests of the client ran" "exit $node_rc: $(tail -n 5 "$T/node.tap" | tr '\n' ' ')"
    elif [ "$node_rc" -ne 0 ] && ! grep -q '^FAIL' "$T/node.results"; then
        fail "node tests of the client end well" "exit $node_rc: $(tail -n 5 "$T/node.tap" | tr '\n' ' ')"
    fi
    [ -n "$TS_AUTH" ] && stop_daemon "$TS_KEY_PID"
}

if ! command -v node >/dev/null 2>&1; then
    note "no node: the TypeScript client is not tested (make deps installs nodejs)"
elif [ ! -x "$TSC_BIN/tsc" ] || [ ! -x "$TSC_BIN/openapi-typescript" ] ||
    [ ! -d "$TSC_DIR/node_modules/openapi-fetch" ] || [ ! -d "$TSC_DIR/node_modules/@types/node" ]; then
    note "no npm packages in clients/typescript: the TypeScript client is not tested" \
        "(make deps runs npm ci there)"
else
    ts_client_tests
fi
