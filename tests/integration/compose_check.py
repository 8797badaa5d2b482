#!/usr/bin/env python3
"""The scale-out files of docker/ against each other and the binary, without an engine
(run by tests/integration/docker_check.sh; also on its own):

  - docker/compose.yaml parses; the default (no profile) is the one service gpserve, and
    the profile "scale" is postgres, gpserve-replica and haproxy, each only in it;
  - every ${VAR} of the file has a default (Compose interpolates the whole file before it
    applies profiles, so a required or unset variable would break the default `up`);
  - postgres: a 15 image, a named volume, the pg_isready health check, its password from a
    secret; the replicas: no published port, N by deploy.replicas, started once postgres is
    healthy, GPSERVE_DB a postgresql:// URL to the postgres service, the API key a compose
    secret named by GPSERVE_API_KEY_FILE, no --db flag (it would win over GPSERVE_DB), a
    health check on /healthz, every GPSERVE_* variable in `gpserve --help`; haproxy: the
    2.6 image with docker/haproxy.cfg mounted, its port published;
  - docker/haproxy.cfg: the replicas by Docker's DNS (server-template, resolvers docker on
    127.0.0.11), checked with GET /readyz expecting 200, timeouts no shorter than the
    daemon's request deadline, and `haproxy -c` passes (a note when haproxy is missing);
  - no secret value is committed: the secrets come from variables that docker/.env.example
    names with empty values, and docker/.env is ignored by git.

Prints "ok   docker: NAME" / "FAIL docker: NAME: why" / "note: ..." lines and
"N passed, N failed". Usage: compose_check.py ROOT GPSERVE_BINARY
"""
import os
import re
import shutil
import subprocess
import sys

try:
    import yaml
except ImportError:
    print("note: python3 has no yaml module (Debian: python3-yaml): compose structure not checked")
    print("0 passed, 0 failed")
    sys.exit(0)

ROOT, BIN = sys.argv[1], sys.argv[2]
DC = os.path.join(ROOT, "docker/compose.yaml")
HA = os.path.join(ROOT, "docker/haproxy.cfg")
ENV_EXAMPLE = os.path.join(ROOT, "docker/.env.example")
SCALE = {"postgres", "gpserve-replica", "haproxy"}
counts = [0, 0]


def check(name, ok, why=""):
    counts[0 if ok else 1] += 1
    print(("ok   docker: %s" % name) if ok else ("FAIL docker: %s%s" % (name, ": %s" % (why,) if why else "")))
    return ok


def interpolate(text):
    """Compose's ${VAR:-default} / ${VAR-default} with the variables unset."""
    return re.sub(r"\$\{[A-Za-z_][A-Za-z0-9_]*:?-([^}]*)\}", r"\1", text)


def env_of(svc):
    env = svc.get("environment") or {}
    if isinstance(env, list):
        env = dict(e.split("=", 1) if "=" in e else (e, "") for e in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


def finish():
    print("%d passed, %d failed" % tuple(counts))
    sys.exit(1 if counts[1] else 0)


raw = open(DC).read()
try:
    dc = yaml.safe_load(interpolate(raw))
except yaml.YAMLError as e:
    check("compose.yaml parses as YAML", False, str(e).splitlines()[0])
    finish()
check("compose.yaml parses as YAML", isinstance(dc, dict) and isinstance(dc.get("services"), dict))
services = dc.get("services") or {}

# ---- variables: each has a default, none is required
refs = re.findall(r"\$\{([^}]*)\}", raw)
bare = [r for r in refs if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*:?-[^}]*", r)]
check("every ${VAR} of compose.yaml has a default (the default `up` needs no .env)",
      not bare and "$VAR" not in raw, "without a default: " + ", ".join(bare))

# ---- profiles
default = sorted(n for n, s in services.items() if not s.get("profiles"))
check("without a profile only the service gpserve starts", default == ["gpserve"], "default services %s" % default)
scale = sorted(n for n, s in services.items() if "scale" in (s.get("profiles") or []))
check("profile scale: %s" % " ".join(sorted(SCALE)), scale == sorted(SCALE), "profile scale has %s" % scale)
for n in SCALE & set(services):
    check("%s is only in the profile scale" % n, services[n].get("profiles") == ["scale"],
          "profiles %s" % services[n].get("profiles"))
gp = services.get("gpserve", {})
check("gpserve depends on no scale service", not (set(gp.get("depends_on") or []) & SCALE))

secrets_top = dc.get("secrets") or {}
volumes_top = dc.get("volumes") or {}

# ---- postgres
pg = services.get("postgres", {})
check("postgres: image postgres:15", str(pg.get("image", "")).startswith("postgres:15"), pg.get("image"))
pg_vols = [str(v) for v in pg.get("volumes") or []]
pg_named = [v.split(":")[0] for v in pg_vols if v.split(":")[1:2] == ["/var/lib/postgresql/data"]]
check("postgres: named volume on /var/lib/postgresql/data, declared",
      len(pg_named) == 1 and pg_named[0] in volumes_top, "volumes %s" % pg_vols)
pg_hc = " ".join(map(str, (pg.get("healthcheck") or {}).get("test") or []))
check("postgres: healthcheck pg_isready", "pg_isready" in pg_hc, pg_hc)
pg_env = env_of(pg)
pwfile = pg_env.get("POSTGRES_PASSWORD_FILE", "")
pg_secrets = [s if isinstance(s, str) else s.get("source") for s in pg.get("secrets") or []]
check("postgres: password from a secret (POSTGRES_PASSWORD_FILE), none written in the file",
      "POSTGRES_PASSWORD" not in pg_env and pwfile.startswith("/run/secrets/")
      and os.path.basename(pwfile) in pg_secrets and os.path.basename(pwfile) in secrets_top,
      "environment %s, secrets %s" % (sorted(pg_env), pg_secrets))

# ---- the replicas
rep = services.get("gpserve-replica", {})
rep_env = env_of(rep)
check("gpserve-replica: publishes no port (reached through haproxy)", not rep.get("ports"), rep.get("ports"))
check("gpserve-replica: no container_name (it is scaled)", "container_name" not in rep)
try:
    nrep = int((rep.get("deploy") or {}).get("replicas"))
except (TypeError, ValueError):
    nrep = 0
check("gpserve-replica: deploy.replicas >= 2 by default", nrep >= 2, "replicas %s" % nrep)
dep = rep.get("depends_on") or {}
check("gpserve-replica: depends on postgres being healthy",
      isinstance(dep, dict) and (dep.get("postgres") or {}).get("condition") == "service_healthy", dep)
url = rep_env.get("GPSERVE_DB", "")
check("gpserve-replica: GPSERVE_DB is postgresql://USER:PASS@postgres:PORT/DB",
      re.fullmatch(r"postgresql://[^:@/]+:[^@/]*@postgres:\d+/[^/]+", url) is not None, url)
db_line = re.search(r"GPSERVE_DB:.*", raw)
db_pw = re.search(r"\$\{([A-Za-z_][A-Za-z0-9_]*)", db_line.group(0) if db_line else "")
pg_secret_src = (secrets_top.get(os.path.basename(pwfile)) or {}).get("environment")
check("gpserve-replica: the URL's password is postgres's secret (one variable)",
      db_pw is not None and db_pw.group(1) == pg_secret_src, "%s vs %s" % (db_pw and db_pw.group(1), pg_secret_src))
cmd = [str(c) for c in rep.get("command") or []]
check("gpserve-replica: command has no --db (a flag wins over GPSERVE_DB)", "--db" not in cmd and cmd != [], cmd)
keyfile = rep_env.get("GPSERVE_API_KEY_FILE", "")
rep_secrets = [s if isinstance(s, str) else s.get("source") for s in rep.get("secrets") or []]
check("gpserve-replica: GPSERVE_API_KEY_FILE is a compose secret of the service",
      keyfile == "/run/secrets/" + os.path.basename(keyfile) and os.path.basename(keyfile) in rep_secrets
      and os.path.basename(keyfile) in secrets_top, "%s, secrets %s" % (keyfile, rep_secrets))
check("gpserve-replica: no per-address connection limit behind the proxy",
      rep_env.get("GPSERVE_MAX_CONNECTIONS_PER_IP") == "0", rep_env.get("GPSERVE_MAX_CONNECTIONS_PER_IP"))
rep_hc = " ".join(map(str, (rep.get("healthcheck") or {}).get("test") or []))
check("gpserve-replica: healthcheck on /healthz", "http://127.0.0.1:8080/healthz" in rep_hc, rep_hc)
check("gpserve-replica: the image of gpserve", rep.get("image") == gp.get("image") and rep.get("build") == gp.get("build"))
try:
    helptext = subprocess.run([BIN, "--help"], capture_output=True, text=True, timeout=30).stdout
except OSError as e:
    helptext = ""
    check("gpserve --help runs", False, str(e))
for v in sorted({k for n in SCALE for k in env_of(services.get(n, {})) if k.startswith("GPSERVE_")}):
    check("scale: variable %s is in --help" % v, re.search(r"\b%s\b" % v, helptext) is not None)

# ---- secrets: from variables, which .env.example names without a value
for name, spec in sorted(secrets_top.items()):
    check("secret %s comes from a variable, not a committed file" % name,
          isinstance(spec, dict) and "environment" in spec and "file" not in spec, spec)
example = {}
if check("docker/.env.example exists", os.path.isfile(ENV_EXAMPLE)):
    for line in open(ENV_EXAMPLE):
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", line.strip())
        if m:
            example[m.group(1)] = m.group(2)
used = sorted(set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)", raw)) |
              {s["environment"] for s in secrets_top.values() if isinstance(s, dict) and "environment" in s})
missing = [v for v in used if v not in example]
check(".env.example names every variable compose.yaml uses", not missing, "missing: %s" % missing)
filled = [s["environment"] for s in secrets_top.values()
          if isinstance(s, dict) and example.get(s.get("environment"), "") != ""]
check(".env.example holds no secret value", not filled, "filled in: %s" % filled)
ignored = None
if shutil.which("git") and os.path.exists(os.path.join(ROOT, ".git")):
    ignored = subprocess.run(["git", "-C", ROOT, "check-ignore", "-q", "docker/.env"]).returncode == 0
if ignored is None:
    print("note: not a git work tree: .gitignore of docker/.env not checked")
else:
    check("docker/.env is ignored by git", ignored)

# ---- haproxy service and its configuration
ha = services.get("haproxy", {})
check("haproxy: image haproxy:2.6", str(ha.get("image", "")).startswith("haproxy:2.6"), ha.get("image"))
ha_vols = [str(v) for v in ha.get("volumes") or []]
check("haproxy: mounts docker/haproxy.cfg read-only",
      "./haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro" in ha_vols, ha_vols)
check("haproxy: depends on gpserve-replica", "gpserve-replica" in (ha.get("depends_on") or {}))
ha_ports = [str(p) for p in ha.get("ports") or []]
check("haproxy: publishes its frontend (container port 8080)",
      any(p.split(":")[-1] == "8080" for p in ha_ports), ha_ports)
ha_host = [p.split(":")[-2] for p in ha_ports if p.split(":")[-1] == "8080"]
gp_host = [str(p).split(":")[-2] for p in gp.get("ports") or [] if str(p).split(":")[-1] == "8080"]
check("haproxy's host port differs from gpserve's (both may run)", not (set(ha_host) & set(gp_host)),
      "%s vs %s" % (ha_host, gp_host))

cfg = {}  # section header -> list of lines
if check("docker/haproxy.cfg exists", os.path.isfile(HA)):
    section = None
    for line in open(HA):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if re.match(r"^(global|defaults|frontend|backend|listen|resolvers)\b", line):
            section = line
            cfg[section] = []
        elif section:
            cfg[section].append(" ".join(line.split()))
backends = {k: v for k, v in cfg.items() if k.startswith("backend")}
res_docker = cfg.get("resolvers docker", [])
check("haproxy.cfg: resolvers docker ask 127.0.0.11:53 (Docker's DNS)",
      any(l.startswith("nameserver ") and l.endswith(" 127.0.0.11:53") for l in res_docker), res_docker)
tmpl = [(k, l) for k, v in backends.items() for l in v if l.startswith("server-template ")]
check("haproxy.cfg: server-template over gpserve-replica:8080",
      len(tmpl) == 1 and tmpl[0][1].split()[3] == "gpserve-replica:8080", tmpl)
if tmpl:
    bk = backends[tmpl[0][0]]
    srv = " ".join([tmpl[0][1]] + [l for l in bk if l.startswith("default-server ")])
    check("haproxy.cfg: the replicas resolved by resolvers docker, checked", " resolvers docker" in srv
          and re.search(r"(^| )check( |$)", srv) is not None and "init-addr none" in srv, srv)
    check("haproxy.cfg: option httpchk GET /readyz", "option httpchk GET /readyz" in bk)
    check("haproxy.cfg: http-check expect status 200", "http-check expect status 200" in bk)
    check("haproxy.cfg: balance leastconn or roundrobin",
          any(l in ("balance leastconn", "balance roundrobin") for l in bk))


def seconds(v):
    m = re.fullmatch(r"(\d+)(us|ms|s|m|h|d)?", v)
    if not m:
        return None
    return int(m.group(1)) * {"us": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600, "d": 86400, None: 1e-3}[m.group(2)]


timeouts = {l.split()[1]: seconds(l.split()[2]) for l in cfg.get("defaults", []) if l.startswith("timeout ")}
for t in ("client", "server"):
    check("haproxy.cfg: timeout %s >= the daemon's --request-timeout (120 s)" % t,
          (timeouts.get(t) or 0) >= 120, "timeout %s %s s" % (t, timeouts.get(t)))
check("haproxy.cfg: timeout http-request is the daemon's 120 s", timeouts.get("http-request") == 120,
      timeouts.get("http-request"))
if shutil.which("haproxy"):
    r = subprocess.run(["haproxy", "-c", "-f", HA], capture_output=True, text=True, timeout=60)
    out = (r.stdout + r.stderr).strip()
    check("haproxy -c -f docker/haproxy.cfg", r.returncode == 0 and "ALERT" not in out and "WARNING" not in out,
          next((l for l in out.splitlines() if "ALERT" in l or "WARNING" in l), "exit %d" % r.returncode))
else:
    print("note: haproxy is not installed (Debian: haproxy): haproxy -c not run")
finish()
