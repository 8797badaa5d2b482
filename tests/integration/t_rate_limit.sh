#!/bin/sh
# Integration area "rate_limit": per-key rate limits (server/ratelimit.h;
# docs/design/api.md, "Rate limits"): a key with rps=20 sending as fast as it
# can for 3 s gets 20/s through (within 10%, the burst allowed for), its 429s
# carry Retry-After, another key is unaffected, fits_per_minute=3 refuses the
# 4th fit, the OIP shape on /v2, /metrics counts per key name, a reload that
# changes a key's rps applies at once, and the per-address limit of
# --rate-limit-rps when authentication is off (open routes never limited).
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "rate limits"
RL_FAST=fast-key-0123456789abcdef
RL_OTHER=other-key-0123456789abcdef
RL_FIT=fitter-key-0123456789abcdef
RL_OIP=oip-key-0123456789abcdefgh
RL_ADMIN=admin-key-0123456789abcdefg
RL_SLOW=slow-key-0123456789abcdefgh
rl_keys() {
    # $1: the fast key's rps
    {
        echo "fast read,rps=$1 $RL_FAST"
        echo "other read,rps=20 $RL_OTHER"
        echo "fitter write,fits_per_minute=3 $RL_FIT"
        echo "oip read,rps=1 $RL_OIP"
        echo "slow read,rps=1 $RL_SLOW"
        echo "boss admin $RL_ADMIN"
    } >"$T/rl_keys.tmp"
    mv "$T/rl_keys.tmp" "$T/rl_keys"
}
rl_keys 20
if ! start_daemon "$T/rl.log" --db "$T/rl.db" --keys-file "$T/rl_keys"; then
    fail "daemon with rate-limited keys starts"
    return 0 2>/dev/null || exit 0
fi
pass "daemon with rate-limited keys starts"
RLPID=$DPID
MAINPORT=$PORT
PORT=$DPORT

# now_ns: a monotonic-enough clock for the test's own window (GNU date).
now_ns() { date +%s%N; }

# ---- rps=20, as fast as one connection can for ~3 s: one curl, a URL glob
# of requests in a row on a kept-alive connection; stopped after the window.
t0=$(now_ns)
curl -s -H "Authorization: Bearer $RL_FAST" -w '\nCODE %{http_code}\n' \
    "http://127.0.0.1:$PORT/v1/methods?i=[1-1000000]" >"$T/rl_codes" 2>/dev/null &
CPID=$!
sleep 3
kill "$CPID" 2>/dev/null
wait "$CPID" 2>/dev/null
t1=$(now_ns)
ok=$(grep -c '^CODE 200$' "$T/rl_codes")
limited=$(grep -c '^CODE 429$' "$T/rl_codes")
# accepted = burst (20) + 20/s x window; the rate measured without the burst
rate=$(awk -v ok="$ok" -v t0="$t0" -v t1="$t1" 'BEGIN { printf "%.2f", (ok - 20) / ((t1 - t0) / 1e9) }')
awk -v r="$rate" 'BEGIN { exit !(r >= 18 && r <= 22) }' && [ "$limited" -gt 0 ]
verdict "rps=20 for $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", (b - a) / 1e9 }') s: $ok accepted (burst 20 + $rate/s), $limited refused" $? \
    "measured $rate/s, expected 20 +- 10%"

# One over-limit request on its own: a key of rps=1 (burst 1), emptied by
# three requests, stays empty for a second; fast's bucket (20/s) would have a
# token again 50 ms later, before a new curl process has even connected.
curl -s -o /dev/null -H "Authorization: Bearer $RL_SLOW" "http://127.0.0.1:$PORT/v1/methods?i=[1-3]" 2>/dev/null
check_err "an over-limit request: 429 overloaded naming rps" 429 overloaded '^rps$' GET /v1/methods \
    -H "Authorization: Bearer $RL_SLOW"
ra=$(header Retry-After)
[ "$ra" = 1 ]
verdict "its Retry-After is the whole seconds to the next token (1 at 1/s)" $? "Retry-After '$ra'"
grep -q "key slow at most 1 requests a second" "$T/body"
verdict "the 429 names the key and its limit" $? "$(cat "$T/body")"
check "another key is unaffected" 200 GET /v1/methods -H "Authorization: Bearer $RL_OTHER"
check "open routes are never limited (/healthz)" 200 GET /healthz

# ---- fits_per_minute=3: the 4th fit in a minute is refused
FIT_BODY='{"name":"rl","method":"exact","kernel":{"type":"rbf"},"X":[[0],[1],[2]],"y":[0,1,0]}'
fits_ok=0
for i in 1 2 3; do
    jpost /v1/models "$FIT_BODY" -H "Authorization: Bearer $RL_FIT"
    [ "$ST" = 201 ] && fits_ok=$((fits_ok + 1))
done
[ $fits_ok = 3 ]
verdict "fits_per_minute=3: three fits in a row are 201" $? "$fits_ok of 3"
check_jerr "the 4th fit in the minute: 429 naming fits_per_minute" 429 overloaded \
    '^fits_per_minute$' /v1/models "$FIT_BODY" -H "Authorization: Bearer $RL_FIT"
ra=$(header Retry-After)
[ -n "$ra" ] && [ "$ra" -ge 1 ] && [ "$ra" -le 20 ]
verdict "its Retry-After is at most one refill (20 s at 3/min)" $? "Retry-After '$ra'"
check "the fitter key still reads (fits only spend the fit budget)" 200 GET /v1/models/rl \
    -H "Authorization: Bearer $RL_FIT"

# ---- the Open Inference Protocol's shape on /v2 (rps=1: the 2nd is refused)
req GET /v2/models/rl/ready -H "Authorization: Bearer $RL_OIP"
req GET /v2/models/rl/ready -H "Authorization: Bearer $RL_OIP"
[ "$ST" = 429 ] && jhas '.error | type == "string"' && [ -n "$(header Retry-After)" ]
verdict "/v2 over the limit: 429, OIP error shape, Retry-After" $? "status $ST $(cat "$T/body")"

# ---- /metrics: per key name
req GET /metrics
awk '/^gpserve_rate_limited_total\{key="fast",limit="rps"\}/ { exit !($2 >= 1) }
     END { }' "$T/body" && grep -q '^gpserve_rate_limited_total{key="fitter",limit="fits_per_minute"} 1$' "$T/body" &&
    grep -q '^gpserve_rate_limited_total{key="oip",limit="rps"} [1-9]' "$T/body" &&
    grep -q '^gpserve_rate_limited_total{key="fast",limit="rps"} [1-9]' "$T/body"
verdict "/metrics counts the refusals per key name and limit" $? "$(grep rate_limited "$T/body")"

# ---- a reload that lowers the fast key's rps applies to the next request
rl_keys 2
check "admin reloads the keys (fast now rps=2)" 200 POST /v1/admin/reload \
    -H "Authorization: Bearer $RL_ADMIN"
sleep 1.2 # whatever the old bucket held is cut to the new burst (2)
curl -s -H "Authorization: Bearer $RL_FAST" -w '\nCODE %{http_code}\n' \
    "http://127.0.0.1:$PORT/v1/methods?i=[1-10]" >"$T/rl_codes2" 2>/dev/null
ok2=$(grep -c '^CODE 200$' "$T/rl_codes2")
[ "$ok2" -ge 2 ] && [ "$ok2" -le 4 ]
verdict "after the reload, 10 quick requests of fast get 2 (its new burst) through" $? "$ok2 accepted"
stop_daemon "$RLPID"
[ "$STOP_RC" = 0 ]
verdict "rate-limited daemon exits 0" $? "exit $STOP_RC"

# ---- authentication off: the flag limits each client address
if ! start_daemon "$T/rl_open.log" --db "$T/rl_open.db" --rate-limit-rps 5 \
    --rate-limit-fits-per-minute 1; then
    fail "daemon with --rate-limit-rps starts"
    PORT=$MAINPORT
    return 0 2>/dev/null || exit 0
fi
RLPID=$DPID
PORT=$DPORT
curl -s -w '\nCODE %{http_code}\n' "http://127.0.0.1:$PORT/v1/methods?i=[1-20]" \
    >"$T/rl_codes3" 2>/dev/null
ok3=$(grep -c '^CODE 200$' "$T/rl_codes3")
[ "$ok3" -ge 5 ] && [ "$ok3" -le 8 ]
verdict "auth off, --rate-limit-rps 5: 20 quick requests from one address get ~5 through" $? \
    "$ok3 accepted"
check_err "the address over the limit: 429 naming rps" 429 overloaded '^rps$' GET /v1/methods
grep -q "client 127.0.0.1 at most 5" "$T/body"
verdict "the 429 names the client address" $? "$(cat "$T/body")"
curl -s -w '\nCODE %{http_code}\n' "http://127.0.0.1:$PORT/healthz?i=[1-20]" >"$T/rl_codes4" 2>/dev/null
[ "$(grep -c '^CODE 200$' "$T/rl_codes4")" = 20 ]
verdict "health is never limited" $? "$(grep -c '^CODE 200$' "$T/rl_codes4") of 20"
sleep 1.2
jpost /v1/models "$FIT_BODY"
st1=$ST
sleep 0.3
check_jerr "--rate-limit-fits-per-minute 1: the 2nd fit is 429" 429 overloaded '^fits_per_minute$' \
    /v1/models "$FIT_BODY"
[ "$st1" = 201 ]
verdict "the 1st fit of the address is 201" $? "status $st1"
req GET /metrics
grep -q '^gpserve_rate_limited_total{key="-",limit="rps"} [1-9]' "$T/body"
verdict "/metrics counts addresses under key=\"-\" (no label per address)" $? \
    "$(grep rate_limited "$T/body")"
stop_daemon "$RLPID"
PORT=$MAINPORT
