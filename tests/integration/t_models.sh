#!/bin/sh
# Integration area "models": list, get, versions
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "list, get, versions"
req DELETE /v1/models/sine # this area checks sine's versions from 1
check_json "fit sine (version 1)" 201 /v1/models "$SINE_BODY"
req GET /v1/models/plane
have_plane=$ST
check "GET /v1/models" 200 GET /v1/models
jhas '[.models[].name] | index("sine")' &&
    { [ "$have_plane" != 200 ] || jhas '[.models[].name] | index("plane")'; }
verdict "list has sine (and plane when the fit area made it)" $? "missing models"
check "GET /v1/models/sine" 200 GET /v1/models/sine
jhas '.versions == [1]' 
verdict "sine has versions [1]" $? "no \"versions\":[1]"
check_json "fit sine again (version 2)" 201 /v1/models "$SINE_BODY"
[ "$(jnum version)" = 2 ]
verdict "second fit is version 2" $? "version $(jnum version)"
check "GET /v1/models/sine after refit" 200 GET /v1/models/sine
jhas '.versions == [1,2] and .version == 2' 
verdict "latest is version 2 with versions [1,2]" $? "wrong versions"
check "GET /v1/models/sine/versions/1" 200 GET /v1/models/sine/versions/1
[ "$(jnum version)" = 1 ] && [ "$(jstr name)" = sine ]
verdict "version 1 metadata" $? "wrong version"
check_json "predict with \"version\": 1" 200 /v1/models/sine/predict "{\"X\":$SINE_X,\"version\":1}"
[ "$(jnum version)" = 1 ]
verdict "predict answers version 1" $? "version $(jnum version)"
