#!/bin/sh
# Integration area "abuse": requests the HTTP layer refuses by itself, answered
# in the JSON error shape; 1,500 slow connections from one address while
# another is served; the request deadline (--request-timeout).
# Also: the request's framing (RFC 9112 §6.3: no second Content-Length, not both
# Content-Length and Transfer-Encoding), answers to connections the slot limits
# refuse, and fair slots: 6 addresses x 300 slow connections while a seventh is
# served within 0.5 s.
# Sourced by tests/integration/run.sh (lib.sh loaded). The area starts its own
# daemons (an area before it may have stopped the main one). The misbehaving client is tests/integration/abuse_client.c (built by make).

AC=$(dirname "$BIN")/tests/integration/abuse_client

# raw_req: send stdin as it is to the daemon on $PORT; the answer is split
# into $T/raw.hdr (status line and headers, CR removed) and $T/body.
raw_req() {
    rm -f "$T/raw.hdr" "$T/body"
    "$AC" raw "$PORT" "$MT" >"$T/raw" 2>"$T/curlerr"
    tr -d '\r' <"$T/raw" | awk -v h="$T/raw.hdr" -v b="$T/body" '
        !body && $0 == "" { body = 1; next }
        { print > (body ? b : h) }'
    [ -f "$T/raw.hdr" ] || : >"$T/raw.hdr"
    [ -f "$T/body" ] || : >"$T/body"
}

# check_shape NAME STATUS CODE FIELD HDRFILE: the last answer (headers in
# HDRFILE, body in $T/body) is one response with this status, Content-Type
# application/json and {"error": {"code": CODE}}; FIELD as in check_err.
check_shape() {
    _why=""
    _st=$(head -n 1 "$5" | awk '{ print $2 }')
    _n=$(grep -c '^HTTP/1\.[01] ' "$5")
    _ct=$(grep -i '^content-type:' "$5" | tail -n 1 | sed 's/^[^:]*:[[:space:]]*//' | tr -d '\r')
    _gc=$(jqb '.error.code // empty')
    _gf=$(jqb '.error.field // empty')
    [ "$_st" = "$2" ] || _why="status '$_st' (expected $2)"
    [ "$_n" = 1 ] || _why="$_why; $_n status lines (one response expected)"
    [ "$_ct" = application/json ] || _why="$_why; Content-Type '$_ct'"
    [ "$_gc" = "$3" ] || _why="$_why; code '$_gc' (expected $3)"
    case $4 in
    -) ;;
    none) [ -z "$_gf" ] || _why="$_why; field '$_gf' (expected none)" ;;
    *) [ "$_gf" = "$4" ] || _why="$_why; field '$_gf' (expected $4)" ;;
    esac
    if [ -z "$_why" ]; then pass "$1"; else fail "$1" "${_why#; }" body; fi
}

# check_v2_shape NAME STATUS HDRFILE: one response with this status, JSON, and
# the Open Inference Protocol's {"error": "message"}.
check_v2_shape() {
    _why=""
    _st=$(head -n 1 "$3" | awk '{ print $2 }')
    _n=$(grep -c '^HTTP/1\.[01] ' "$3")
    _ty=$(jqb '.error | type')
    [ "$_st" = "$2" ] || _why="status '$_st' (expected $2)"
    [ "$_n" = 1 ] || _why="$_why; $_n status lines (one response expected)"
    [ "$_ty" = string ] || _why="$_why; .error is '$_ty' (a string expected)"
    if [ -z "$_why" ]; then pass "$1"; else fail "$1" "${_why#; }" body; fi
}

# answers: how many responses the last raw answer holds (a pipelined one
# follows the first body on its line).
answers() {
    tr -d '\r' <"$T/raw" | grep -o 'HTTP/1\.[01] [0-9][0-9][0-9]' | grep -c .
}

# closes: the last raw answer says "Connection: close".
closes() {
    grep -qi '^connection:[[:space:]]*close' "$T/raw.hdr"
}

# curl_shape NAME STATUS CODE FIELD METHOD PATH [curl args...]
curl_shape() {
    _a1=$1 _a2=$2 _a3=$3 _a4=$4
    shift 4
    req "$@"
    tr -d '\r' <"$T/hdr" >"$T/raw.hdr"
    check_shape "$_a1" "$_a2" "$_a3" "$_a4" "$T/raw.hdr"
}

if [ ! -x "$AC" ]; then
    fail "abuse_client" "$AC is not built (make build-all)"
    return 0 2>/dev/null || exit 1
fi

section "the HTTP layer's own errors, in the JSON shape"
PORT_BEFORE=$PORT
ERRPID=""
if start_daemon "$T/abuse_err.log" --db "$T/abuse_err.db"; then
    ERRPID=$DPID
    PORT=$DPORT
else
    fail "a daemon for the refused requests" "it did not start"
fi
curl_shape "Content-Length: -1 -> 400 malformed_request" 400 malformed_request Content-Length \
    GET /healthz -H 'Content-Length: -1'
curl_shape "Content-Length: abc on a fit -> 400 malformed_request" 400 malformed_request \
    Content-Length POST /v1/models -H 'Content-Type: application/json' -H 'Content-Length: abc' \
    --data-binary '{}'
curl_shape "Content-Length beyond 64 bits -> 413 payload_too_large" 413 payload_too_large \
    Content-Length POST /v1/models -H 'Content-Type: application/json' \
    -H 'Content-Length: 99999999999999999999999' --data-binary '{}'
# The same on the wire: libmicrohttpd 0.9.75 wrote its header block twice here.
printf 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: -1\r\n\r\n' | raw_req
check_shape "Content-Length: -1 on the wire: one response, JSON" 400 malformed_request \
    Content-Length "$T/raw.hdr"
awk 'BEGIN { s = "X-Big: "; for (i = 0; i < 200000; i++) s = s "a"; print s }' >"$T/bighdr"
curl_shape "a 200 KB header -> 431 header_too_large" 431 header_too_large none \
    GET /healthz -H @"$T/bighdr"
curl_shape "a 100 KB request line -> 414 uri_too_long" 414 uri_too_long none \
    GET "/healthz?q=$(awk 'BEGIN { for (i = 0; i < 100000; i++) printf "a" }')"
printf 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nNoColonHere\r\n\r\n' | raw_req
check_shape "a header line without a colon -> 400 malformed_request" 400 malformed_request none \
    "$T/raw.hdr"
printf 'GET /healthz HTTP/2.0\r\nHost: 127.0.0.1\r\n\r\n' | raw_req
check_shape "HTTP/2.0 on the request line -> 505 http_version_not_supported" 505 \
    http_version_not_supported none "$T/raw.hdr"
printf 'POST /v1/models/x/predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n{}\r\n0\r\n\r\n' |
    raw_req
check_shape "a bad chunk size -> 400 malformed_request" 400 malformed_request none "$T/raw.hdr"
printf 'GET /healthz\r\nHost: 127.0.0.1\r\n\r\n' | raw_req
check_shape "a request line without an HTTP version -> 400 malformed_request" 400 \
    malformed_request none "$T/raw.hdr"
# No target (no space at all) or no method: libmicrohttpd 0.9.75 closes the
# connection at once and calls no function of ours, so no answer can be given
# (docs/design/architecture.md); the client sees the end of the stream, not a hang.
for line in 'GET' ' /healthz HTTP/1.1' 'garbage'; do
    t0=$(date +%s%N)
    printf '%s\r\nHost: 127.0.0.1\r\n\r\n' "$line" | raw_req
    ms=$((($(date +%s%N) - t0) / 1000000))
    [ ! -s "$T/raw" ] && [ "$ms" -lt $((2000 * SLOW)) ]
    verdict "request line '$line': closed at once without an answer (${ms} ms)" $? \
        "$(wc -c <"$T/raw") bytes back after $ms ms"
done

section "request framing (RFC 9112 §6.3): refused 400 and the connection closed"
# Each request is followed on the same connection by a second one, which a
# proxy framing the bytes otherwise would see as the body: it must not be answered.
PIPED='GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'
printf "GET /healthz HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nContent-Length: 0\\r\\nContent-Length: 5\\r\\n\\r\\nhello$PIPED" |
    raw_req
check_shape "two different Content-Length -> 400, one answer" 400 malformed_request \
    Content-Length "$T/raw.hdr"
[ "$(answers)" = 1 ]
verdict "  ... the request piped behind it is not answered" $? "$(answers) answers"
closes
verdict "two different Content-Length: Connection: close" $? "$(cat "$T/raw.hdr")"
printf "POST /v1/models/abuse/predict HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nContent-Type: application/json\\r\\nContent-Length: 2\\r\\nContent-Length: 2\\r\\n\\r\\n{}$PIPED" |
    raw_req
check_shape "the same Content-Length twice -> 400 (refused too), one answer" 400 \
    malformed_request Content-Length "$T/raw.hdr"
[ "$(answers)" = 1 ]
verdict "  ... the request piped behind it is not answered" $? "$(answers) answers"
printf "POST /v1/models/abuse/observe HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nContent-Type: application/json\\r\\nContent-Length: 4\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n2\\r\\n{}\\r\\n0\\r\\n\\r\\n$PIPED" |
    raw_req
check_shape "Content-Length and Transfer-Encoding: chunked -> 400, one answer" 400 \
    malformed_request Transfer-Encoding "$T/raw.hdr"
[ "$(answers)" = 1 ]
verdict "  ... the request piped behind it is not answered" $? "$(answers) answers"
closes
verdict "Content-Length and Transfer-Encoding: Connection: close" $? "$(cat "$T/raw.hdr")"
printf "POST /v1/models/abuse/observe HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nContent-Type: application/json\\r\\nTransfer-Encoding : chunked\\r\\nContent-Length: 2\\r\\n\\r\\n{}$PIPED" |
    raw_req
check_shape "white space before a header's colon ('Transfer-Encoding :') -> 400" 400 \
    malformed_request none "$T/raw.hdr"
printf "POST /v1/models/abuse/observe HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nContent-Type: application/json\\r\\nTransfer-Encoding: gzip, chunked\\r\\n\\r\\n2\\r\\n{}\\r\\n0\\r\\n\\r\\n$PIPED" |
    raw_req
check_shape "Transfer-Encoding other than chunked -> 400" 400 malformed_request \
    Transfer-Encoding "$T/raw.hdr"
printf "POST /v1/models/abuse/observe HTTP/1.0\\r\\nHost: 127.0.0.1\\r\\nContent-Type: application/json\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n2\\r\\n{}\\r\\n0\\r\\n\\r\\n" |
    raw_req
check_shape "Transfer-Encoding in an HTTP/1.0 request -> 400" 400 malformed_request \
    Transfer-Encoding "$T/raw.hdr"
printf "POST /v2/models/abuse/infer HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nContent-Type: application/json\\r\\nContent-Length: 2\\r\\nContent-Length: 50\\r\\n\\r\\n{}$PIPED" |
    raw_req
check_v2_shape "two Content-Length on a /v2 path -> 400 in the /v2 shape, one answer" 400 \
    "$T/raw.hdr"
[ "$(answers)" = 1 ]
verdict "  ... the request piped behind it is not answered" $? "$(answers) answers"
# The sound forms still work, and keep the connection: chunked alone, one
# Content-Length; the pipelined request (which asks to close) is answered too.
printf "POST /v1/models/abuse/predict HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nContent-Type: application/json\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n2\\r\\n{}\\r\\n0\\r\\n\\r\\nGET /healthz HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nConnection: close\\r\\n\\r\\n" |
    raw_req
[ "$(answers)" = 2 ] && tr -d '\r' <"$T/raw" | grep -q 'HTTP/1\.1 200'
verdict "chunked alone is read, the connection kept (2 answers)" $? "$(tr -d '\r' <"$T/raw" | grep -o 'HTTP/1\.1 [0-9]*' | tr '\n' ' ')"
check "the daemon serves after all of them" 200 GET /healthz
[ -n "$ERRPID" ] && stop_daemon "$ERRPID"
PORT=$PORT_BEFORE

section "1,500 slow connections from 127.0.0.2; /healthz from 127.0.0.1 meanwhile"
# Default limits: 256 connections per address, request deadline 120 s, idle
# timeout 30 s. The holder trickles a header byte a second on each connection.
if start_daemon "$T/abuse.log" --db "$T/abuse.db"; then
    APID=$DPID
    APORT=$DPORT
    "$AC" hold "$APORT" 127.0.0.2 1500 $((4 + 2 * SLOW)) 1000 >"$T/hold.out" 2>&1 &
    HPID=$!
    PIDS="$PIDS $HPID"
    i=0
    while ! grep -q '^ready' "$T/hold.out" && alive "$HPID" && [ $i -lt $((100 * SLOW)) ]; do
        sleep 0.1
        i=$((i + 1))
    done
    ready=$(grep '^ready' "$T/hold.out")
    note "holder: $ready"
    refused=$(printf '%s\n' "$ready" | sed -n 's/.* refused=\([0-9]*\).*/\1/p')
    held=$(printf '%s\n' "$ready" | sed -n 's/.* open=\([0-9]*\).*/\1/p')
    [ "${refused:-0}" -ge 1000 ] && [ "${held:-0}" -ge 200 ] && [ "${held:-0}" -le 256 ]
    verdict "the per-address limit refuses most of 1,500 connections; up to 256 are held" $? \
        "holder: ${ready:-no ready line}"
    : >"$T/healthz.times"
    n=0
    while [ $n -lt 10 ]; do
        curl -sS --max-time "$MT" -o /dev/null -w '%{http_code} %{time_total}\n' \
            "http://127.0.0.1:$APORT/healthz" >>"$T/healthz.times" 2>>"$T/curlerr"
        n=$((n + 1))
    done
    alive "$HPID"
    held_during=$?
    note "/healthz status and seconds: $(tr '\n' ' ' <"$T/healthz.times")"
    awk -v lim="$(awk -v s="$SLOW" 'BEGIN { print 0.1 * s }')" '
        $1 == 200 && $2 <= lim { ok++ } END { exit ok == 10 ? 0 : 1 }' "$T/healthz.times"
    verdict "10 calls of /healthz answer 200 within $((100 * SLOW)) ms each while they are held" $? \
        "$(tr '\n' ' ' <"$T/healthz.times")"
    wait "$HPID" 2>/dev/null
    done_line=$(grep '^done' "$T/hold.out")
    note "holder: $done_line"
    still=$(printf '%s\n' "$done_line" | sed -n 's/.* open=\([0-9]*\).*/\1/p')
    [ "$held_during" = 0 ] && [ "${still:-0}" -ge 200 ]
    verdict "the slow connections were still held after the calls (deadline 120 s)" $? \
        "holder: ${done_line:-no done line} (still running after the calls: $held_during = 0)"
    stop_daemon "$APID"
    [ "$STOP_RC" = 0 ]
    verdict "that daemon stops cleanly" $? "exit $STOP_RC after ${STOP_SECS}s"
else
    fail "a daemon for the slow connections" "it did not start"
fi

section "connections refused by a limit get an answer: 429 overloaded"
# libmicrohttpd closed a connection beyond the per-address limit without a
# word, and left one beyond the total limit in the kernel's queue, unanswered.
if start_daemon "$T/limits.log" --db "$T/limits.db" --max-connections-per-ip 2; then
    LPID=$DPID
    PORT_BEFORE=$PORT
    PORT=$DPORT
    : >"$T/hold3.out"
    "$AC" hold "$PORT" 127.0.0.2 2 $((6 * SLOW)) 1000 >"$T/hold3.out" 2>&1 &
    HPID=$!
    PIDS="$PIDS $HPID"
    i=0
    while ! grep -q '^ready' "$T/hold3.out" && alive "$HPID" && [ $i -lt $((100 * SLOW)) ]; do
        sleep 0.1
        i=$((i + 1))
    done
    curl_shape "a third connection from an address holding 2 (--max-connections-per-ip 2) -> 429" \
        429 overloaded none GET /healthz --interface 127.0.0.2
    [ -n "$(header Retry-After)" ]
    verdict "that 429 says Retry-After" $? "no Retry-After"
    check "another address is served meanwhile" 200 GET /healthz
    kill "$HPID" 2>/dev/null
    wait "$HPID" 2>/dev/null
    grep -q 'connections refused 429 by the connection limits' "$T/limits.log"
    verdict "the daemon logs the refusals" $? "$(tail -n 3 "$T/limits.log")"
    stop_daemon "$LPID"
    PORT=$PORT_BEFORE
else
    fail "a daemon with --max-connections-per-ip 2" "it did not start"
fi
if start_daemon "$T/limits2.log" --db "$T/limits2.db" --max-connections 4 \
    --max-connections-per-ip 0; then
    LPID=$DPID
    PORT_BEFORE=$PORT
    PORT=$DPORT
    : >"$T/hold4.out"
    "$AC" hold "$PORT" 127.0.0.2 4 $((6 * SLOW)) 1000 >"$T/hold4.out" 2>&1 &
    HPID=$!
    PIDS="$PIDS $HPID"
    i=0
    while ! grep -q '^ready' "$T/hold4.out" && alive "$HPID" && [ $i -lt $((100 * SLOW)) ]; do
        sleep 0.1
        i=$((i + 1))
    done
    curl_shape "every slot taken (--max-connections 4) -> 429 at once, not a wait" 429 \
        overloaded none GET /healthz --max-time $((3 * SLOW))
    kill "$HPID" 2>/dev/null
    wait "$HPID" 2>/dev/null
    stop_daemon "$LPID"
    PORT=$PORT_BEFORE
else
    fail "a daemon with --max-connections 4" "it did not start"
fi

section "fair slots: 6 addresses x 300 slow connections; a seventh served within 0.5 s"
# Default limits (1024 slots, 256 per address, a quarter kept for addresses
# holding fewer than 8). Before, four such addresses took every slot and the
# others waited for --request-timeout. 127.0.0.2-7 hold; 127.0.0.1 calls
# /healthz and a predict every 200 ms for 10 s, each on a new connection.
HOLD_SRC=127.0.0.2,127.0.0.3,127.0.0.4,127.0.0.5,127.0.0.6,127.0.0.7
if [ "$(ulimit -Hn)" != unlimited ] && [ "$(ulimit -Hn)" -lt 4000 ]; then
    note "skipped: the descriptor limit ($(ulimit -Hn)) is below 4000 (1,800 held connections and the daemon's)"
elif start_daemon "$T/fair.log" --db "$T/fair.db"; then
    FPID=$DPID
    PORT_BEFORE=$PORT
    PORT=$DPORT
    check "a model to predict with" 201 POST $M -H 'Content-Type: application/json' \
        --data-binary '{"name":"fair","method":"exact","X":[0,1,2,3],"y":[0,1,0,1]}'
    printf '{"X":[0.5]}' >"$T/fair_predict.json"
    : >"$T/hold5.out"
    "$AC" hold "$PORT" "$HOLD_SRC" 300 $((16 + 4 * SLOW)) 1000 >"$T/hold5.out" 2>&1 &
    HPID=$!
    PIDS="$PIDS $HPID"
    i=0
    while ! grep -q '^ready' "$T/hold5.out" && alive "$HPID" && [ $i -lt $((100 * SLOW)) ]; do
        sleep 0.1
        i=$((i + 1))
    done
    note "holder: $(grep '^ready' "$T/hold5.out")"
    LIM=$((500 * SLOW))
    "$AC" probe "$PORT" 10 200 "$LIM" GET /healthz >"$T/probe_h.out" 2>&1 &
    P1=$!
    PIDS="$PIDS $P1"
    "$AC" probe "$PORT" 10 200 "$LIM" POST /v1/models/fair/predict "$T/fair_predict.json" \
        >"$T/probe_p.out" 2>&1
    wait "$P1" 2>/dev/null
    alive "$HPID"
    held_during=$?
    held=$(grep '^ready' "$T/hold5.out" | sed -n 's/.* open=\([0-9]*\).*/\1/p')
    [ "$held_during" = 0 ] && [ "${held:-0}" -ge 600 ]
    verdict "the six addresses held their slow connections throughout (${held:-?} held)" $? \
        "holder: $(cat "$T/hold5.out")"
    for f in probe_h probe_p; do
        sum=$(grep '^probe' "$T/$f.out")
        n=$(printf '%s\n' "$sum" | sed -n 's/.* n=\([0-9]*\).*/\1/p')
        ok=$(printf '%s\n' "$sum" | sed -n 's/.* ok=\([0-9]*\).*/\1/p')
        [ -n "$n" ] && [ "$n" -ge 20 ] && [ "$n" = "$ok" ]
        verdict "127.0.0.1: every $( [ $f = probe_h ] && echo /healthz || echo predict) of 10 s answered 2xx within $LIM ms" \
            $? "${sum:-no summary}; slowest: $(sort -k2 -n "$T/$f.out" | grep -v probe | tail -n 3 | tr '\n' ' ')"
    done
    kill "$HPID" 2>/dev/null
    wait "$HPID" 2>/dev/null
    stop_daemon "$FPID"
    [ "$STOP_RC" = 0 ]
    verdict "that daemon stops cleanly" $? "exit $STOP_RC after ${STOP_SECS}s"
    PORT=$PORT_BEFORE
else
    fail "a daemon for fair slots" "it did not start"
fi

section "the request deadline: --request-timeout 3"
# A trickle of bytes does not extend it: the held connections are answered
# 408 and closed 3 s after they were accepted, although the idle timeout (30 s)
# never ran out.
if start_daemon "$T/deadline.log" --db "$T/deadline.db" --request-timeout 3; then
    DLPID=$DPID
    DLPORT=$DPORT
    "$AC" hold "$DLPORT" 127.0.0.2 1500 $((10 * SLOW)) 1000 >"$T/hold2.out" 2>&1
    done_line=$(grep '^done' "$T/hold2.out")
    note "holder: $(grep '^ready' "$T/hold2.out"); $done_line"
    val() { printf '%s\n' "$done_line" | sed -n "s/.* $1=\\(-*[0-9]*\\).*/\\1/p"; }
    later=$(val closed_later)
    [ "$(val open)" = 0 ] && [ "${later:-0}" -ge 200 ]
    verdict "every held connection is closed by the daemon" $? "holder: ${done_line:-no done line}"
    [ "$(val got_408)" = "$later" ]
    verdict "each was answered 408 (request_timeout) first" $? "holder: $done_line"
    lo=$(val close_min_ms)
    hi=$(val close_max_ms)
    # From the call of connect, which precedes the accept the deadline counts
    # from (10 ms for the millisecond rounding of both ends).
    [ "${lo:--1}" -ge 2990 ] && [ "${hi:-999999}" -le $((3000 + 2000 * SLOW)) ]
    verdict "they are closed 3 s after the connect (within $((2 * SLOW)) s more)" $? \
        "closed after ${lo} to ${hi} ms"
    PORT=$DLPORT
    # One request trickling past the deadline gets the JSON 408 (curl sends
    # 3 KB at 600 bytes a second); one that arrives in time is served.
    awk 'BEGIN { for (i = 0; i < 3000; i++) printf " " }' >"$T/slow.json"
    printf '%s' "$SINE_BODY" >>"$T/slow.json"
    curl_shape "an upload still arriving at the deadline -> 408 request_timeout" 408 \
        request_timeout none POST /v1/models -H 'Content-Type: application/json' \
        --limit-rate 600 --data-binary @"$T/slow.json"
    check "an upload of 1.5 s within the deadline is served" 201 POST /v1/models \
        -H 'Content-Type: application/json' --limit-rate 2500 --data-binary @"$T/slow.json"
    PORT=$PORT_BEFORE
    grep -q 'past the request deadline' "$T/deadline.log" &&
        grep -Eq '^(-|POST) /[^ ]* 408 ' "$T/deadline.log"
    verdict "the daemon logs the closed connections and each 408" $? \
        "$(grep -c ' 408 ' "$T/deadline.log") lines with 408"
    stop_daemon "$DLPID"
    [ "$STOP_RC" = 0 ]
    verdict "that daemon stops cleanly" $? "exit $STOP_RC after ${STOP_SECS}s"
else
    fail "a daemon with --request-timeout 3" "it did not start"
fi

# A burst of connects is spread evenly over the HTTP threads (server/acceptor.h):
# libmicrohttpd's own pool let one thread accept up to 10 in a row, and a burst
# of 16 often landed on one thread, which then answered every request itself.
section "connections spread over the HTTP threads"
if start_daemon "$T/spread.log" --db "$T/spread.db" --threads 4; then
    SPID=$DPID
    PORT_BEFORE=$PORT
    PORT=$DPORT
    : >"$T/hold5.out"
    "$AC" hold "$PORT" 127.0.0.2 16 $((4 * SLOW)) 1000 >"$T/hold5.out" 2>&1 &
    HPID=$!
    PIDS="$PIDS $HPID"
    i=0
    while ! grep -q '^ready' "$T/hold5.out" && alive "$HPID" && [ $i -lt $((100 * SLOW)) ]; do
        sleep 0.1
        i=$((i + 1))
    done
    req GET /metrics
    # The 16 held and this request's own connection: 17 over 4 threads.
    per=$(sed -n 's/^gpserve_http_thread_connections{thread="[0-9]*"} //p' "$T/body" | tr '\n' ' ')
    echo "$per" | awk '{ if (NF != 4) exit 1; lo = $1; hi = $1; s = 0
        for (i = 1; i <= NF; i++) { s += $i; if ($i < lo) lo = $i; if ($i > hi) hi = $i }
        exit !(s == 17 && hi - lo <= 1) }'
    verdict "16 held connections and one more over --threads 4: 4 or 5 each" $? \
        "per thread: '$per' ($(grep '^ready' "$T/hold5.out"))"
    kill "$HPID" 2>/dev/null
    wait "$HPID" 2>/dev/null
    PORT=$PORT_BEFORE
    stop_daemon "$SPID"
    [ "$STOP_RC" = 0 ]
    verdict "that daemon stops cleanly" $? "exit $STOP_RC after ${STOP_SECS}s"
else
    fail "a daemon with --threads 4" "it did not start"
fi
