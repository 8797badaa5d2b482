// The generated client against a live daemon: GPSERVE_URL (e.g.
// http://127.0.0.1:8080), with GPSERVE_API_KEY when that daemon has a key.
// GPSERVE_AUTH_URL and GPSERVE_AUTH_KEY: a daemon that needs that key, for the
// auth case (skipped without). Run by tests/integration/t_ts_client.sh:
//   GPSERVE_URL=http://127.0.0.1:8080 node --test test/
// Plain JavaScript, type-checked by `tsc --noEmit -p .` (checkJs) against the
// generated schema.d.ts: a change of api/openapi.yaml that breaks a use below
// fails the type check.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { test } from "node:test";

import {
    attachTrial,
    completeTrial,
    createClient,
    createStudy,
    deleteAlias,
    deleteStudy,
    getStudy,
    listTrials,
    reportInfeasible,
    suggest,
    deleteVersion,
    getAlias,
    GpserveError,
    listAliases,
    setAlias,
    waitForJob,
} from "gpserve-client";

/** @typedef {import("gpserve-client").Schemas} Schemas */

const BASE = process.env.GPSERVE_URL ?? "";
const KEY = process.env.GPSERVE_API_KEY || undefined;
if (!BASE) throw new Error("set GPSERVE_URL to the daemon's base URL, e.g. http://127.0.0.1:8080");
const client = createClient({ baseUrl: BASE, apiKey: KEY });

// Names of this run's models (several runs may share a daemon).
const PREFIX = `ts-${process.pid}`;
const SYNC = `${PREFIX}-sync`;
const ASYNC = `${PREFIX}-async`;
const CSV = `${PREFIX}-csv`;

// A GP with every hyperparameter fixed and no standardisation: the fit only
// factorises, so its predictions have the closed form computed below.
const LS = 0.8;
const S2 = 1.3;
const NOISE = 0.01;
const XT = [0, 0.4, 0.9, 1.5, 2.2, 2.8, 3.5, 4.1];
const YT = XT.map((x) => Math.sin(x));
const XS = [0.25, 1.8, 3.0, 5.5];

/** @type {Schemas["FitRequest"]} */
const FIT = {
    name: SYNC,
    method: "exact",
    kernel: { type: "rbf", ard: false, lengthscale: LS, variance: S2, fixed: true },
    noise: { variance: NOISE, fixed: true },
    standardize: false,
    X: XT.map((x) => [x]),
    y: YT,
};

// ---- the closed form, an implementation independent of the daemon's ----

/** @param {number} a @param {number} b */
const rbf = (a, b) => S2 * Math.exp((-0.5 * (a - b) ** 2) / (LS * LS));

/** Lower Cholesky factor of a small symmetric positive definite matrix. @param {number[][]} a */
function cholesky(a) {
    const n = a.length;
    const l = a.map(() => new Array(n).fill(0));
    for (let j = 0; j < n; j++) {
        let d = a[j][j];
        for (let k = 0; k < j; k++) d -= l[j][k] ** 2;
        l[j][j] = Math.sqrt(d);
        for (let i = j + 1; i < n; i++) {
            let s = a[i][j];
            for (let k = 0; k < j; k++) s -= l[i][k] * l[j][k];
            l[i][j] = s / l[j][j];
        }
    }
    return l;
}

/** Solve L v = b (forward). @param {number[][]} l @param {number[]} b */
function forward(l, b) {
    const v = [];
    for (let i = 0; i < b.length; i++) {
        let s = b[i];
        for (let k = 0; k < i; k++) s -= l[i][k] * v[k];
        v.push(s / l[i][i]);
    }
    return v;
}

/** @param {number[]} a @param {number[]} b */
const dot = (a, b) => a.reduce((s, v, i) => s + v * b[i], 0);

/** The exact GP posterior at xs: mean, latent variance and covariance, and the LML. @param {number[]} xs */
function posterior(xs) {
    const k = XT.map((a, i) => XT.map((b, j) => rbf(a, b) + (i === j ? NOISE : 0)));
    const l = cholesky(k);
    const w = forward(l, YT); // L^-1 y
    const v = xs.map((x) => forward(l, XT.map((t) => rbf(x, t)))); // L^-1 k*
    const mean = v.map((vi) => dot(vi, w));
    const cov = xs.map((a, i) => xs.map((b, j) => rbf(a, b) - dot(v[i], v[j])));
    const lml =
        -0.5 * dot(w, w) -
        l.reduce((s, row, i) => s + Math.log(row[i]), 0) -
        0.5 * XT.length * Math.log(2 * Math.PI);
    return { mean, latent: cov.map((row, i) => row[i]), cov, lml };
}

/** @param {number} got @param {number} want @param {string} what @param {number} [tol] */
function near(got, want, what, tol = 1e-9) {
    assert.ok(Math.abs(got - want) <= tol * (1 + Math.abs(want)), `${what}: ${got}, expected ${want}`);
}

/** Values of one output per point (a model of one output). @param {unknown} o @returns {number[]} */
function numbers(o) {
    assert.ok(Array.isArray(o) && o.every((v) => typeof v === "number"), `not a list of numbers: ${JSON.stringify(o)}`);
    return /** @type {number[]} */ (o);
}

/** The same request with curl, parsed by JSON.parse: what the client returned must equal it. @param {string} path @param {unknown} body */
function curlJson(path, body) {
    const args = ["-sS", "--max-time", "60", "-H", "Content-Type: application/json"];
    if (KEY) args.push("-H", `Authorization: Bearer ${KEY}`);
    args.push("--data-binary", JSON.stringify(body), `${BASE}${path}`);
    return JSON.parse(execFileSync("curl", args, { encoding: "utf8" }));
}

// ---- fit ----

test("fit, synchronous: 201, the fixed hyperparameters, the closed-form LML", async () => {
    const { data, error, response } = await client.POST("/v1/models", { body: FIT });
    assert.equal(error, undefined, JSON.stringify(error));
    assert.equal(response.status, 201);
    assert.ok(data && !("job" in data), "a synchronous fit answers the model");
    assert.equal(response.headers.get("Location"), `/v1/models/${SYNC}/versions/${data.version}`);
    assert.equal(data.name, SYNC);
    assert.equal(data.method, "exact");
    assert.equal(data.n_train, XT.length);
    assert.equal(data.input_dim, 1);
    assert.equal(data.kernel.lengthscale, LS);
    assert.equal(data.noise_variance, NOISE);
    assert.equal(data.diagnostics.jitter, 0);
    assert.equal(data.diagnostics.objective_name, "log_marginal_likelihood");
    near(data.diagnostics.objective ?? NaN, posterior([]).lml, "log marginal likelihood");
});

test("fit, asynchronous: 202 and a job polled until it succeeds", async () => {
    const { data, error, response } = await client.POST("/v1/models", {
        body: { ...FIT, name: ASYNC, async: true, options: { max_iterations: 50 } },
    });
    assert.equal(error, undefined, JSON.stringify(error));
    assert.equal(response.status, 202);
    assert.ok(data && "job" in data, "a 202 names its job");
    assert.equal(data.status, "queued");
    assert.equal(response.headers.get("Location"), `/v1/jobs/${data.job}`);
    const job = await waitForJob(client, data.job, { intervalMs: 100, timeoutMs: 120_000 });
    assert.equal(job.status, "succeeded", JSON.stringify(job.error));
    assert.equal(job.id, data.job);
    assert.equal(job.name, ASYNC);
    assert.equal(job.model?.name, ASYNC);
    assert.equal(job.model?.n_train, XT.length);
    // An ended job cannot be cancelled: a typed 409.
    const cancel = await client.DELETE("/v1/jobs/{id}", { params: { path: { id: data.job } } });
    assert.equal(cancel.response.status, 409);
    assert.equal(cancel.error?.error.code, "conflict");
    // The async model predicts exactly what the synchronous one does.
    const a = await client.POST("/v1/models/{name}/predict", {
        params: { path: { name: ASYNC } },
        body: { X: XS.map((x) => [x]) },
    });
    const s = await client.POST("/v1/models/{name}/predict", {
        params: { path: { name: SYNC } },
        body: { X: XS.map((x) => [x]) },
    });
    assert.ok(a.data && s.data);
    assert.deepEqual(a.data.mean, s.data.mean);
    assert.deepEqual(a.data.variance, s.data.variance);
});

test("fit from CSV: text/csv with the other fields in the query, the same model", async () => {
    const csv = ["x,y", ...XT.map((x, i) => `${x},${YT[i]}`)].join("\n") + "\n";
    const { data, error, response } = await client.POST("/v1/models", {
        params: {
            query: {
                name: CSV,
                method: "exact",
                kernel: JSON.stringify(FIT.kernel),
                noise_variance: NOISE,
                noise_fixed: true,
                standardize: false,
            },
        },
        body: csv,
        headers: { "Content-Type": "text/csv" },
        bodySerializer: (b) => b,
    });
    assert.equal(error, undefined, JSON.stringify(error));
    assert.equal(response.status, 201);
    assert.ok(data && !("job" in data));
    assert.equal(data.n_train, XT.length);
    const body = { X: XS.map((x) => [x]) };
    const c = await client.POST("/v1/models/{name}/predict", { params: { path: { name: CSV } }, body });
    const s = await client.POST("/v1/models/{name}/predict", { params: { path: { name: SYNC } }, body });
    assert.ok(c.data && s.data);
    assert.deepEqual(c.data.mean, s.data.mean);
    assert.deepEqual(c.data.variance, s.data.variance);
});

// ---- predict ----

test("predict: the closed-form posterior, quantiles and covariance", async () => {
    const { data, error } = await client.POST("/v1/models/{name}/predict", {
        params: { path: { name: SYNC } },
        body: { X: XS.map((x) => [x]), quantiles: [0.5, 0.9] },
    });
    assert.equal(error, undefined, JSON.stringify(error));
    const want = posterior(XS);
    const mean = numbers(data.mean);
    const variance = numbers(data.variance);
    const q50 = numbers(data.quantiles?.["0.5"]);
    const q90 = numbers(data.quantiles?.["0.9"]);
    XS.forEach((x, i) => {
        near(mean[i], want.mean[i], `mean at ${x}`);
        near(variance[i], want.latent[i] + NOISE, `observation variance at ${x}`);
        near(q50[i], mean[i], `median at ${x}`, 1e-12);
        near(q90[i], mean[i] + 1.2815515655446004 * Math.sqrt(variance[i]), `0.9 quantile at ${x}`, 1e-12);
    });
    // The latent covariance: its diagonal is the latent variance.
    const latent = await client.POST("/v1/models/{name}/predict", {
        params: { path: { name: SYNC } },
        body: { X: XS.map((x) => [x]), include_noise: false, full_covariance: true },
    });
    assert.ok(latent.data?.covariance, JSON.stringify(latent.error));
    const cov = latent.data.covariance.map(numbers);
    XS.forEach((_, i) =>
        XS.forEach((__, j) => near(cov[i][j], want.cov[i][j], `covariance [${i}][${j}]`)),
    );
});

test("predict: the same numbers as curl gets from the same daemon", async () => {
    const body = { X: XS.map((x) => [x]), quantiles: [0.05, 0.95], full_covariance: true };
    const { data } = await client.POST("/v1/models/{name}/predict", {
        params: { path: { name: SYNC } },
        body,
    });
    assert.deepEqual(data, curlJson(`/v1/models/${SYNC}/predict`, body));
});

// ---- the Open Inference Protocol V2 through the same generated client ----

test("v2 infer: the numbers of v1 predict, bit for bit; v2 errors in the protocol's shape", async () => {
    const meta = await client.GET("/v2/models/{name}", { params: { path: { name: SYNC } } });
    assert.equal(meta.response.status, 200, JSON.stringify(meta.error));
    assert.deepEqual(meta.data?.inputs, [{ name: "X", datatype: "FP64", shape: [-1, 1] }]);
    const infer = await client.POST("/v2/models/{name}/infer", {
        params: { path: { name: SYNC } },
        body: { id: "ts-1", inputs: [{ name: "X", datatype: "FP64", shape: [XS.length, 1], data: XS }] },
    });
    assert.equal(infer.response.status, 200, JSON.stringify(infer.error));
    assert.equal(infer.data?.id, "ts-1");
    const v1 = await client.POST("/v1/models/{name}/predict", {
        params: { path: { name: SYNC } },
        body: { X: XS.map((x) => [x]) },
    });
    const byName = Object.fromEntries((infer.data?.outputs ?? []).map((o) => [o.name, o]));
    assert.deepEqual(byName.mean.shape, [XS.length]);
    assert.deepEqual(byName.mean.data, v1.data?.mean);
    assert.deepEqual(byName.variance.data, v1.data?.variance);
    const bad = await client.POST("/v2/models/{name}/infer", {
        params: { path: { name: SYNC } },
        body: { inputs: [{ name: "X", datatype: "FP64", shape: [2, 1], data: [0.5] }] },
    });
    assert.equal(bad.response.status, 400);
    assert.equal(typeof bad.error?.error, "string");
    assert.match(bad.error?.error ?? "", /inputs\[0\]/);
});

// ---- sample ----

test("sample: shape, the same draws for the same seed, their mean", async () => {
    const n = 2000;
    /** @param {number} seed */
    const draw = async (seed) => {
        const { data, error } = await client.POST("/v1/models/{name}/sample", {
            params: { path: { name: SYNC } },
            body: { X: XS.map((x) => [x]), n_samples: n, seed },
        });
        assert.equal(error, undefined, JSON.stringify(error));
        return data.samples.map(numbers);
    };
    const a = await draw(7);
    assert.equal(a.length, n);
    a.forEach((s) => assert.equal(s.length, XS.length));
    assert.deepEqual(await draw(7), a);
    assert.notDeepEqual(await draw(8), a);
    // Draws of the latent f: their mean is the posterior mean within 5 standard errors.
    const want = posterior(XS);
    XS.forEach((x, i) => {
        const m = a.reduce((s, row) => s + row[i], 0) / n;
        const se = Math.sqrt(want.latent[i] / n);
        assert.ok(Math.abs(m - want.mean[i]) < 5 * se, `sample mean at ${x}: ${m}, posterior ${want.mean[i]} (se ${se})`);
    });
});

// ---- errors come back typed ----

test("errors: 404 for an unknown model, with the catalogue's code", async () => {
    const { data, error, response } = await client.GET("/v1/models/{name}", {
        params: { path: { name: `${PREFIX}-nope` } },
    });
    assert.equal(data, undefined);
    assert.equal(response.status, 404);
    assert.equal(error?.error.code, "not_found");
    assert.match(error?.error.message ?? "", /nope/);
});

test("errors: 400 for a bad body, naming the field", async () => {
    /** @type {Schemas["PredictRequest"]} */
    const bogus = {
        X: [[0.5]],
        // @ts-expect-error the schema has no field "bogus": the type check refuses it too
        bogus: 1,
    };
    const unknown = await client.POST("/v1/models/{name}/predict", {
        params: { path: { name: SYNC } },
        body: bogus,
    });
    assert.equal(unknown.response.status, 400);
    assert.equal(unknown.error?.error.code, "invalid_argument");
    assert.equal(unknown.error?.error.field, "bogus");
    const notJson = await client.POST("/v1/models/{name}/predict", {
        params: { path: { name: SYNC } },
        body: { X: [[0.5]] },
        bodySerializer: () => '{"X": [[0.5]',
    });
    assert.equal(notJson.response.status, 400);
    assert.equal(notJson.error?.error.code, "malformed_json");
    const badName = await client.GET("/v1/models/{name}", { params: { path: { name: "no spaces" } } });
    assert.equal(badName.response.status, 400);
    assert.equal(badName.error?.error.field, "name");
});

test("errors: 422 for points of the wrong width", async () => {
    const { error, response } = await client.POST("/v1/models/{name}/predict", {
        params: { path: { name: SYNC } },
        body: { X: [[0.5, 1]] },
    });
    assert.equal(response.status, 422);
    assert.equal(error?.error.code, "invalid_data");
    assert.equal(error?.error.field, "X[0]");
});

test("errors: waitForJob throws a GpserveError for an unknown job", async () => {
    await assert.rejects(waitForJob(client, "0123456789abcdef"), (e) => {
        assert.ok(e instanceof GpserveError);
        assert.equal(e.status, 404);
        assert.equal(e.code, "not_found");
        return true;
    });
});

// ---- the API key ----

const AUTH = process.env.GPSERVE_AUTH_URL ?? "";
const AUTH_KEY = process.env.GPSERVE_AUTH_KEY ?? "";
const noAuth = !(AUTH && AUTH_KEY) && "no GPSERVE_AUTH_URL and GPSERVE_AUTH_KEY";
test("auth: without the key 401, with it 200; /healthz open", { skip: noAuth }, async () => {
    const base = AUTH;
    const anonymous = createClient({ baseUrl: base });
    const denied = await anonymous.GET("/v1/models");
    assert.equal(denied.response.status, 401);
    assert.equal(denied.error?.error.code, "unauthorized");
    assert.equal(denied.response.headers.get("WWW-Authenticate"), 'Bearer realm="gpserve"');
    const wrong = await createClient({ baseUrl: base, apiKey: `${AUTH_KEY}-wrong` }).GET("/v1/models");
    assert.equal(wrong.response.status, 401);
    const open = await anonymous.GET("/healthz");
    assert.equal(open.data?.status, "ok");
    const allowed = await createClient({ baseUrl: `${base}/`, apiKey: AUTH_KEY }).GET("/v1/models");
    assert.equal(allowed.response.status, 200);
    assert.ok(Array.isArray(allowed.data?.models));
});

// ---- aliases ----

test("aliases: set, get, list, an alias as version of predict, sample and observe, delete", async () => {
    const name = `${PREFIX}-alias`;
    const fit = async () => {
        const { data, error } = await client.POST("/v1/models", { body: { ...FIT, name } });
        assert.ok(data && "version" in data, JSON.stringify(error));
        return data.version;
    };
    const v1 = await fit();
    const v2 = await fit();
    const set = await setAlias(client, name, "champion", v1);
    assert.equal(set.alias, "champion");
    assert.equal(set.version, v1);
    assert.equal((await getAlias(client, name, "champion")).version, v1);
    await setAlias(client, name, "challenger", "champion"); // another alias's version
    assert.deepEqual(
        (await listAliases(client, name)).map((a) => [a.alias, a.version]),
        [["challenger", v1], ["champion", v1]],
    );
    const X = XS.map((x) => [x]);
    const byAlias = await client.POST("/v1/models/{name}/predict", {
        params: { path: { name } },
        body: { X, version: "champion" },
    });
    const byNumber = await client.POST("/v1/models/{name}/predict", {
        params: { path: { name } },
        body: { X, version: v1 },
    });
    assert.equal(byAlias.data?.version, v1);
    assert.equal(byAlias.data?.alias, "champion");
    assert.deepEqual(byAlias.data?.mean, byNumber.data?.mean);
    const sample = await client.POST("/v1/models/{name}/sample", {
        params: { path: { name } },
        body: { X, version: "champion", n_samples: 2, seed: 3 },
    });
    assert.equal(sample.data?.version, v1, JSON.stringify(sample.error));
    const observe = await client.POST("/v1/models/{name}/observe", {
        params: { path: { name } },
        body: { X: [[6.0]], y: [0.1], version: "champion" },
    });
    assert.ok(observe.response.status === 200 || observe.response.status === 422, JSON.stringify(observe.error));
    // the version an alias points to cannot be deleted: 409 naming the alias
    await assert.rejects(deleteVersion(client, name, v1), (e) => {
        assert.ok(e instanceof GpserveError);
        assert.equal(e.status, 409);
        assert.equal(e.field, "alias");
        assert.match(e.message, /champion/);
        return true;
    });
    await deleteAlias(client, name, "challenger");
    await assert.rejects(getAlias(client, name, "challenger"), (e) => e instanceof GpserveError && e.status === 404);
    await setAlias(client, name, "champion", v2);
    await deleteVersion(client, name, v1);
    const gone = await client.GET("/v1/models/{name}/versions/{version}", {
        params: { path: { name, version: v1 } },
    });
    assert.equal(gone.response.status, 404);
    await client.DELETE("/v1/models/{name}", { params: { path: { name } } });
});

// ---- delete ----

test("delete: 204, then the models are gone", async () => {
    for (const name of [SYNC, ASYNC, CSV]) {
        const del = await client.DELETE("/v1/models/{name}", { params: { path: { name } } });
        assert.equal(del.response.status, 204, JSON.stringify(del.error));
        const get = await client.GET("/v1/models/{name}", { params: { path: { name } } });
        assert.equal(get.response.status, 404);
    }
});

// ---- studies ----

test("studies: create, suggest, complete, infeasible, best trial, attach, delete", async () => {
    const name = `${PREFIX}-study`;
    const created = await createStudy(client, {
        name,
        parameters: [
            { name: "x", type: "double", bounds: [0, 1] },
            { name: "k", type: "integer", bounds: [1, 4] },
        ],
        objective: { name: "y", goal: "minimize" },
        initial_design: 3,
        seed: 5,
    });
    assert.equal(created.name, name);
    const bowl = (/** @type {Record<string, unknown>} */ p) => (Number(p.x) - 0.3) ** 2 + Number(p.k);
    // a client id that asks again gets its active trial back
    const [first] = await suggest(client, name, { clientId: "ts-worker" });
    const [again] = await suggest(client, name, { clientId: "ts-worker" });
    assert.equal(again.id, first.id);
    assert.equal(first.state, "active");
    const done = await completeTrial(client, name, first.id, { y: bowl(first.parameters ?? {}) });
    assert.equal(done.state, "completed");
    // four at once: distinct ids and points
    const four = await suggest(client, name, { count: 4 });
    assert.equal(new Set(four.map((t) => t.id)).size, 4);
    assert.equal(new Set(four.map((t) => JSON.stringify(t.parameters))).size, 4);
    for (const t of four.slice(1)) await completeTrial(client, name, t.id, { y: bowl(t.parameters ?? {}) });
    const failed = await reportInfeasible(client, name, four[0].id, "the rig broke");
    assert.equal(failed.state, "infeasible");
    assert.equal(failed.reason, "the rig broke");
    const attached = await attachTrial(client, name, { x: 0.3, k: 1 }, { y: 1 });
    assert.equal(attached.state, "completed");
    const study = await getStudy(client, name);
    assert.equal(study.best_trial?.id, attached.id);
    const trials = await listTrials(client, name);
    assert.deepEqual(
        trials.map((t) => t.id),
        [1, 2, 3, 4, 5, 6],
    );
    assert.deepEqual(study.best_trial, trials[5]);
    // errors: a trial that is not active 409, an unknown trial 404, an unknown metric 422
    await assert.rejects(completeTrial(client, name, first.id, { y: 1 }), (e) => {
        assert.ok(e instanceof GpserveError);
        assert.equal(e.status, 409);
        assert.equal(e.field, "trial");
        return true;
    });
    await assert.rejects(completeTrial(client, name, 999, { y: 1 }), (e) => e instanceof GpserveError && e.status === 404);
    const [open] = await suggest(client, name);
    await assert.rejects(completeTrial(client, name, open.id, { y: 1, bogus: 2 }), (e) => {
        assert.ok(e instanceof GpserveError);
        assert.equal(e.status, 422);
        assert.match(e.field ?? "", /bogus/);
        return true;
    });
    const bad = await client.POST("/v1/studies", {
        body: { name: `${name}-bad`, parameters: [{ name: "x", type: "double", bounds: [1, 0] }], objective: { name: "y", goal: "minimize" } },
    });
    assert.equal(bad.response.status, 400);
    assert.equal(bad.error?.error.field, "parameters[0].bounds");
    await deleteStudy(client, name);
    await assert.rejects(getStudy(client, name), (e) => e instanceof GpserveError && e.status === 404);
});
