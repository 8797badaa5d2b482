// Fit a GP to six points of sin(x), predict with uncertainty, draw samples.
//   GPSERVE_URL=http://127.0.0.1:8080 node example.mjs
import { createClient, waitForJob } from "gpserve-client";

const gp = createClient({
    baseUrl: process.env.GPSERVE_URL ?? "http://127.0.0.1:8080",
    apiKey: process.env.GPSERVE_API_KEY, // only for a daemon with --api-key-file
});
const name = "example-sine";
const X = [[0], [1], [2], [3], [4], [5]];
const y = X.map(([x]) => Math.sin(x));

// An async fit answers 202 with a job; waitForJob polls it until it ends.
const fit = await gp.POST("/v1/models", {
    body: { name, method: "exact", kernel: { type: "rbf" }, X, y, async: true },
});
if (fit.error) throw new Error(`${fit.response.status} ${fit.error.error.message}`);
if (!("job" in fit.data)) throw new Error("a synchronous answer to an async fit");
const job = await waitForJob(gp, fit.data.job);
console.log("fit:", job.status, "version", job.model?.version);

// Errors come back typed: error.error.code is the catalogue's code.
const points = { X: [[0.5], [2.5], [6]] };
const pred = await gp.POST("/v1/models/{name}/predict", {
    params: { path: { name } },
    body: { ...points, quantiles: [0.05, 0.95] },
});
if (pred.error) throw new Error(`${pred.error.error.code}: ${pred.error.error.message}`);
console.log("mean:", pred.data.mean, "variance:", pred.data.variance);
console.log("90% interval:", pred.data.quantiles?.["0.05"], pred.data.quantiles?.["0.95"]);

const draws = await gp.POST("/v1/models/{name}/sample", {
    params: { path: { name } },
    body: { ...points, n_samples: 3, seed: 1 },
});
if (draws.error) throw new Error(`${draws.error.error.code}: ${draws.error.error.message}`);
console.log("samples:", draws.data.samples);

await gp.DELETE("/v1/models/{name}", { params: { path: { name } } });
