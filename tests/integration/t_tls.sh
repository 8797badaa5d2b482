#!/bin/sh
# Integration area "tls": daemons with --tls-cert/--tls-key (and --tls-client-ca),
# against a CA, server and client certificates this area makes with openssl:
# curl --cacert (health, fit, predict, OIP infer), the protocol versions
# (openssl s_client: TLS 1.0 and 1.1 refused, 1.2 and 1.3 accepted), a wrong CA,
# plain HTTP to the TLS port (refused at once), SIGHUP with a new certificate
# (new connections get it, an open one keeps working) and with a broken one
# (the old one stays), mutual TLS, the Python and TypeScript clients over TLS.
# Skipped with a note without openssl.
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "TLS"
TD=$T/tls
mkdir -p "$TD"

# tls_ca NAME: a self-signed CA NAME.pem / NAME.key.
tls_ca() {
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -keyout "$TD/$1.key" -out "$TD/$1.pem" -subj "/CN=$1" >/dev/null 2>&1
}
# tls_cert NAME CA SERIAL: a certificate NAME.pem / NAME.key for 127.0.0.1 signed by CA.
tls_cert() {
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$TD/$1.key" \
        -out "$TD/$1.csr" -subj "/CN=$1" >/dev/null 2>&1 &&
        printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$TD/$1.ext" &&
        openssl x509 -req -in "$TD/$1.csr" -CA "$TD/$2.pem" -CAkey "$TD/$2.key" -set_serial "$3" \
            -days 2 -extfile "$TD/$1.ext" -out "$TD/$1.pem" >/dev/null 2>&1
}
# treq METHOD PATH [curl args...]: req over https to $TPORT with the test CA.
treq() {
    _m=$1
    _p=$2
    shift 2
    rm -f "$T/body" "$T/hdr"
    ST=$(curl -sS --max-time "$MT" -o "$T/body" -D "$T/hdr" -w '%{http_code}' -X "$_m" \
        --cacert "$TD/ca.pem" "$@" "https://127.0.0.1:$TPORT$_p" 2>"$T/curlerr")
    [ -n "$ST" ] || ST=000
    [ -f "$T/body" ] || : >"$T/body"
}
# tcheck NAME EXPECTED_STATUS METHOD PATH [curl args...]
tcheck() {
    _n=$1
    _e=$2
    shift 2
    treq "$@"
    [ "$ST" = "$_e" ]
    verdict "$_n" $? "status $ST, expected $_e $(head -c 200 "$T/curlerr")"
}
# tls_proto VERSION_FLAG: the protocol s_client agreed with the daemon, or "none"
# (its "New, TLSv1.2, Cipher is ..." line; a failed handshake prints "New, (NONE)").
# SECLEVEL=0 lets OpenSSL offer TLS 1.0/1.1 at all, so a refusal is the daemon's.
tls_proto() {
    echo Q | timeout $((10 * SLOW)) openssl s_client -connect "127.0.0.1:$TPORT" "$1" \
        -cipher 'DEFAULT@SECLEVEL=0' -CAfile "$TD/ca.pem" 2>/dev/null |
        sed -n 's/^New, \(TLSv[0-9.]*\), Cipher is .*/\1/p' | head -n 1 | grep . || echo none
}
# tls_serial: the serial of the certificate the daemon shows a new connection.
tls_serial() {
    echo Q | timeout $((10 * SLOW)) openssl s_client -connect "127.0.0.1:$TPORT" \
        -CAfile "$TD/ca.pem" 2>/dev/null | openssl x509 -noout -serial 2>/dev/null
}
# wait_log FILE PATTERN: until a line of FILE matches (bounded).
wait_log() {
    _i=0
    while ! grep -q "$2" "$1" && [ $_i -lt $((STARTUP * 10)) ]; do
        sleep 0.1
        _i=$((_i + 1))
    done
    grep -q "$2" "$1"
}

if ! command -v openssl >/dev/null 2>&1; then
    note "tls: openssl is missing, the area is skipped (apt-get install openssl)"
elif ! { tls_ca ca && tls_ca otherca && tls_cert server ca 101 && tls_cert server2 ca 202 &&
    tls_cert client ca 303 && tls_cert stranger otherca 404; }; then
    fail "tls: openssl makes the test certificates"
else
    cp "$TD/server.pem" "$TD/live.pem"
    cp "$TD/server.key" "$TD/live.key"
    SERIAL1=$(openssl x509 -noout -serial -in "$TD/server.pem")
    SERIAL2=$(openssl x509 -noout -serial -in "$TD/server2.pem")

    # ---- refused configurations
    "$BIN" --port 0 --db "$TD/x.db" --tls-cert "$TD/live.pem" >"$TD/half.out" 2>&1
    [ $? = 2 ] && grep -q 'go together' "$TD/half.out"
    verdict "tls: --tls-cert without --tls-key exits 2 naming both" $? "$(cat "$TD/half.out")"
    "$BIN" --port 0 --db "$TD/x.db" --tls-cert "$TD/server.pem" --tls-key "$TD/server2.key" \
        >"$TD/mismatch.out" 2>&1
    [ $? != 0 ] && grep -q 'cannot use the certificate' "$TD/mismatch.out"
    verdict "tls: a key that is not the certificate's refuses to start" $? "$(tail -n 2 "$TD/mismatch.out")"

    if start_daemon "$TD/d.log" --db "$TD/d.db" --tls-cert "$TD/live.pem" --tls-key "$TD/live.key"; then
        TPORT=$DPORT
        TPID=$DPID
        pass "tls: daemon with --tls-cert starts"
        grep -q 'durability full, TLS$' "$TD/d.log"
        verdict "tls: the start-up line says TLS" $? "$(head -n 1 "$TD/d.log")"

        # ---- the API over https
        tcheck "tls: GET /healthz over https (curl --cacert)" 200 GET /healthz
        tcheck "tls: fit over https" 201 POST /v1/models -H 'Content-Type: application/json' \
            --data-binary "$SINE_BODY"
        tcheck "tls: predict over https" 200 POST /v1/models/sine/predict \
            -H 'Content-Type: application/json' --data-binary '{"X":[[0.5],[1.5]]}'
        jhas '.mean | length == 2'
        verdict "tls: predict answers two means" $? "$(head -c 200 "$T/body")"
        tcheck "tls: OIP infer /v2/models/sine/infer over https" 200 POST /v2/models/sine/infer \
            -H 'Content-Type: application/json' \
            --data-binary '{"id":"1","inputs":[{"name":"X","shape":[2,1],"datatype":"FP64","data":[0.5,1.5]}]}'
        jhas '.outputs | length > 0'
        verdict "tls: infer answers outputs" $? "$(head -c 200 "$T/body")"

        # ---- versions, CA, plain HTTP
        for v in tls1 tls1_1; do
            p=$(tls_proto "-$v")
            [ "$p" = none ]
            verdict "tls: s_client -$v refused" $? "agreed $p"
        done
        p=$(tls_proto -tls1_2)
        [ "$p" = TLSv1.2 ]
        verdict "tls: s_client -tls1_2 accepted" $? "agreed $p"
        p=$(tls_proto -tls1_3)
        [ "$p" = TLSv1.3 ]
        verdict "tls: s_client -tls1_3 accepted" $? "agreed $p"
        p=$(echo Q | timeout $((10 * SLOW)) openssl s_client -connect "127.0.0.1:$TPORT" -tls1_2 \
            -cipher 'ECDHE-ECDSA-AES128-SHA:ECDHE-ECDSA-AES256-SHA384' -CAfile "$TD/ca.pem" 2>/dev/null |
            sed -n 's/^New, \(TLSv[0-9.]*\), Cipher is .*/\1/p' | head -n 1)
        [ -z "$p" ]
        verdict "tls: a TLS 1.2 CBC suite is refused (AEAD only)" $? "agreed $p"
        curl -sS --max-time "$MT" -o /dev/null --cacert "$TD/otherca.pem" \
            "https://127.0.0.1:$TPORT/healthz" 2>"$T/curlerr"
        [ $? = 60 ]
        verdict "tls: curl with another CA refuses the daemon's certificate" $? "$(cat "$T/curlerr")"
        # Plain HTTP gets no HTTP answer, and no hang: the handshake fails on the
        # first bytes (curl 52 empty reply or 56 reset; 28 would be a timeout).
        curl -sS --max-time 5 -o /dev/null "http://127.0.0.1:$TPORT/healthz" 2>"$T/curlerr"
        rc=$?
        [ $rc = 52 ] || [ $rc = 56 ]
        verdict "tls: plain HTTP to the TLS port refused at once" $? "curl exit $rc $(cat "$T/curlerr")"
        tcheck "tls: the daemon still serves after a plain HTTP attempt" 200 GET /healthz

        # ---- SIGHUP: a new certificate; a connection opened before keeps working
        [ "$(tls_serial)" = "$SERIAL1" ]
        verdict "tls: the daemon shows the first certificate" $? "$(tls_serial)"
        KA_OUT=$TD/keepalive.out
        if command -v python3 >/dev/null 2>&1; then
            # One TLS connection: a request, then (after the HUP) another on it.
            python3 - "$TPORT" "$TD/ca.pem" "$TD/hupped" >"$KA_OUT" 2>&1 <<'EOF' &
import http.client, os, ssl, sys, time
port, ca, flag = int(sys.argv[1]), sys.argv[2], sys.argv[3]
c = http.client.HTTPSConnection("127.0.0.1", port, context=ssl.create_default_context(cafile=ca), timeout=30)
c.request("GET", "/healthz"); r = c.getresponse(); r.read()
sock = c.sock
print("first", r.status, flush=True)
for _ in range(300):
    if os.path.exists(flag):
        break
    time.sleep(0.1)
c.request("GET", "/healthz"); r = c.getresponse(); r.read()
print("second", r.status, "same-connection" if c.sock is sock else "new-connection", flush=True)
EOF
            KA_PID=$!
            wait_log "$KA_OUT" '^first 200'
            verdict "tls: a kept-alive connection is open before the reload" $? "$(cat "$KA_OUT")"
        else
            note "tls: python3 is missing: the kept-alive connection across SIGHUP is not checked"
            KA_PID=""
        fi
        cp "$TD/server2.pem" "$TD/live.pem"
        cp "$TD/server2.key" "$TD/live.key"
        kill -HUP "$TPID"
        wait_log "$TD/d.log" 're-read; new connections use them'
        verdict "tls: SIGHUP re-reads the certificate (logged)" $? "$(tail -n 3 "$TD/d.log")"
        [ "$(tls_serial)" = "$SERIAL2" ]
        verdict "tls: a new connection gets the new certificate" $? "$(tls_serial), expected $SERIAL2"
        if [ -n "$KA_PID" ]; then
            : >"$TD/hupped"
            wait "$KA_PID"
            grep -q '^second 200 same-connection' "$KA_OUT"
            verdict "tls: the connection opened before the reload keeps working" $? "$(cat "$KA_OUT")"
        fi
        alive "$TPID"
        verdict "tls: SIGHUP does not stop the daemon" $? "gone"
        # A broken certificate (and one with the wrong key) on SIGHUP: the last good one stays.
        printf 'not a certificate\n' >"$TD/live.pem"
        kill -HUP "$TPID"
        wait_log "$TD/d.log" 'TLS reload failed, the previous certificate stays in use'
        verdict "tls: a broken certificate on SIGHUP is refused (logged)" $? "$(tail -n 3 "$TD/d.log")"
        [ "$(tls_serial)" = "$SERIAL2" ]
        verdict "tls: after a broken reload the previous certificate stays" $? "$(tls_serial)"
        cp "$TD/server.pem" "$TD/live.pem" # server's certificate, server2's key
        kill -HUP "$TPID"
        i=0
        while [ "$(grep -c 'TLS reload failed' "$TD/d.log")" -lt 2 ] && [ $i -lt $((STARTUP * 10)) ]; do
            sleep 0.1
            i=$((i + 1))
        done
        [ "$(tls_serial)" = "$SERIAL2" ] && grep -q 'cannot use the certificate' "$TD/d.log"
        verdict "tls: a certificate whose key does not match keeps the previous one" $? "$(tail -n 2 "$TD/d.log")"
        tcheck "tls: the daemon serves after the refused reloads" 200 GET /healthz

        # ---- the clients over TLS
        if command -v python3 >/dev/null 2>&1; then
            PYTHONPATH=$ROOT/clients/python timeout $((60 * SLOW)) python3 -c '
import sys
from gpserve_client import Client
c = Client(sys.argv[1], cafile=sys.argv[2])
assert c.health()["status"] == "ok"
p = c.predict("sine", [[0.5], [1.5]])
print(len(p["mean"]))
' "https://127.0.0.1:$TPORT" "$TD/ca.pem" >"$TD/py.out" 2>&1
            [ "$(tail -n 1 "$TD/py.out")" = 2 ]
            verdict "tls: the Python client over https (cafile=)" $? "$(tail -n 3 "$TD/py.out")"
            PYTHONPATH=$ROOT/clients/python timeout $((60 * SLOW)) /usr/bin/python3 -c '
import sys
try:
    from gpserve_client import GPServeRegressor
except ImportError as e:
    print("skip", e)
    sys.exit(0)
est = GPServeRegressor(sys.argv[1], cafile=sys.argv[2], name="tls-est")
X = [[0.0], [0.5], [1.0], [1.5], [2.0]]
est.fit(X, [0.0, 0.48, 0.84, 1.0, 0.91])
print(len(est.predict([[0.25], [1.25]])))
' "https://127.0.0.1:$TPORT" "$TD/ca.pem" >"$TD/est.out" 2>&1
            case $(tail -n 1 "$TD/est.out") in
            skip*) note "tls: the estimator over https skipped: $(tail -n 1 "$TD/est.out")" ;;
            *)
                [ "$(tail -n 1 "$TD/est.out")" = 2 ]
                verdict "tls: GPServeRegressor over https (cafile=)" $? "$(tail -n 3 "$TD/est.out")"
                ;;
            esac
        fi
        if command -v node >/dev/null 2>&1 && [ -d "$ROOT/clients/typescript/node_modules/openapi-fetch" ]; then
            cat >"$TD/ts.mjs" <<EOF
import { createClient } from "$ROOT/clients/typescript/client.mjs";
const c = createClient({ baseUrl: process.argv[2] });
const { data, error } = await c.POST("/v1/models/{name}/predict", {
    params: { path: { name: "sine" } }, body: { X: [[0.5], [1.5]] } });
if (error) throw new Error(JSON.stringify(error));
console.log(data.mean.length);
EOF
            NODE_EXTRA_CA_CERTS=$TD/ca.pem timeout $((60 * SLOW)) node "$TD/ts.mjs" \
                "https://127.0.0.1:$TPORT" >"$TD/ts.out" 2>&1
            [ "$(tail -n 1 "$TD/ts.out")" = 2 ]
            verdict "tls: the TypeScript client over https (NODE_EXTRA_CA_CERTS)" $? "$(tail -n 3 "$TD/ts.out")"
        else
            note "tls: node or clients/typescript's npm packages missing: the TypeScript client over TLS is skipped"
        fi
        # The browser view over https: one smoke check (the browser area has the rest).
        if command -v node >/dev/null 2>&1 && [ -x "${CHROMIUM:-/usr/bin/chromium}" ] &&
            [ -f "$ROOT/tests/js/node_modules/playwright-core/package.json" ]; then
            timeout $((120 * SLOW)) node "$ROOT/tests/js/browser_tls.mjs" "https://127.0.0.1:$TPORT" sine \
                >"$TD/browser.out" 2>&1
            grep -q '^PASS' "$TD/browser.out" || fail "tls: browser view over https" "$(tail -n 3 "$TD/browser.out")"
            while IFS= read -r line; do
                case $line in
                "PASS "*) pass "tls: browser: ${line#PASS }" ;;
                "FAIL "*) fail "tls: browser: ${line#FAIL }" ;;
                esac
            done <"$TD/browser.out"
        else
            note "tls: node, chromium or tests/js's playwright-core missing: the browser view over https is skipped"
        fi
        stop_daemon "$TPID"
        [ "$STOP_RC" = 0 ]
        verdict "tls: the daemon exits 0 on SIGTERM" $? "exit $STOP_RC"
    else
        fail "tls: daemon with --tls-cert starts"
    fi

    # ---- mutual TLS
    cp "$TD/server.pem" "$TD/live.pem"
    cp "$TD/server.key" "$TD/live.key"
    if start_daemon "$TD/m.log" --db "$TD/m.db" --tls-cert "$TD/live.pem" --tls-key "$TD/live.key" \
        --tls-client-ca "$TD/ca.pem"; then
        TPORT=$DPORT
        pass "tls: daemon with --tls-client-ca starts"
        treq GET /healthz
        [ "$ST" = 000 ]
        verdict "tls: mTLS: a client without a certificate is refused" $? "status $ST"
        treq GET /healthz --cert "$TD/stranger.pem" --key "$TD/stranger.key"
        [ "$ST" = 000 ]
        verdict "tls: mTLS: a certificate of another CA is refused" $? "status $ST"
        tcheck "tls: mTLS: the right client certificate is accepted" 200 GET /healthz \
            --cert "$TD/client.pem" --key "$TD/client.key"
        stop_daemon "$DPID"
        [ "$STOP_RC" = 0 ]
        verdict "tls: the mTLS daemon exits 0 on SIGTERM (no sanitizer report)" $? "exit $STOP_RC"
    else
        fail "tls: daemon with --tls-client-ca starts"
    fi
fi
