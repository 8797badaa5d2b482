#!/bin/sh
# Integration area "aliases": movable version labels (docs/design/api.md,
# "Aliases"). PUT/GET/DELETE /v1/models/{name}/aliases/{alias} and the list;
# an alias wherever a version is taken (predict, sample and observe bodies,
# GET /v1/models/{name}/versions/{alias}, the OIP V2 version routes),
# answered with the resolved version (and the alias); the model JSON's
# "aliases"; an alias's previous_version; each bad input refused naming its
# field with nothing stored; deleting one version (each refusal, the latest,
# numbers never reused); a model's delete taking its aliases; durability
# across a restart; and a second daemon on the same database seeing an alias
# move and a version delete within the bound of the change generation. Runs on PostgreSQL too when GPSERVE_TEST_DB_URL is
# set (lib.sh, db_for).
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "aliases"
AL_BODY=$(printf '%s' "$SINE_BODY" | sed 's/"name":"sine"/"name":"al"/')
AL=/v1/models/al
req DELETE $AL
check_json "fit al version 1" 201 /v1/models "$AL_BODY"
check_json "fit al version 2" 201 /v1/models "$AL_BODY"
check_json "fit al version 3" 201 /v1/models "$AL_BODY"

check "GET aliases of a model without any" 200 GET $AL/aliases
jhas '.name == "al" and .aliases == []'
verdict "the list is empty" $? "$(head -c 200 "$T/body")"
check "PUT champion -> 2" 200 PUT $AL/aliases/champion -H 'Content-Type: application/json' \
    --data-binary '{"version": 2}'
jhas '.name == "al" and .alias == "champion" and .version == 2 and .updated_by == null and
      .previous_version == null and
      (.updated_at | test("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z$"))'
verdict "the answer names the alias, its version, when and who" $? "$(head -c 300 "$T/body")"
check "PUT challenger -> 3" 200 PUT $AL/aliases/challenger -H 'Content-Type: application/json' \
    --data-binary '{"version": 3}'
check "GET champion" 200 GET $AL/aliases/champion
jhas '.version == 2'
verdict "champion points at 2" $? "$(head -c 200 "$T/body")"
check "GET the list" 200 GET $AL/aliases
jhas '[.aliases[] | [.alias, .version]] == [["challenger", 3], ["champion", 2]] and
      all(.aliases[]; has("updated_at") and has("updated_by"))'
verdict "the list has both, by name, with who and when" $? "$(head -c 300 "$T/body")"
check "GET the model" 200 GET $AL
jhas '.aliases == {"champion": 2, "challenger": 3} and .version == 3'
verdict "the model JSON has \"aliases\"" $? "$(jqb '.aliases | tostring')"

# ---- an alias wherever a version is taken
jpost $AL/predict "{\"X\":$SINE_X,\"version\":2}"
cp "$T/body" "$T/al_v2.json"
check_json "predict with \"version\": \"champion\"" 200 $AL/predict \
    "{\"X\":$SINE_X,\"version\":\"champion\"}"
jhas '.version == 2 and .alias == "champion"'
verdict "the predict answer names version 2 and the alias" $? "$(head -c 200 "$T/body")"
[ "$(jq -c 'del(.alias)' "$T/body")" = "$(jq -c . "$T/al_v2.json")" ]
verdict "the alias's predict is version 2's" $? "bodies differ"
check_json "sample with \"version\": \"champion\"" 200 $AL/sample \
    "{\"X\":$SINE_X,\"version\":\"champion\",\"n_samples\":2,\"seed\":5}"
jhas '.version == 2 and .alias == "champion"'
verdict "the sample answer names version 2 and the alias" $? "$(head -c 200 "$T/body")"
check "GET /v1/models/al/versions/champion" 200 GET $AL/versions/champion
jhas '.version == 2 and .aliases.champion == 2'
verdict "the version page of the alias is version 2" $? "$(head -c 200 "$T/body")"
check "GET /v2/models/al/versions/champion" 200 GET /v2/models/al/versions/champion
jhas '.name == "al"'
verdict "OIP model metadata through the alias" $? "$(head -c 200 "$T/body")"
check "GET /v2/models/al/versions/champion/ready" 200 GET /v2/models/al/versions/champion/ready
check_json "OIP infer through the alias" 200 /v2/models/al/versions/champion/infer \
    '{"inputs":[{"name":"X","shape":[1,1],"datatype":"FP64","data":[0.1]}]}'
jhas '.model_version == "2"'
verdict "the OIP answer names version 2" $? "$(head -c 200 "$T/body")"
req POST /v2/models/al/versions/nope/infer -H 'Content-Type: application/json' \
    --data-binary '{"inputs":[{"name":"X","shape":[1,1],"datatype":"FP64","data":[0.1]}]}'
[ "$ST" = 404 ] && jhas '.error | type == "string" and test("nope")'
verdict "OIP infer through an unknown alias: 404 in the protocol's shape, naming it" $? \
    "status $ST: $(head -c 200 "$T/body")"

# ---- a move is atomic: the next request sees the new version
check "PUT champion -> 3 (promote)" 200 PUT $AL/aliases/champion \
    -H 'Content-Type: application/json' --data-binary '{"version": "challenger"}'
jhas '.version == 3 and .previous_version == 2'
verdict "promoting by another alias's name points at its version, keeping 2 as previous" $? \
    "$(head -c 200 "$T/body")"
check_json "predict champion after the move" 200 $AL/predict "{\"X\":$SINE_X,\"version\":\"champion\"}"
jhas '.version == 3'
verdict "the predict follows the move" $? "$(head -c 200 "$T/body")"
check "PUT champion -> 2 (roll back)" 200 PUT $AL/aliases/champion \
    -H 'Content-Type: application/json' --data-binary '{"version": 2}'
jhas '.version == 2 and .previous_version == 3'
verdict "the roll back to previous_version keeps 3 as previous" $? "$(head -c 200 "$T/body")"

# ---- bad input: each its own case, nothing stored
req GET $AL/aliases
cp "$T/body" "$T/al_before.json"
check_err "PUT an alias that is a number" 400 invalid_argument '^alias$' PUT $AL/aliases/7 \
    -H 'Content-Type: application/json' --data-binary '{"version": 1}'
check_err "PUT an alias with a character outside [A-Za-z0-9_.-]" 400 invalid_argument '^alias$' \
    PUT "$AL/aliases/bad%20name" -H 'Content-Type: application/json' --data-binary '{"version": 1}'
check_err "PUT an alias starting with '_'" 400 invalid_argument '^alias$' PUT $AL/aliases/_x \
    -H 'Content-Type: application/json' --data-binary '{"version": 1}'
check_err "PUT an alias of 65 characters" 400 invalid_argument '^alias$' \
    PUT "$AL/aliases/$(printf 'a%.0s' $(seq 65))" -H 'Content-Type: application/json' \
    --data-binary '{"version": 1}'
check_err "PUT an alias to a version that does not exist" 404 not_found '^version$' \
    PUT $AL/aliases/ghost -H 'Content-Type: application/json' --data-binary '{"version": 99}'
grep -q 99 "$T/body"
verdict "the 404 names version 99" $? "$(head -c 200 "$T/body")"
check_err "PUT an alias of a model that does not exist" 404 not_found '^name$' \
    PUT /v1/models/no-such-model/aliases/x -H 'Content-Type: application/json' \
    --data-binary '{"version": 1}'
check_err "PUT a body without version" 400 invalid_argument '^version$' PUT $AL/aliases/ghost \
    -H 'Content-Type: application/json' --data-binary '{}'
check_err "PUT version 0" 400 invalid_argument '^version$' PUT $AL/aliases/ghost \
    -H 'Content-Type: application/json' --data-binary '{"version": 0}'
check_err "PUT version 1.5" 400 invalid_argument '^version$' PUT $AL/aliases/ghost \
    -H 'Content-Type: application/json' --data-binary '{"version": 1.5}'
check_err "PUT an unknown key" 400 invalid_argument '^versoin$' PUT $AL/aliases/ghost \
    -H 'Content-Type: application/json' --data-binary '{"versoin": 1}'
check_err "PUT a body that is not JSON" 415 unsupported_media_type - PUT $AL/aliases/ghost \
    -H 'Content-Type: text/plain' --data-binary 'version=1'
check_err "PUT to an unknown alias as the version" 404 not_found '^version$' \
    PUT $AL/aliases/ghost -H 'Content-Type: application/json' --data-binary '{"version": "nope"}'
check_err "POST on an alias" 405 method_not_allowed - POST $AL/aliases/ghost \
    -H 'Content-Type: application/json' --data-binary '{"version": 1}'
header Allow | grep -q '^GET, HEAD, PUT, DELETE$'
verdict "the 405's Allow lists GET, HEAD, PUT, DELETE" $? "Allow: $(header Allow)"
check_jerr "predict with an unknown alias" 404 not_found '^version$' $AL/predict \
    "{\"X\":$SINE_X,\"version\":\"nope\"}"
grep -q nope "$T/body"
verdict "the predict 404 names the alias" $? "$(head -c 200 "$T/body")"
check_jerr "predict with a version that is neither a number nor an alias" 400 invalid_argument \
    '^version$' $AL/predict "{\"X\":$SINE_X,\"version\":\"a b\"}"
check_jerr "sample with an unknown alias" 404 not_found '^version$' $AL/sample \
    "{\"X\":$SINE_X,\"version\":\"nope\"}"
check_err "GET versions/nope" 404 not_found '^version$' GET $AL/versions/nope
check_err "GET versions/1x" 400 invalid_argument '^version$' GET $AL/versions/1x
check_err "GET an unknown alias" 404 not_found '^alias$' GET $AL/aliases/nope
check_err "DELETE an unknown alias" 404 not_found '^alias$' DELETE $AL/aliases/nope
req GET $AL/aliases
cmp -s "$T/body" "$T/al_before.json"
verdict "after the refusals the aliases are as before" $? "$(head -c 300 "$T/body")"

# ---- observe through an alias (an online model)
OL_BODY='{"name":"al-online","method":"exact","kernel":{"type":"rbf","variance":1.3,"lengthscale":[0.7],"fixed":true},"noise":{"variance":0.01,"fixed":true},"standardize":false,"X":[0,0.5,1,1.5],"y":[0.1,0.5,0.8,1.0]}'
req DELETE /v1/models/al-online
jpost /v1/models "$OL_BODY"
if [ "$ST" = 201 ]; then
    check "PUT live -> al-online 1" 200 PUT /v1/models/al-online/aliases/live \
        -H 'Content-Type: application/json' --data-binary '{"version": 1}'
    check_json "observe with \"version\": \"live\"" 200 /v1/models/al-online/observe \
        '{"X":[[3]],"y":[0.1],"version":"live"}'
    jhas '.version == 1 and .alias == "live" and .observations == 1'
    verdict "the observe answer names version 1 and the alias" $? "$(head -c 200 "$T/body")"
    check_jerr "observe with an unknown alias" 404 not_found '^version$' \
        /v1/models/al-online/observe '{"X":[[3]],"y":[0.1],"version":"nope"}'
    req DELETE /v1/models/al-online
else
    note "observe through an alias not checked: the online fit answered $ST"
fi

# ---- delete
check "DELETE challenger" 204 DELETE $AL/aliases/challenger
check "GET the list after the delete" 200 GET $AL/aliases
jhas '[.aliases[].alias] == ["champion"]'
verdict "challenger is gone, champion stays" $? "$(head -c 200 "$T/body")"

# ---- deleting one version (DELETE /v1/models/{name}/versions/{v}); al has
# 1, 2, 3 and champion -> 2
check_err "DELETE a version that does not exist" 404 not_found '^version$' DELETE $AL/versions/9
check_err "DELETE a version of a model that does not exist" 404 not_found '^name$' \
    DELETE /v1/models/no-such-model/versions/1
check_err "DELETE a version through an alias" 400 invalid_argument '^version$' \
    DELETE $AL/versions/champion
check_err "DELETE the version an alias points to" 409 conflict '^alias$' DELETE $AL/versions/2
grep -q champion "$T/body"
verdict "the 409 names the alias" $? "$(head -c 200 "$T/body")"
check "GET version 2 after the refusal" 200 GET $AL/versions/2
check "DELETE the latest version (3)" 204 DELETE $AL/versions/3
check_err "GET the deleted version" 404 not_found '^version$' GET $AL/versions/3
check_jerr "predict the deleted version" 404 not_found '^version$' $AL/predict \
    "{\"X\":$SINE_X,\"version\":3}"
check "GET the model after deleting its latest version" 200 GET $AL
jhas '.version == 2'
verdict "the latest is now the highest remaining version (2)" $? "$(head -c 200 "$T/body")"
check_json "predict without a version after the delete" 200 $AL/predict "{\"X\":$SINE_X}"
jhas '.version == 2'
verdict "a predict without a version answers with version 2" $? "$(head -c 200 "$T/body")"
check_json "fit al after deleting version 3" 201 /v1/models "$AL_BODY"
jhas '.version == 4'
verdict "the next fit is version 4: a deleted number is never given again" $? \
    "$(head -c 200 "$T/body")"
check "DELETE version 1 (not the latest)" 204 DELETE $AL/versions/1
check_err "GET version 1 after its delete" 404 not_found '^version$' GET $AL/versions/1
check "GET version 2 after version 1's delete" 200 GET $AL/versions/2
req DELETE /v1/models/al-one
AL_ONE_BODY=$(printf '%s' "$SINE_BODY" | sed 's/"name":"sine"/"name":"al-one"/')
check_json "fit al-one (one version)" 201 /v1/models "$AL_ONE_BODY"
check_err "DELETE a model's only version" 409 conflict '^version$' \
    DELETE /v1/models/al-one/versions/1
check "the only version stays" 200 GET /v1/models/al-one/versions/1
req DELETE /v1/models/al-one
check "DELETE the model with an alias" 204 DELETE $AL
check_json "fit al again (version 1)" 201 /v1/models "$AL_BODY"
check "GET aliases of the new al" 200 GET $AL/aliases
jhas '.aliases == []'
verdict "deleting a model removed its aliases" $? "$(head -c 200 "$T/body")"
check_err "GET aliases of a model that does not exist" 404 not_found '^name$' \
    GET /v1/models/no-such-model/aliases

# ---- durable: a daemon restarted on its database keeps the alias; a second
# daemon on the same database sees a move within the change generation's bound
AL_MAIN_PORT=$PORT
if AL_DB=$(db_for aliases) && start_daemon "$T/aliases_a.log" --db "$AL_DB"; then
    AL_A=$DPID
    PORT=$DPORT
    check_json "own daemon: fit al version 1" 201 /v1/models "$AL_BODY"
    check_json "own daemon: fit al version 2" 201 /v1/models "$AL_BODY"
    check "own daemon: PUT prod -> 1" 200 PUT $AL/aliases/prod \
        -H 'Content-Type: application/json' --data-binary '{"version": 1}'
    check_json "own daemon: fit al version 3" 201 /v1/models "$AL_BODY"
    check "own daemon: DELETE version 3" 204 DELETE $AL/versions/3
    stop_daemon "$AL_A"
    if start_daemon "$T/aliases_b.log" --db "$AL_DB"; then
        AL_B=$DPID
        PORT=$DPORT
        check "after a restart: GET prod" 200 GET $AL/aliases/prod
        jhas '.version == 1'
        verdict "after a restart: prod still points at 1" $? "$(head -c 200 "$T/body")"
        check_err "after a restart: version 3 stays deleted" 404 not_found '^version$' \
            GET $AL/versions/3
        check "after a restart: GET the model" 200 GET $AL
        jhas '.version == 2'
        verdict "after a restart: the latest is 2" $? "$(head -c 200 "$T/body")"
        if start_daemon "$T/aliases_c.log" --db "$AL_DB"; then
            AL_C_PORT=$DPORT
            PORT=$AL_C_PORT
            check_json "second daemon: predict prod (caches version 1)" 200 $AL/predict \
                '{"X":[[0.5]],"version":"prod"}'
            PORT=$(sed -n 's/.*gpserve listening on 127\.0\.0\.1:\([0-9][0-9]*\).*/\1/p' \
                "$T/aliases_b.log" | head -n 1)
            check "first daemon: PUT prod -> 2" 200 PUT $AL/aliases/prod \
                -H 'Content-Type: application/json' --data-binary '{"version": 2}'
            PORT=$AL_C_PORT
            seen_within "second daemon: predict prod follows the move" \
                '.version == 2 and .alias == "prod"' POST $AL/predict \
                -H 'Content-Type: application/json' --data-binary '{"X":[[0.5]],"version":"prod"}'
            seen_within "second daemon: the model JSON follows the move" \
                '.aliases.prod == 2' GET $AL
            PORT=$(sed -n 's/.*gpserve listening on 127\.0\.0\.1:\([0-9][0-9]*\).*/\1/p' \
                "$T/aliases_b.log" | head -n 1)
            check "first daemon: DELETE version 1 (no alias left on it)" 204 \
                DELETE $AL/versions/1
            PORT=$AL_C_PORT
            seen_within "second daemon: predict version 1 (cached there) is 404 after the delete" \
                '.error.code == "not_found" and .error.field == "version"' POST $AL/predict \
                -H 'Content-Type: application/json' --data-binary '{"X":[[0.5]],"version":1}'
        else
            fail "second daemon on the aliases database starts" "no listening line"
        fi
    else
        fail "restart on the aliases database" "no listening line"
    fi
else
    fail "a daemon of its own for the aliases area" "no listening line (or no database)"
fi
PORT=$AL_MAIN_PORT
req DELETE $AL
