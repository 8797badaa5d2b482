#!/bin/sh
# Integration area "replicas": three daemons on one PostgreSQL behind haproxy.
# A throw-away PostgreSQL 15 cluster (tests/support/pgtmp.sh: a temporary
# directory, a free loopback port, a non-root user), three daemons on it
# (--job-lease 2, one fit worker each) and haproxy in front of them with
# health checks on /readyz. Then:
#   - requests through the balancer reach every replica;
#   - async fits submitted through the balancer run exactly once (one version
#     each, succeeded), and sync fits of one name through it get distinct
#     consecutive versions (allocated across replicas without a race);
#   - a fit saved by one replica is the newest version on the others within
#     the bound of docs/design/storage.md ("The change generation"), and a
#     fit, an observe and a delete on one are served by another (lib.sh,
#     replica_changes);
#   - the replica running a long fit is killed with SIGKILL mid-fit: haproxy
#     marks it down, requests through the balancer keep succeeding, and
#     another replica takes the job over and finishes it (one version);
#   - predictions from every replica are byte for byte the same;
#   - the killed replica restarted on its port is marked up again and serves
#     the same answers.
# Skipped with a note when PostgreSQL 15 or haproxy is missing (make deps
# installs both as root). GPSERVE_REPLICAS_DB=PATH runs it on a shared SQLite
# file instead (no PostgreSQL), to develop the area itself.
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "replicas: three daemons on one PostgreSQL behind haproxy"
RP_MAIN_PORT=$PORT # the main daemon's, restored at the end
RP_PG=$ROOT/tests/support/pgtmp.sh
RP_DB=${GPSERVE_REPLICAS_DB:-}
RP_SKIP=""
command -v haproxy >/dev/null 2>&1 || RP_SKIP="haproxy is not installed (make deps)"
if [ -z "$RP_SKIP" ] && [ -z "$RP_DB" ]; then
    if [ ! -f "$RP_PG" ]; then
        RP_SKIP="no tests/support/pgtmp.sh"
    else
        # The cluster's owner (postgres, when we are root) must reach its
        # directory: not inside $T (mode 700).
        RP_PGDIR=$(mktemp -d "${TMPDIR:-/tmp}/gpserve-pg.XXXXXX") && chmod 755 "$RP_PGDIR"
        if ! RP_DB=$(sh "$RP_PG" start "$RP_PGDIR/pg" 2>"$T/pg.err"); then
            RP_SKIP="no PostgreSQL 15 cluster could be started ($(tail -n 1 "$T/pg.err"))"
            RP_DB=""
        fi
        # Stopped at exit whatever happens below (and again, harmlessly, at the end).
        CLEANUP_CMDS="$CLEANUP_CMDS sh '$RP_PG' stop '$RP_PGDIR/pg' >/dev/null 2>&1; rm -rf '$RP_PGDIR';"
    fi
fi

# rp_sql SQL: one value from the shared database (psql or sqlite3).
rp_sql() {
    case $RP_DB in
    postgres://* | postgresql://*) psql -qAt "$RP_DB" -c "$1" 2>>"$T/rp_sql.err" ;;
    *) sqlite3 "$RP_DB" "$1" 2>>"$T/rp_sql.err" ;;
    esac
}

# rp_start SLOT [PORT]: replica SLOT (1..3) on the shared database; sets
# RP_PORT_<slot> and RP_PID_<slot>.
rp_start() {
    _rport=${2:-0}
    if start_daemon "$T/rep$1.log.$(date +%s%N)" --db "$RP_DB" --job-lease 2 --fit-workers 1 \
        --port "$_rport"; then
        eval "RP_PORT_$1=$DPORT RP_PID_$1=$DPID"
        return 0
    fi
    return 1
}

# rp_haproxy: haproxy in the foreground (-db) on HP_PORT with its stats page
# on HP_STATS, over the three replicas; checks every 200 ms, down after 2
# failures, up after 2 successes. A port taken meanwhile by another socket
# (the free ports are only free when picked) makes it try others, 5 times.
rp_haproxy() {
    _tries=0
    while [ $_tries -lt 5 ]; do
        _tries=$((_tries + 1))
        rp_haproxy_once && return 0
        grep -q 'cannot bind' "$T/haproxy.log" || return 1
    done
    return 1
}
rp_haproxy_once() {
    HP_PORT=$(free_port)
    HP_STATS=$(free_port)
    [ "$HP_PORT" != "$HP_STATS" ] || return 1
    cat >"$T/haproxy.cfg" <<EOF
global
    maxconn 2048
defaults
    mode http
    timeout connect 2s
    timeout client $((60 * SLOW))s
    timeout server $((120 * SLOW))s
    retries 2
    option redispatch
frontend gpserve
    bind 127.0.0.1:$HP_PORT
    default_backend replicas
frontend stats
    bind 127.0.0.1:$HP_STATS
    stats enable
    stats uri /stats
backend replicas
    balance roundrobin
    option httpchk GET /readyz
    http-check expect status 200
    default-server inter 200ms fall 2 rise 2
    server r1 127.0.0.1:$RP_PORT_1 check
    server r2 127.0.0.1:$RP_PORT_2 check
    server r3 127.0.0.1:$RP_PORT_3 check
EOF
    haproxy -db -f "$T/haproxy.cfg" >"$T/haproxy.log" 2>&1 &
    HP_PID=$!
    PIDS="$PIDS $HP_PID"
    # Up once its stats page answers; a failed bind ends it at once.
    _i=0
    while [ $_i -lt $((STARTUP * 5)) ] && alive "$HP_PID"; do
        curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$HP_STATS/stats" && return 0
        sleep 0.2
        _i=$((_i + 1))
    done
    alive "$HP_PID"
}

# rp_state SERVER: haproxy's status of server r1..r3 (UP, DOWN, ...).
rp_state() {
    curl -sS --max-time 5 "http://127.0.0.1:$HP_STATS/stats;csv" 2>/dev/null |
        awk -F, -v s="$1" '$1 == "replicas" && $2 == s { print $18 }'
}

# rp_wait_state SERVER STATE: until haproxy reports it (bounded).
rp_wait_state() {
    _i=0
    while [ $_i -lt $((100 * SLOW)) ]; do
        case $(rp_state "$1") in "$2"*) return 0 ;; esac
        sleep 0.1
        _i=$((_i + 1))
    done
    return 1
}

# rp_requests SLOT: GET /v1/models lines in replica SLOT's logs so far (not
# haproxy's health checks, which are GET /readyz).
rp_requests() {
    cat "$T"/rep"$1".log.* 2>/dev/null | grep -c '^GET /v1/models 200 '
}

# rp_fit_body NAME METHOD ASYNC EXTRA: a fit of 40 rows of a 2-column function.
rp_fit_body() {
    csv_to_json "$1" "\"method\":\"$2\",\"seed\":1,$4\"async\":$3," <"$T/rp.csv"
}

if [ -n "$RP_SKIP" ]; then
    note "replicas: skipped: $RP_SKIP"
else
    gen_xy 40 2 7 >"$T/rp.csv"
    ok=1
    for s in 1 2 3; do rp_start $s || ok=0; done
    if [ $ok = 0 ]; then
        fail "replicas: three daemons start on $(echo "$RP_DB" | sed 's#://[^@]*@#://***@#')"
    else
        pass "replicas: three daemons on one database (ports $RP_PORT_1 $RP_PORT_2 $RP_PORT_3)"
        rp_haproxy || note "replicas: haproxy did not start: $(grep -E 'ALERT' "$T/haproxy.log" | head -n 2)"
        up=1
        for s in r1 r2 r3; do rp_wait_state $s UP || up=0; done
        [ $up = 1 ]
        verdict "replicas: haproxy marks the three replicas up (health check GET /readyz)" $? \
            "states: $(rp_state r1) $(rp_state r2) $(rp_state r3); $(tail -n 3 "$T/haproxy.log")"
        PORT=$HP_PORT

        # ---- every replica is reached
        b1=$(rp_requests 1) b2=$(rp_requests 2) b3=$(rp_requests 3)
        bad=0
        i=0
        while [ $i -lt 30 ]; do
            req GET /v1/models
            [ "$ST" = 200 ] || bad=$((bad + 1))
            i=$((i + 1))
        done
        d1=$(($(rp_requests 1) - b1)) d2=$(($(rp_requests 2) - b2)) d3=$(($(rp_requests 3) - b3))
        [ $bad = 0 ] && [ $d1 -ge 1 ] && [ $d2 -ge 1 ] && [ $d3 -ge 1 ]
        verdict "replicas: 30 requests through haproxy all 200, every replica answers some ($d1/$d2/$d3)" $? \
            "$bad failed"

        # ---- async fits through the balancer run exactly once
        jobs=""
        k=1
        while [ $k -le 6 ]; do
            rp_fit_body "rp-async-$k" exact true "" >"$T/rpfit.json"
            req POST /v1/models -H 'Content-Type: application/json' --data-binary @"$T/rpfit.json"
            [ "$ST" = 202 ] && jobs="$jobs $(jqb '.job')"
            k=$((k + 1))
        done
        nj=$(echo $jobs | wc -w)
        okj=0
        for j in $jobs; do
            if wait_job "$j" succeeded; then okj=$((okj + 1)); fi
        done
        once=0
        k=1
        while [ $k -le 6 ]; do
            req GET "/v1/models/rp-async-$k"
            [ "$ST" = 200 ] && [ "$(jqb '.versions | tostring')" = "[1]" ] && once=$((once + 1))
            k=$((k + 1))
        done
        [ "$nj" = 6 ] && [ $okj = 6 ] && [ $once = 6 ]
        verdict "replicas: 6 async fits through haproxy: 6 accepted, 6 succeeded, each model exactly one version" $? \
            "accepted $nj, succeeded $okj, one version $once"

        # ---- sync fits of one name through the balancer: distinct consecutive versions
        : >"$T/rpv"
        cpids=""
        k=1
        while [ $k -le 6 ]; do
            rp_fit_body "rp-same" exact false "" >"$T/rpsame$k.json"
            curl -sS --max-time "$MT" -o "$T/rpsame$k.out" -H 'Content-Type: application/json' \
                --data-binary @"$T/rpsame$k.json" "http://127.0.0.1:$HP_PORT/v1/models" &
            cpids="$cpids $!"
            k=$((k + 1))
        done
        for c in $cpids; do wait "$c"; done
        for k in 1 2 3 4 5 6; do
            jq -r '.version // "none"' "$T/rpsame$k.out" >>"$T/rpv" 2>/dev/null
        done
        vers=$(sort -n "$T/rpv" | tr '\n' ' ')
        [ "$vers" = "1 2 3 4 5 6 " ]
        verdict "replicas: 6 concurrent sync fits of one name through haproxy get versions 1..6" $? \
            "versions: $vers"

        # ---- the newest version is served by every replica within the bound
        # (docs/design/storage.md, "The change generation")
        rp_fit_body "rp-same" exact false "" >"$T/rpsame7.json"
        PORT=$RP_PORT_1
        req POST /v1/models -H 'Content-Type: application/json' --data-binary @"$T/rpsame7.json"
        v7=$(jqb '.version')
        [ "$v7" = 7 ]
        verdict "replicas: replica 1 saves version 7" $? "saved $v7"
        for s in 2 3; do
            eval "PORT=\$RP_PORT_$s"
            seen_within "replicas: replica $s serves the version replica 1 saved" '.version == 7' \
                POST /v1/models/rp-same/predict -H 'Content-Type: application/json' \
                --data-binary '{"X":[[0.1,0.2]]}'
        done
        # A fit, an observe and a delete on replica 1, each served by replica
        # 2 (which has the previous state cached) within the bound.
        replica_changes "$RP_PORT_1" "$RP_PORT_2" "replicas"

        # ---- predictions from every replica are the same bytes
        pbody='{"X":[[0.1,0.2],[0.5,-0.3],[1.5,2.5]],"quantiles":[0.05,0.95]}'
        for s in 1 2 3; do
            eval "PORT=\$RP_PORT_$s"
            req POST /v1/models/rp-async-1/predict -H 'Content-Type: application/json' \
                --data-binary "$pbody"
            cp "$T/body" "$T/rppred$s"
        done
        cmp -s "$T/rppred1" "$T/rppred2" && cmp -s "$T/rppred1" "$T/rppred3" &&
            jq -e '.mean | length == 3' "$T/rppred1" >/dev/null 2>&1
        verdict "replicas: the same predict answered byte for byte alike by the three replicas" $? \
            "$(head -c 120 "$T/rppred1") / $(head -c 120 "$T/rppred2")"

        # ---- SIGKILL the replica running a long fit
        PORT=$HP_PORT
        rp_fit_body "rp-long" msrfr true '"options":{"particles":2,"features":10,"iterations":20000},' \
            >"$T/rplong.json"
        req POST /v1/models -H 'Content-Type: application/json' --data-binary @"$T/rplong.json"
        LJ=$(jqb '.job')
        victim=""
        if wait_job "$LJ" running; then
            owner=$(rp_sql "SELECT owner FROM jobs WHERE id = '$LJ'")
            opid=$(echo "$owner" | awk -F: '{ print $2 }')
            for s in 1 2 3; do
                eval "[ \"\$RP_PID_$s\" = \"$opid\" ]" && victim=$s
            done
        fi
        if [ -z "$victim" ]; then
            fail "replicas: the long fit runs on a replica" "job $LJ, owner '${owner:-?}': $(cat "$T/rp_sql.err" 2>/dev/null | tail -n 2)"
        else
            eval "vpid=\$RP_PID_$victim vport=\$RP_PORT_$victim"
            kill -KILL "$vpid" 2>/dev/null
            wait "$vpid" 2>/dev/null
            pass "replicas: replica $victim (pid $vpid) killed with SIGKILL while running job $LJ"
            rp_wait_state "r$victim" DOWN
            verdict "replicas: haproxy marks the killed replica down" $? "state $(rp_state r$victim)"
            bad=0
            i=0
            while [ $i -lt 20 ]; do
                req POST /v1/models/rp-async-1/predict -H 'Content-Type: application/json' \
                    --data-binary "$pbody"
                [ "$ST" = 200 ] && cmp -s "$T/body" "$T/rppred1" || bad=$((bad + 1))
                i=$((i + 1))
            done
            [ $bad = 0 ]
            verdict "replicas: with one replica down, 20 predicts through haproxy all 200 and the same bytes" $? \
                "$bad of 20 differ or failed"
            wait_job "$LJ" succeeded
            verdict "replicas: the killed replica's job is taken over and succeeds on another" $? \
                "status $JOB_STATUS: $(head -c 300 "$T/body")"
            attempts=$(jqb '.attempts')
            req GET /v1/models/rp-long
            [ "$ST" = 200 ] && [ "$(jqb '.versions | tostring')" = "[1]" ] && [ "${attempts:-0}" -ge 2 ]
            verdict "replicas: the taken-over fit saved exactly one version (attempts $attempts)" $? \
                "$(head -c 200 "$T/body")"

            # ---- the killed replica comes back on its port
            if rp_start "$victim" "$vport"; then
                rp_wait_state "r$victim" UP
                verdict "replicas: replica $victim restarted on port $vport is marked up again" $? \
                    "state $(rp_state r$victim)"
                PORT=$vport
                req POST /v1/models/rp-async-1/predict -H 'Content-Type: application/json' \
                    --data-binary "$pbody"
                cmp -s "$T/body" "$T/rppred1"
                verdict "replicas: the restarted replica answers the same bytes" $? \
                    "$(head -c 200 "$T/body")"
                req GET /v1/models/rp-same
                [ "$(jqb '.version')" = 7 ]
                verdict "replicas: the restarted replica serves the newest version (7)" $? \
                    "$(head -c 200 "$T/body")"
            else
                fail "replicas: replica $victim restarts on port $vport"
            fi
        fi
        # No replica answered a 5xx.
        if cat "$T"/rep*.log.* | grep -q ' 5[0-9][0-9] [0-9]* [0-9]*us req='; then
            fail "replicas: no 5xx answered" "$(cat "$T"/rep*.log.* | grep ' 5[0-9][0-9] ' | head -n 3)"
        else
            pass "replicas: no 5xx answered by any replica"
        fi
        kill -TERM "$HP_PID" 2>/dev/null
        wait "$HP_PID" 2>/dev/null
        for s in 1 2 3; do
            eval "p=\$RP_PID_$s"
            alive "$p" && stop_daemon "$p"
        done
    fi
    case $RP_DB in
    postgres://* | postgresql://*) sh "$RP_PG" stop "$RP_PGDIR/pg" >/dev/null 2>&1 ;;
    esac
fi
PORT=$RP_MAIN_PORT
