// Validates the Kubernetes manifests of a directory (deploy/k8s) offline:
//
//  1. schema: every object against the JSON schema of its kind, generated from
//     Kubernetes' OpenAPI document (the pinned npm package kubernetes-models, whose
//     compiled ajv validators know recent fields, e.g. 1.34's hostnameOverride), strictly: a
//     field the schema does not name is an error too, as with kubectl's
//     --validate=strict (the validator reads each object through a Proxy; a key it
//     never read, in an object whose keys it never listed as a map's, is unknown);
//  2. what the API server or the daemon would refuse though the schema allows it:
//     selectors that miss the pod labels, minAvailable with maxUnavailable, probe or
//     Service ports that name no container port, a secretKeyRef or a secret volume
//     item missing from the Secret, GPSERVE_* variables and flags that `gpserve --help`
//     does not list, the image user's uid (docker/Dockerfile);
//  3. the directory's own contract: kustomization.yaml lists exactly its manifests,
//     no object names a namespace, /readyz is the readiness probe and /healthz the
//     liveness probe, the pod runs as non-root with a read-only root file system, and
//     the Secret template holds placeholders that cannot run.
//
// With --self-test, also writes mutated copies of the manifests (a probe port as a
// list, an unknown field, no selector, ...) to a temporary directory and checks that
// each is rejected for the reason it was made.
//
// Usage: node k8s_validate.mjs DIR [--help-file FILE] [--dockerfile FILE] [--self-test]
// Prints "ok   k8s: ..." / "FAIL k8s: ..." / "note: ..." lines and "N passed, N failed".
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import YAML from "yaml";

const argv = process.argv.slice(2);
const opt = (name) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const dir = argv.find((a, i) => !a.startsWith("--") && !["--help-file", "--dockerfile"].includes(argv[i - 1]));
const helpText = opt("--help-file") ? fs.readFileSync(opt("--help-file"), "utf8") : null;
const dockerfile = opt("--dockerfile") ? fs.readFileSync(opt("--dockerfile"), "utf8") : null;
let npass = 0;
let nfail = 0;
const ok = (name) => {
  npass++;
  console.log(`ok   k8s: ${name}`);
};
const bad = (name, why) => {
  nfail++;
  console.log(`FAIL k8s: ${name}${why ? ": " + why : ""}`);
};

// ---- loading

// {file: [objects]} of every *.yaml but kustomization.yaml, and the kustomization.
function loadDir(d) {
  const files = fs.readdirSync(d).filter((f) => f.endsWith(".yaml") || f.endsWith(".yml")).sort();
  const docs = {};
  const errors = [];
  let kustomization = null;
  for (const f of files) {
    const parsed = YAML.parseAllDocuments(fs.readFileSync(path.join(d, f), "utf8"));
    const objs = [];
    for (const doc of parsed) {
      if (doc.errors.length) errors.push(`${f}: YAML: ${doc.errors[0].message.split("\n")[0]}`);
      const o = doc.toJS();
      if (o !== null && o !== undefined) objs.push(o);
    }
    if (f === "kustomization.yaml") kustomization = objs[0] ?? null;
    else docs[f] = objs;
  }
  return { docs, kustomization, errors };
}

// ---- 1. schema, strict

// The ajv validator reads every property its schema names (data.port, ...) and lists
// the keys of maps (for ... in); record both on every object it visits.
function tracked(value, where, records) {
  if (value === null || typeof value !== "object") return value;
  const rec = { where, obj: value, read: new Set(), listed: false };
  records.push(rec);
  const children = new Map();
  return new Proxy(value, {
    get(t, k, r) {
      if (typeof k === "string") rec.read.add(k);
      const v = Reflect.get(t, k, r);
      if (v === null || typeof v !== "object" || typeof k !== "string") return v;
      if (!children.has(k)) children.set(k, tracked(v, `${where}/${k}`, records));
      return children.get(k);
    },
    has(t, k) {
      if (typeof k === "string") rec.read.add(k);
      return Reflect.has(t, k);
    },
    ownKeys(t) {
      rec.listed = true;
      return Reflect.ownKeys(t);
    },
  });
}

async function modelOf(apiVersion, kind) {
  if (typeof apiVersion !== "string" || typeof kind !== "string" || !/^[A-Za-z0-9.\/]+$/.test(apiVersion + kind))
    return null;
  try {
    const mod = await import(`kubernetes-models/${apiVersion}/${kind}`);
    return mod[kind] ?? null;
  } catch {
    return null;
  }
}

async function schemaErrors(obj, label) {
  const Model = await modelOf(obj.apiVersion, obj.kind);
  if (!Model) return [`${label}: no schema for apiVersion ${obj.apiVersion} kind ${obj.kind}`];
  const records = [];
  const out = [];
  try {
    Model.prototype.validate.call(tracked(obj, "", records));
  } catch (e) {
    for (const err of e.errors ?? [{ instancePath: "", message: e.message }])
      out.push(`${label}: ${err.instancePath || "/"} ${err.message}`);
  }
  for (const rec of records) {
    if (rec.listed || Array.isArray(rec.obj)) continue;
    for (const k of Object.keys(rec.obj))
      if (!rec.read.has(k)) out.push(`${label}: ${rec.where}/${k} unknown field (strict)`);
  }
  return out;
}

// ---- 2. and 3. what the schema cannot say

const subset = (a, b) => Object.entries(a ?? {}).every(([k, v]) => b && b[k] === v);

function contractErrors({ docs, kustomization }) {
  const out = [];
  const all = Object.entries(docs).flatMap(([f, objs]) => objs.map((o) => ({ f, o })));
  const of = (kind) => all.filter(({ o }) => o.kind === kind).map(({ o }) => o);
  const names = Object.keys(docs).sort();
  const listed = [...(kustomization?.resources ?? [])].sort();
  if (!kustomization) out.push("kustomization.yaml: missing");
  else if (JSON.stringify(listed) !== JSON.stringify(names))
    out.push(`kustomization.yaml: resources ${JSON.stringify(listed)} are not the manifests ${JSON.stringify(names)}`);
  for (const { f, o } of all) {
    if (!o.metadata?.name) out.push(`${f}: ${o.kind} has no metadata.name`);
    if (o.metadata?.namespace) out.push(`${f}: ${o.kind} names namespace ${o.metadata.namespace} (the files are namespace-agnostic)`);
  }
  const secrets = Object.fromEntries(of("Secret").map((s) => [s.metadata?.name, { ...s.data, ...s.stringData }]));
  const deployments = of("Deployment");
  if (deployments.length !== 1) out.push(`one Deployment expected, found ${deployments.length}`);
  for (const d of deployments) {
    const tpl = d.spec?.template ?? {};
    const podLabels = tpl.metadata?.labels ?? {};
    const ps = tpl.spec ?? {};
    if (!d.spec?.selector?.matchLabels || !subset(d.spec.selector.matchLabels, podLabels))
      out.push("Deployment: spec.selector.matchLabels do not match the template's labels");
    if (!(d.spec?.replicas >= 3)) out.push(`Deployment: replicas ${d.spec?.replicas} (3 or more)`);
    for (const [kind, sel] of [
      ["Service", (s) => s.spec?.selector],
      ["PodDisruptionBudget", (p) => p.spec?.selector?.matchLabels],
    ])
      for (const o of of(kind))
        if (!sel(o) || !subset(sel(o), podLabels)) out.push(`${kind} ${o.metadata?.name}: selector does not match the pods`);
    const c = ps.containers?.[0] ?? {};
    const portNames = new Set((c.ports ?? []).map((p) => p.name));
    const portNums = new Set((c.ports ?? []).map((p) => p.containerPort));
    const portOk = (p) => (typeof p === "string" ? portNames.has(p) : portNums.has(p));
    for (const [probe, want] of [
      ["readinessProbe", "/readyz"],
      ["livenessProbe", "/healthz"],
    ]) {
      const g = c[probe]?.httpGet;
      if (!g) out.push(`Deployment: ${probe} is not an httpGet`);
      else {
        if (g.path !== want) out.push(`Deployment: ${probe} path ${g.path}, expected ${want}`);
        if (!portOk(g.port)) out.push(`Deployment: ${probe} port ${JSON.stringify(g.port)} is no container port`);
      }
    }
    if (c.startupProbe?.httpGet && !portOk(c.startupProbe.httpGet.port))
      out.push("Deployment: startupProbe port is no container port");
    for (const s of of("Service"))
      for (const p of s.spec?.ports ?? [])
        if (!portOk(p.targetPort ?? p.port)) out.push(`Service: targetPort ${JSON.stringify(p.targetPort)} is no container port`);
    const psc = ps.securityContext ?? {};
    const csc = c.securityContext ?? {};
    if (psc.runAsNonRoot !== true && csc.runAsNonRoot !== true) out.push("Deployment: runAsNonRoot is not set");
    if (csc.readOnlyRootFilesystem !== true) out.push("Deployment: the root file system is not read-only");
    if (csc.allowPrivilegeEscalation !== false) out.push("Deployment: allowPrivilegeEscalation is not false");
    const uid = psc.runAsUser ?? csc.runAsUser;
    if (dockerfile) {
      const du = dockerfile.match(/useradd\b[^\n]*--uid (\d+)/);
      const dg = dockerfile.match(/groupadd\b[^\n]*--gid (\d+)/);
      if (!du || Number(du[1]) !== uid) out.push(`Deployment: runAsUser ${uid} is not the image's uid ${du?.[1]}`);
      if (!dg || Number(dg[1]) !== (psc.runAsGroup ?? csc.runAsGroup))
        out.push(`Deployment: runAsGroup is not the image's gid ${dg?.[1]}`);
    }
    // Secrets named by the pod exist with their keys.
    for (const e of c.env ?? []) {
      const ref = e.valueFrom?.secretKeyRef;
      if (ref && !(ref.name in secrets && ref.key in secrets[ref.name]))
        out.push(`Deployment: env ${e.name} names secret ${ref.name} key ${ref.key}, which the Secret lacks`);
    }
    const mounts = new Map((c.volumeMounts ?? []).map((m) => [m.name, m.mountPath]));
    const files = new Set();
    for (const v of ps.volumes ?? []) {
      if (!v.secret) continue;
      for (const it of v.secret.items ?? []) {
        if (!(v.secret.secretName in secrets && it.key in secrets[v.secret.secretName]))
          out.push(`Deployment: volume ${v.name} names secret ${v.secret.secretName} key ${it.key}, which the Secret lacks`);
        if (mounts.has(v.name)) files.add(path.posix.join(mounts.get(v.name), it.path));
      }
    }
    const env = Object.fromEntries((c.env ?? []).map((e) => [e.name, e]));
    if (!env.GPSERVE_DB?.valueFrom?.secretKeyRef) out.push("Deployment: GPSERVE_DB does not come from a Secret");
    if (!files.has(env.GPSERVE_API_KEY_FILE?.value))
      out.push(`Deployment: GPSERVE_API_KEY_FILE ${env.GPSERVE_API_KEY_FILE?.value} is no file of a mounted Secret`);
    const args = [...(c.command ?? []), ...(c.args ?? [])].map(String);
    if (args.includes("--db")) out.push("Deployment: args name --db, which wins over GPSERVE_DB");
    if (helpText) {
      for (const e of c.env ?? [])
        if (e.name.startsWith("GPSERVE_") && !new RegExp(`\\b${e.name}\\b`).test(helpText))
          out.push(`Deployment: env ${e.name} is not in gpserve --help`);
      for (const a of args.filter((a) => a.startsWith("--")))
        if (!new RegExp(`(^|\\s)${a}[ =]`, "m").test(helpText)) out.push(`Deployment: flag ${a} is not in gpserve --help`);
    }
  }
  for (const p of of("PodDisruptionBudget"))
    if ((p.spec?.minAvailable !== undefined) === (p.spec?.maxUnavailable !== undefined))
      out.push("PodDisruptionBudget: exactly one of minAvailable and maxUnavailable");
  for (const s of of("Secret")) {
    const v = { ...s.data, ...s.stringData };
    if (!("api-key" in v) || !("database-url" in v)) out.push("Secret: keys api-key and database-url expected");
    else if (!(String(v["api-key"]).length < 16 && /CHANGE-ME/.test(v["api-key"]) && /CHANGE-ME/.test(v["database-url"])))
      out.push("Secret: the template must hold placeholders (CHANGE-ME; a key under 16 bytes, which the daemon refuses)");
  }
  return out;
}

async function validateDir(d) {
  const loaded = loadDir(d);
  const errs = [...loaded.errors];
  for (const [f, objs] of Object.entries(loaded.docs))
    for (const o of objs) errs.push(...(await schemaErrors(o, `${f} ${o.kind}/${o.metadata?.name}`)));
  const schemaCount = errs.length;
  errs.push(...contractErrors(loaded));
  return { loaded, errs, schemaCount };
}

// ---- self-test: each mutated copy must be rejected for its reason

const container = (docs) => docs["deployment.yaml"][0].spec.template.spec.containers[0];
const MUTATIONS = [
  ["a probe port given as a list", (d) => (container(d).readinessProbe.httpGet.port = [8080]), "readinessProbe/httpGet/port must be"],
  ["an unknown field in a probe (strict)", (d) => (container(d).livenessProbe.httpGet.paht = "/healthz"), "httpGet/paht unknown field"],
  ["an unknown field of a Service's spec (strict)", (d) => (d["service.yaml"][0].spec.clusterIp = "None"), "spec/clusterIp unknown field"],
  ["the Deployment's selector removed", (d) => delete d["deployment.yaml"][0].spec.selector, "must have required property selector"],
  ["replicas as a string", (d) => (d["deployment.yaml"][0].spec.replicas = "3"), "spec/replicas must be integer"],
  ["a Service port as a string", (d) => (d["service.yaml"][0].spec.ports[0].port = "8080"), "ports/0/port must be integer"],
  ["a memory limit as a list", (d) => (container(d).resources.limits.memory = ["6Gi"]), "limits/memory must be"],
  ["a misspelt kind", (d) => (d["pdb.yaml"][0].kind = "PodDisruptionBudgit"), "no schema for apiVersion policy/v1 kind PodDisruptionBudgit"],
  ["selector and template labels that differ", (d) => (d["deployment.yaml"][0].spec.template.metadata.labels["app.kubernetes.io/name"] = "other"), "do not match the template's labels"],
  ["a PodDisruptionBudget with minAvailable and maxUnavailable", (d) => (d["pdb.yaml"][0].spec.minAvailable = 2), "exactly one of minAvailable"],
  ["the liveness probe on /readyz", (d) => (container(d).livenessProbe.httpGet.path = "/readyz"), "livenessProbe path /readyz"],
  ["a probe on a port the container does not have", (d) => (container(d).readinessProbe.httpGet.port = "metrics"), "is no container port"],
  ["a secretKeyRef to a key the Secret lacks", (d) => (container(d).env[0].valueFrom.secretKeyRef.key = "db-url"), "key db-url, which the Secret lacks"],
  ["a variable gpserve does not know", (d) => (container(d).env.find((e) => e.name === "GPSERVE_JOB_LEASE").name = "GPSERVE_JOB_LEASES"), "GPSERVE_JOB_LEASES is not in gpserve --help"],
  ["a namespace in a manifest", (d) => (d["service.yaml"][0].metadata.namespace = "prod"), "names namespace prod"],
  ["a manifest left out of kustomization.yaml", null, "are not the manifests"],
  ["a real-looking key in the Secret template", (d) => (d["secret.yaml"][0].stringData["api-key"] = "0123456789abcdef0123456789abcdef"), "must hold placeholders"],
];

async function selfTest(base) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "k8s-mutated-"));
  try {
    for (const [name, mutate, expect] of MUTATIONS) {
      const docs = structuredClone(base.docs);
      const kust = structuredClone(base.kustomization);
      if (mutate) mutate(docs);
      else kust.resources = kust.resources.slice(1);
      if (helpText === null && /--help/.test(expect)) {
        console.log(`note: no --help-file: mutation '${name}' not tried`);
        continue;
      }
      fs.rmSync(tmp, { recursive: true, force: true });
      fs.mkdirSync(tmp);
      for (const [f, objs] of Object.entries(docs))
        fs.writeFileSync(path.join(tmp, f), objs.map((o) => YAML.stringify(o)).join("---\n"));
      fs.writeFileSync(path.join(tmp, "kustomization.yaml"), YAML.stringify(kust));
      const { errs } = await validateDir(tmp);
      const hit = errs.find((e) => e.includes(expect));
      if (hit) ok(`mutated copy rejected: ${name} (${hit})`);
      else bad(`mutated copy rejected: ${name}`, errs.length ? `other errors only: ${errs[0]}` : "accepted");
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

if (!dir) {
  console.error("usage: node k8s_validate.mjs DIR [--help-file FILE] [--dockerfile FILE] [--self-test]");
  process.exit(2);
}
const result = await validateDir(dir);
const objs = Object.entries(result.loaded.docs).flatMap(([f, os_]) => os_.map((o) => `${f}: ${o.kind}`));
if (objs.length === 0) bad(`manifests in ${dir}`, "none found");
const schemaErrs = result.errs.slice(0, result.schemaCount);
for (const o of objs) {
  const mine = schemaErrs.filter((e) => e.startsWith(o.split(":")[0] + " " + o.split(": ")[1] + "/"));
  if (mine.length) bad(`${o} matches the Kubernetes schema (strict)`, mine.join("; "));
  else ok(`${o} matches the Kubernetes schema (strict)`);
}
for (const e of schemaErrs.filter((e) => !objs.some((o) => e.startsWith(o.split(":")[0] + " " + o.split(": ")[1] + "/"))))
  bad("schema", e);
const contract = result.errs.slice(result.schemaCount);
if (contract.length) for (const e of contract) bad("contract", e);
else ok(`selectors, ports, probes, secrets, variables${helpText ? " (--help)" : ""}${dockerfile ? ", uid (Dockerfile)" : ""}, kustomization and placeholders agree`);
if (argv.includes("--self-test")) await selfTest(result.loaded);
console.log(`${npass} passed, ${nfail} failed`);
process.exit(nfail ? 1 : 0);
