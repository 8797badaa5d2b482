#!/bin/sh
# What TLS costs (bench/results/tls.md):  sh bench/tls.sh [BIN] [SECONDS] [ROUNDS]
# Starts BIN (build/gpserve) twice on loopback, plain HTTP and with
# --tls-cert (an ECDSA P-256 certificate of a CA made here), fits one small
# exact model on each, then runs wrk with one thread and one connection
# against both, interleaved (plain, tls, plain, tls, ...), ROUNDS times
# SECONDS each:
#   keep-alive   one connection for every request: the per-request cost;
#   close        "Connection: close": a new TCP connection (and, with TLS, a
#                full handshake) per request: the per-connection cost.
# for GET /healthz and a one-point predict. Prints the median requests/s of
# each and the cost per request in microseconds; the difference between the
# two daemons is what TLS adds. Needs wrk (built with OpenSSL: it speaks
# https), openssl and curl; uses ports 18441 and 18442.
BIN=${1:-build/gpserve}
SECS=${2:-5}
ROUNDS=${3:-3}
W=$(mktemp -d /tmp/gpserve-tls-bench.XXXXXX) || exit 1
for tool in wrk openssl curl; do
    command -v $tool >/dev/null 2>&1 || { echo "bench/tls.sh: $tool is missing" >&2; exit 1; }
done
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -keyout "$W/ca.key" -out "$W/ca.pem" -subj /CN=bench-ca >/dev/null 2>&1
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/s.key" \
    -out "$W/s.csr" -subj /CN=localhost >/dev/null 2>&1
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$W/s.ext"
openssl x509 -req -in "$W/s.csr" -CA "$W/ca.pem" -CAkey "$W/ca.key" -set_serial 1 -days 2 \
    -extfile "$W/s.ext" -out "$W/s.pem" >/dev/null 2>&1
"$BIN" --bind 127.0.0.1 --port 18441 --db "$W/plain.db" --threads 1 >"$W/plain.log" 2>&1 &
P1=$!
"$BIN" --bind 127.0.0.1 --port 18442 --db "$W/tls.db" --threads 1 --tls-cert "$W/s.pem" \
    --tls-key "$W/s.key" >"$W/tls.log" 2>&1 &
P2=$!
trap 'kill $P1 $P2 2>/dev/null; wait $P1 $P2 2>/dev/null; rm -rf "$W"' EXIT
PLAIN=http://127.0.0.1:18441
TLS=https://127.0.0.1:18442
FIT='{"name":"b","method":"exact","kernel":{"type":"rbf"},"X":[[0],[1],[2],[3],[4],[5],[6],[7]],"y":[0,0.84,0.91,0.14,-0.76,-0.96,-0.28,0.66]}'
for u in $PLAIN $TLS; do
    for _ in $(seq 100); do curl -sf --cacert "$W/ca.pem" "$u/healthz" >/dev/null && break; sleep 0.1; done
    curl -sf --cacert "$W/ca.pem" -H 'Content-Type: application/json' --data-binary "$FIT" \
        "$u/v1/models" >/dev/null || { echo "bench/tls.sh: fit on $u failed" >&2; exit 1; }
done
cat >"$W/predict.lua" <<'EOF'
wrk.method = "POST"
wrk.body = '{"X":[[2.5]]}'
wrk.headers["Content-Type"] = "application/json"
EOF
# rate URL PATH MODE: requests/s of one wrk run.
rate() {
    case $3 in close) h='-H Connection:close' ;; *) h='' ;; esac
    case $2 in /healthz) s='' ;; *) s="-s $W/predict.lua" ;; esac
    # shellcheck disable=SC2086
    wrk -t1 -c1 -d"${SECS}s" $h $s "$1$2" 2>&1 | awk '/^Requests\/sec/ { print $2 }'
}
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
lscpu | sed -n 's/^Model name: *//p' | head -n 1 | sed 's/^/# CPU: /'
echo "# $(nproc) CPUs; wrk -t1 -c1, ${SECS}s x $ROUNDS rounds interleaved; median requests/s"
echo "| request | connection | plain req/s | TLS req/s | plain us/req | TLS us/req | TLS adds us |"
echo "|---|---|---|---|---|---|---|"
for path in /healthz /v1/models/b/predict; do
    for mode in keep-alive close; do
        : >"$W/p"
        : >"$W/t"
        for _ in $(seq "$ROUNDS"); do
            rate $PLAIN $path $mode >>"$W/p"
            rate $TLS $path $mode >>"$W/t"
        done
        p=$(median <"$W/p")
        t=$(median <"$W/t")
        awk -v path="$path" -v mode="$mode" -v p="$p" -v t="$t" 'BEGIN {
            printf "| %s | %s | %.0f | %.0f | %.1f | %.1f | %.1f |\n", path, mode, p, t,
                1e6 / p, 1e6 / t, 1e6 / t - 1e6 / p }'
    done
done
# The handshake alone: openssl s_time opens connections to the TLS daemon
# for SECONDS, each a full handshake (-new) or a resumed session (-reuse),
# and GETs /healthz on it; python3 does the same in plain TCP against the
# plain daemon. The daemon's own CPU per connection (utime + stime from
# /proc, in clock ticks) is the figure that does not depend on the client.
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
echo
echo "| connection | connections/s (client loop) | daemon CPU per connection, us |"
echo "|---|---|---|"
for mode in -new -reuse; do
    a=$(ticks $P2)
    out=$(timeout $((SECS * 4 + 10)) openssl s_time -connect 127.0.0.1:18442 $mode -time "$SECS" \
        -www /healthz -CAfile "$W/ca.pem" 2>/dev/null | grep 'real seconds' | head -n 1)
    b=$(ticks $P2)
    n=$(echo "$out" | awk '{ print $1 }')
    r=$(echo "$out" | awk '{ print $4 }')
    awk -v m="$mode" -v n="$n" -v r="$r" -v d=$((b - a)) -v hz="$hz" 'BEGIN {
        printf "| TLS %s | %.0f | %.0f |\n", m == "-new" ? "full handshake" : "resumed session",
            n / r, d / hz * 1e6 / n }'
done
a=$(ticks $P1)
n=$(python3 - "$SECS" <<'PY'
import socket, sys, time
t = time.time(); n = 0
while time.time() - t < float(sys.argv[1]):
    s = socket.create_connection(("127.0.0.1", 18441))
    s.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
    while s.recv(4096):
        pass
    s.close(); n += 1
print(n)
PY
)
b=$(ticks $P1)
awk -v n="$n" -v s="$SECS" -v d=$((b - a)) -v hz="$hz" 'BEGIN {
    printf "| plain TCP | %.0f | %.0f |\n", n / s, d / hz * 1e6 / n }'
