#!/bin/sh
# Integration area "deploy": the scale-out files (docs/design/scale-out.md).
#  - deploy/k8s: every manifest against the Kubernetes JSON schemas, offline and
#    strict, plus what the API server or the daemon would refuse
#    (tests/js/k8s_validate.mjs, the pinned npm packages of tests/js), then
#    mutated copies that must each be rejected; `kubectl kustomize` of the
#    directory where kubectl is installed. A note without node or the packages.
#  - docker/haproxy.cfg live: a copy whose server-template is replaced by two
#    loopback servers, in front of two daemons sharing one database (SQLite
#    here; PostgreSQL in the compose profile) and a server that answers 404 to
#    /readyz: health checks on /readyz take that one out, both replicas serve, a fit through the proxy is served identically by both, an
#    async job is read through either, and a stopped replica leaves the
#    rotation with no failed request. A note without haproxy.
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

# deploy_fold FILE: show a script's ok/FAIL/note lines and count them.
deploy_fold() {
    grep -E '^(ok |FAIL|note)' "$1"
    sed -n 's/^ok .*/PASS/p; s/^FAIL.*/FAIL/p' "$1" >>"$RESULTS"
    grep -Eq '^[0-9]+ passed, [0-9]+ failed$' "$1" || fail "$(basename "$1") ran" "$(tail -n 3 "$1")"
}

section "Kubernetes manifests: schema (strict), contract, mutated copies"
K8S=$ROOT/deploy/k8s
if ! command -v node >/dev/null 2>&1; then
    note "no node: deploy/k8s not validated (make deps)"
elif [ ! -d "$ROOT/tests/js/node_modules/kubernetes-models" ] || [ ! -d "$ROOT/tests/js/node_modules/yaml" ]; then
    note "tests/js/node_modules lacks kubernetes-models or yaml: deploy/k8s not validated (make deps)"
else
    "$BIN" --help >"$T/help.txt" 2>&1
    node "$ROOT/tests/js/k8s_validate.mjs" "$K8S" --help-file "$T/help.txt" \
        --dockerfile "$ROOT/docker/Dockerfile" --self-test >"$T/k8s.out" 2>&1
    deploy_fold "$T/k8s.out"
fi
if command -v kubectl >/dev/null 2>&1; then
    if kubectl kustomize "$K8S" >"$T/kustomized.yaml" 2>"$T/kustomize.err"; then
        kinds=$(grep '^kind:' "$T/kustomized.yaml" | sort | tr '\n' ' ')
        [ "$kinds" = "kind: Deployment kind: PodDisruptionBudget kind: Secret kind: Service " ]
        verdict "kubectl kustomize deploy/k8s builds the Deployment, PodDisruptionBudget, Secret and Service" $? "kinds: $kinds"
    else
        fail "kubectl kustomize deploy/k8s" "$(head -n 3 "$T/kustomize.err")"
    fi
else
    note "no kubectl: kustomization.yaml not built (k8s_validate.mjs still checks its resources)"
fi

section "haproxy.cfg live: two daemons behind a loopback copy"
# ha_stat SERVER: the status column (UP, DOWN, ...) of a server of the backend
# gpserve in the stats CSV.
ha_stat() {
    curl -s --max-time 5 "http://127.0.0.1:$HA_STATS/stats;csv" | awk -F, -v s="$1" '$1 == "gpserve" && $2 == s { print $18 }'
}
# ha_wait SERVER STATUS: poll until the server has that status (at most STARTUP s).
ha_wait() {
    _i=0
    while [ $_i -lt $((STARTUP * 5)) ]; do
        [ "$(ha_stat "$1")" = "$2" ] && return 0
        sleep 0.2
        _i=$((_i + 1))
    done
    return 1
}
# ha_start: haproxy on a copy of docker/haproxy.cfg whose frontends are on free
# loopback ports and whose server-template is the two daemons; sets HA_PID,
# HA_PORT, HA_STATS (HA_PID empty when it did not start).
ha_start() {
    HA_PID=""
    tries=0
    while [ $tries -lt 5 ]; do
        tries=$((tries + 1))
        HA_PORT=$(free_port)
        HA_STATS=$(free_port)
        awk -v p="$HA_PORT" -v s="$HA_STATS" -v a="$LB1_PORT" -v b="$LB2_PORT" -v c="$R3_PORT" '
            /^[[:space:]]*bind \*:8080$/ { print "    bind 127.0.0.1:" p; n++; next }
            /^[[:space:]]*bind \*:8404$/ { print "    bind 127.0.0.1:" s; n++; next }
            /^[[:space:]]*server-template / { print "    server r1 127.0.0.1:" a; print "    server r2 127.0.0.1:" b
                if (c != "") print "    server r3 127.0.0.1:" c
                n++; next }
            { print }
            END { if (n != 3) exit 1 }' "$ROOT/docker/haproxy.cfg" >"$T/haproxy.cfg" || {
            echo "docker/haproxy.cfg lacks 'bind *:8080', 'bind *:8404' or its server-template" >"$T/haproxy.log"
            return 1
        }
        haproxy -db -f "$T/haproxy.cfg" >"$T/haproxy.log" 2>&1 &
        HA_PID=$!
        PIDS="$PIDS $HA_PID"
        i=0
        while [ $i -lt $((STARTUP * 5)) ] && alive "$HA_PID"; do
            curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$HA_STATS/stats" && return 0
            sleep 0.2
            i=$((i + 1))
        done
        alive "$HA_PID" && return 0
        HA_PID=""
        grep -q 'cannot bind' "$T/haproxy.log" || return 1 # not a lost port race
    done
    return 1
}

# ha_live: the checks, with the two daemons running.
ha_live() {
    if ! ha_start; then
        fail "haproxy runs the copy of docker/haproxy.cfg (bind and server lines replaced)" \
            "$(grep -E 'ALERT|cannot|lacks' "$T/haproxy.log" 2>/dev/null | head -n 2)"
        return
    fi
    pass "haproxy runs the copy of docker/haproxy.cfg (frontend 127.0.0.1:$HA_PORT)"
    PORT=$HA_PORT # req and check go through haproxy
    # Servers start UP; rise 2 means two passed checks each.
    i=0
    while [ $i -lt $((STARTUP * 5)) ]; do
        n1=$(grep -c 'GET /readyz 200' "$T/lb1.log")
        n2=$(grep -c 'GET /readyz 200' "$T/lb2.log")
        [ "$n1" -ge 2 ] && [ "$n2" -ge 2 ] && break
        sleep 0.2
        i=$((i + 1))
    done
    [ "$n1" -ge 2 ] && [ "$n2" -ge 2 ] && [ "$(ha_stat r1)" = UP ] && [ "$(ha_stat r2)" = UP ]
    verdict "the health check is GET /readyz: both replicas checked and UP ($n1 and $n2 checks so far)" $? \
        "readyz lines $n1, $n2; stats r1 $(ha_stat r1), r2 $(ha_stat r2)"
    if [ -n "$R3_PORT" ]; then
        ha_wait r3 DOWN
        verdict "a server answering 404 to GET /readyz is taken out (stats: r3 $(ha_stat r3))" $? \
            "still $(ha_stat r3)"
    fi
    check "GET /readyz through haproxy" 200 GET /readyz
    b1=$(grep -c 'GET /v1/models 200' "$T/lb1.log")
    b2=$(grep -c 'GET /v1/models 200' "$T/lb2.log")
    bad=0
    i=0
    while [ $i -lt 20 ]; do
        req GET /v1/models
        [ "$ST" = 200 ] || bad=$((bad + 1))
        i=$((i + 1))
    done
    a1=$(($(grep -c 'GET /v1/models 200' "$T/lb1.log") - b1))
    a2=$(($(grep -c 'GET /v1/models 200' "$T/lb2.log") - b2))
    [ $bad -eq 0 ] && [ $a1 -ge 5 ] && [ $a2 -ge 5 ] && [ $((a1 + a2)) -eq 20 ]
    verdict "20 requests through haproxy: all 200, spread over both replicas ($a1 + $a2)" $? "$bad failed"
    check_json "a fit through haproxy" 201 /v1/models \
        '{"name":"lb","method":"exact","seed":1,"X":[0,1,2,3,4,5],"y":[0.0,0.84,0.91,0.14,-0.76,-0.96]}'
    b1=$(grep -c 'POST /v1/models/lb/predict 200' "$T/lb1.log")
    b2=$(grep -c 'POST /v1/models/lb/predict 200' "$T/lb2.log")
    jpost /v1/models/lb/predict '{"X":[[0.5],[2.5]]}'
    cp "$T/body" "$T/lb_ref.json"
    same=0
    i=0
    while [ $i -lt 9 ]; do
        jpost /v1/models/lb/predict '{"X":[[0.5],[2.5]]}'
        [ "$ST" = 200 ] && cmp -s "$T/body" "$T/lb_ref.json" && same=$((same + 1))
        i=$((i + 1))
    done
    a1=$(($(grep -c 'POST /v1/models/lb/predict 200' "$T/lb1.log") - b1))
    a2=$(($(grep -c 'POST /v1/models/lb/predict 200' "$T/lb2.log") - b2))
    [ $same -eq 9 ] && [ $a1 -ge 1 ] && [ $a2 -ge 1 ]
    verdict "10 predictions of it through haproxy: one body from both replicas ($a1 + $a2)" $? "$same of 9 identical"
    jpost /v1/models '{"name":"lb","async":true,"X":[0,1,2,3],"y":[0.1,0.9,0.8,0.2]}'
    job=$(jqb '.job // empty')
    [ "$ST" = 202 ] && [ -n "$job" ] && wait_job "$job" succeeded
    verdict "an async fit through haproxy: 202, then succeeded read through either replica" $? \
        "status $ST, job '$job' $JOB_STATUS"
    stop_daemon "$LB2"
    [ "$STOP_RC" = 0 ]
    verdict "replica 2 stops on SIGTERM (exit 0)" $? "exit $STOP_RC"
    bad=0
    i=0
    while [ $i -lt 10 ]; do
        req GET /v1/models/lb
        [ "$ST" = 200 ] || bad=$((bad + 1))
        i=$((i + 1))
    done
    [ $bad -eq 0 ]
    verdict "10 requests right after: all 200 (a refused connection is redispatched)" $? "$bad failed"
    ha_wait r2 DOWN
    verdict "haproxy takes the stopped replica out (stats: r2 $(ha_stat r2))" $? "still $(ha_stat r2)"
    check "GET /v1/models/lb through haproxy, one replica left" 200 GET /v1/models/lb
    kill -TERM "$HA_PID" 2>/dev/null
    wait "$HA_PID" 2>/dev/null
}

if ! command -v haproxy >/dev/null 2>&1; then
    note "no haproxy (Debian: haproxy): docker/haproxy.cfg not run (docker_check.sh still checks its structure)"
elif ! start_daemon "$T/lb1.log" --db "$T/lb.db"; then
    fail "replica 1 starts"
else
    LB1=$DPID
    LB1_PORT=$DPORT
    if ! start_daemon "$T/lb2.log" --db "$T/lb.db"; then
        fail "replica 2 on the same database starts"
    else
        LB2=$DPID
        LB2_PORT=$DPORT
        pass "two daemons on one database start (ports $LB1_PORT, $LB2_PORT)"
        # A third server that answers HTTP but 404 to /readyz (an empty directory served).
        R3_PORT=""
        if command -v python3 >/dev/null 2>&1; then
            mkdir -p "$T/empty"
            R3_PORT=$(free_port)
            python3 -m http.server "$R3_PORT" --bind 127.0.0.1 --directory "$T/empty" >"$T/r3.log" 2>&1 &
            R3_PID=$!
            PIDS="$PIDS $R3_PID"
        else
            note "no python3: no third server answering 404 to /readyz"
        fi
        MPORT=$PORT
        ha_live
        PORT=$MPORT
        alive "$LB2" && stop_daemon "$LB2"
        [ -n "$R3_PORT" ] && kill -TERM "$R3_PID" 2>/dev/null && wait "$R3_PID" 2>/dev/null
    fi
    stop_daemon "$LB1"
fi
