#!/bin/sh
# A throw-away PostgreSQL 15 cluster for the tests.
#
#   sh tests/support/pgtmp.sh start DIR   start a cluster in DIR (made here, must not
#                                         exist), print its postgresql:// URL
#   sh tests/support/pgtmp.sh stop DIR    stop it and remove DIR
#
# The cluster listens on 127.0.0.1 only, on a free port (tried at random in
# 20000..59999), with password authentication over TCP (a scram-sha-256 user
# "gptest" with a random password, database "gpserve_test"), fsync off (the
# data are thrown away) and room for 500 connections (each gp_store holds 6).
# initdb refuses to run as root: as root every command runs as the user
# postgres (the Debian package creates it) with DIR owned by it; as anyone
# else, as yourself. Exits 2 with a message on stderr when PostgreSQL is not
# installed (PGBIN, default /usr/lib/postgresql/15/bin), 1 when it fails.
set -u
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
cmd=${1:-}
dir=${2:-}
if [ -z "$cmd" ] || [ -z "$dir" ]; then
    echo "usage: $0 start|stop DIR" >&2
    exit 2
fi

# as_owner CMD...: run as the cluster's owner.
as_owner() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

case $cmd in
start)
    if [ ! -x "$PGBIN/initdb" ] || [ ! -x "$PGBIN/pg_ctl" ]; then
        echo "pgtmp: PostgreSQL is not installed ($PGBIN/initdb missing; Debian: postgresql-15)" >&2
        exit 2
    fi
    if [ "$(id -u)" -eq 0 ] && ! id postgres >/dev/null 2>&1; then
        echo "pgtmp: running as root and there is no user 'postgres' to run PostgreSQL as" >&2
        exit 2
    fi
    if [ -e "$dir" ]; then
        echo "pgtmp: $dir exists already" >&2
        exit 1
    fi
    mkdir -p "$dir" || exit 1
    dir=$(cd "$dir" && pwd) || exit 1
    [ "$(id -u)" -eq 0 ] && chown postgres "$dir"
    chmod 700 "$dir"
    pw=$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
    printf '%s\n' "$pw" >"$dir/pw"
    [ "$(id -u)" -eq 0 ] && chown postgres "$dir/pw"
    if ! as_owner "$PGBIN/initdb" -D "$dir/data" -U gptest --pwfile="$dir/pw" \
        --auth-host=scram-sha-256 --auth-local=trust -E UTF8 --locale=C >"$dir/initdb.log" 2>&1; then
        echo "pgtmp: initdb failed:" >&2
        cat "$dir/initdb.log" >&2
        exit 1
    fi
    tries=0
    while :; do
        tries=$((tries + 1))
        port=$(($(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 40000 + 20000))
        if as_owner "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
            -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=500 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
            start >/dev/null 2>&1; then
            break
        fi
        if [ $tries -ge 8 ]; then
            echo "pgtmp: the server did not start (last port $port):" >&2
            tail -n 20 "$dir/server.log" >&2
            exit 1
        fi
    done
    echo "$port" >"$dir/port"
    if ! as_owner "$PGBIN/psql" -h "$dir" -p "$port" -U gptest -d postgres -q \
        -c "CREATE DATABASE gpserve_test" >"$dir/createdb.log" 2>&1; then
        echo "pgtmp: cannot create the database:" >&2
        cat "$dir/createdb.log" >&2
        as_owner "$PGBIN/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1
        exit 1
    fi
    echo "postgresql://gptest:$pw@127.0.0.1:$port/gpserve_test"
    ;;
stop)
    if [ -d "$dir/data" ]; then
        as_owner "$PGBIN/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1
    fi
    rm -rf "$dir"
    ;;
*)
    echo "usage: $0 start|stop DIR" >&2
    exit 2
    ;;
esac
