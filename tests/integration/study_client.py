"""Clients of a study for the studies area (tests/integration/t_studies.sh),
with the standard library only:

  study_client.py loop PORT STUDY N         N suggest/complete rounds of the quadratic
                                            (x0 - 0.3)^2 + (x1 + 0.5)^2; prints the best y
  study_client.py clients PORTS STUDY K R   K threads, each R rounds with its own client_id,
                                            through the comma-separated PORTS in turn (409
                                            busy answers are retried); prints "ok" or why not
  study_client.py check PORT STUDY N        the history holds N completed trials, each once,
                                            ids and parameters distinct, seq 1..N dense
"""
import json
import sys
import threading
import time
import urllib.error
import urllib.request


def call(port, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            text = r.read()
            return r.status, json.loads(text) if text else None
    except urllib.error.HTTPError as e:
        text = e.read()
        return e.code, json.loads(text) if text else None


def quad(p):
    return (p["x0"] - 0.3) ** 2 + (p["x1"] + 0.5) ** 2


def loop(port, study, n):
    best = float("inf")
    for _ in range(n):
        st, s = call(port, "POST", f"/v1/studies/{study}/suggestions", {"count": 1})
        if st != 200:
            print(f"suggest {st} {s}")
            return 1
        t = s["trials"][0]
        y = quad(t["parameters"])
        st, _ = call(port, "POST", f"/v1/studies/{study}/trials/{t['id']}", {"metrics": {"y": y}})
        if st != 200:
            print(f"complete {st}")
            return 1
        best = min(best, y)
    print(best)
    return 0


def retrying(port, method, path, body):
    for _ in range(50):
        st, b = call(port, method, path, body)
        if st != 409 or (b or {}).get("error", {}).get("field"):
            return st, b
        time.sleep(0.05)
    return st, b


def clients(ports, study, k, rounds):
    errors = []

    def worker(w):
        for r in range(rounds):
            port = ports[(w + r) % len(ports)]
            st, s = retrying(port, "POST", f"/v1/studies/{study}/suggestions",
                             {"count": 1, "client_id": f"w{w}"})
            if st != 200:
                errors.append(f"w{w} suggest {st} {s}")
                return
            for t in s["trials"]:
                st, b = call(port, "POST", f"/v1/studies/{study}/trials/{t['id']}",
                             {"metrics": {"y": quad(t["parameters"])}})
                if st != 200:
                    errors.append(f"w{w} complete {t['id']}: {st} {b}")
                    return

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(k)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("ok" if not errors else "; ".join(errors[:3]))
    return 0


def check(port, study, n):
    st, b = call(port, "GET", f"/v1/studies/{study}/trials")
    if st != 200:
        print(f"GET trials {st}")
        return 0
    done = [t for t in b["trials"] if t["state"] == "completed"]
    ids = [t["id"] for t in b["trials"]]
    params = [json.dumps(t["parameters"], sort_keys=True) for t in b["trials"]]
    seqs = sorted(t["seq"] for t in done)
    why = []
    if len(done) != n:
        why.append(f"{len(done)} completed, expected {n}")
    if len(set(ids)) != len(ids):
        why.append("repeated trial ids")
    if len(set(params)) != len(params):
        why.append("repeated parameters")
    if seqs != list(range(1, len(done) + 1)):
        why.append(f"seq not dense: {seqs[:10]}...")
    print("ok" if not why else "; ".join(why))
    return 0


def main():
    cmd = sys.argv[1]
    if cmd == "loop":
        return loop(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
    if cmd == "clients":
        ports = [int(p) for p in sys.argv[2].split(",")]
        return clients(ports, sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    if cmd == "check":
        return check(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
