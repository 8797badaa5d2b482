#!/bin/sh
# Integration area "python_client": the Python client (clients/python) and its
# scikit-learn-style estimators, run with Debian's /usr/bin/python3 against the
# main daemon ($PORT) and a second daemon of this area with an API key.
# Each unittest case of clients/python/tests is one line here (PASS/FAIL; a
# skipped case is a note). Then `pip install clients/python` into a venv.
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "python client"
PY=/usr/bin/python3
if [ ! -x "$PY" ]; then
    note "python client: $PY is missing, the area is skipped (Debian's python3)"
else
    $PY -c 'import numpy, sklearn' 2>/dev/null ||
        note "python client: numpy or scikit-learn is not importable by $PY (sh mk/deps.sh bench):" \
            "the cases needing them are skipped"
    printf 'python-client-key-0123\n' >"$T/py_keyfile"
    PY_AUTH_URL=""
    if start_daemon "$T/py_key.log" --db "$T/py_key.db" --api-key-file "$T/py_keyfile"; then
        PY_KEY_PID=$DPID
        PY_AUTH_URL=http://127.0.0.1:$DPORT
    else
        fail "python client: the API-key daemon starts"
    fi
    # timeout bounds the whole suite (every request has its own timeout too).
    GPSERVE_URL=http://127.0.0.1:$PORT GPSERVE_AUTH_URL=$PY_AUTH_URL \
        GPSERVE_API_KEY=python-client-key-0123 OPENBLAS_NUM_THREADS=1 \
        timeout $((600 * SLOW)) $PY "$ROOT/clients/python/tests/run_tests.py" \
        >"$T/py_tests.out" 2>"$T/py_tests.err"
    py_rc=$?
    py_passed=0
    while IFS= read -r line; do
        case $line in
        "PASS "*) pass "python: ${line#PASS }"; py_passed=$((py_passed + 1)) ;;
        "FAIL "*) fail "python: ${line#FAIL }" ;;
        "SKIP "*) note "python: skipped ${line#SKIP }" ;;
        *) echo "$line" ;;
        esac
    done <"$T/py_tests.out"
    if [ "$py_rc" -ne 0 ] && ! grep -q '^FAIL ' "$T/py_tests.out"; then
        fail "python client: the test runner exits $py_rc" "$(tail -n 5 "$T/py_tests.err")"
    fi
    [ "$py_passed" -gt 0 ] || fail "python client: no test passed"
    [ -n "$PY_AUTH_URL" ] && stop_daemon "$PY_KEY_PID"

    # pip install from a copy (pip builds in the source tree), into a venv that
    # sees the system's packages; no network (--no-index, --no-build-isolation).
    if $PY -m venv --help >/dev/null 2>&1 && $PY -m pip --version >/dev/null 2>&1; then
        cp -R "$ROOT/clients/python" "$T/pysrc"
        rm -rf "$T/pysrc/build" "$T/pysrc"/*.egg-info
        if $PY -m venv --system-site-packages "$T/pyvenv" >"$T/pip.log" 2>&1 &&
            "$T/pyvenv/bin/python" -m pip install --no-deps --no-index --no-build-isolation \
                "$T/pysrc" >>"$T/pip.log" 2>&1; then
            where=$(cd "$T" && "$T/pyvenv/bin/python" -c 'import gpserve_client as g, importlib.metadata as m; assert m.version("gpserve-client") == g.__version__; print(g.__file__)' 2>>"$T/pip.log")
            case $where in
            "$T/pyvenv/"*) pass "python client: pip install clients/python (version from __version__)" ;;
            *) fail "python client: pip install clients/python" "imported from '$where'; $(tail -n 3 "$T/pip.log")" ;;
            esac
        else
            fail "python client: pip install clients/python" "$(tail -n 5 "$T/pip.log")"
        fi
    else
        note "python client: no venv or pip for $PY, the install check is skipped"
    fi
fi
