// The gpserve client: openapi-fetch's createClient over the types that
// openapi-typescript generated from api/openapi.yaml (schema.d.ts). This file
// adds what the document cannot say: the daemon's base URL, its optional API
// key, the polling of an async fit's job, and one-call helpers for aliases, studies and
// a version's delete (each returns the answer or throws a GpserveError). Its
// types are in client.d.ts.
import createFetchClient, { mergeHeaders } from "openapi-fetch";

const ENDED = new Set(["succeeded", "failed", "cancelled"]);

/** An error answer of the daemon: its status and the catalogue's code, message and field. */
export class GpserveError extends Error {
    /**
     * @param {number} status
     * @param {import("./client.js").Schemas["Error"]} body
     */
    constructor(status, body) {
        super(`${status} ${body.error.code}: ${body.error.message}`);
        this.name = "GpserveError";
        this.status = status;
        this.code = body.error.code;
        this.field = body.error.field;
    }
}

/** @type {typeof import("./client.js").createClient} */
export const createClient = ({ baseUrl, apiKey, headers, ...rest }) =>
    createFetchClient({
        ...rest,
        baseUrl,
        // The key as a bearer token; a caller's own Authorization header wins.
        headers: mergeHeaders(apiKey ? { Authorization: `Bearer ${apiKey}` } : undefined, headers),
    });

/** @type {typeof import("./client.js").waitForJob} */
export const waitForJob = async (client, id, { intervalMs = 200, timeoutMs = 600_000 } = {}) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
        const { data, error, response } = await client.GET("/v1/jobs/{id}", {
            params: { path: { id } },
        });
        if (error) throw new GpserveError(response.status, error);
        if (ENDED.has(data.status)) return data;
        if (Date.now() >= deadline)
            throw new Error(`job ${id} is still ${data.status} after ${timeoutMs} ms`);
        await new Promise((resolve) => setTimeout(resolve, intervalMs));
    }
};

/**
 * The answer's data, or a GpserveError for an error answer.
 * @template T
 * @param {{ data?: T, error?: import("./client.js").Schemas["Error"], response: Response }} answer
 * @returns {T}
 */
const dataOr = ({ data, error, response }) => {
    if (error) throw new GpserveError(response.status, error);
    return /** @type {T} */ (data);
};

/** @type {typeof import("./client.js").setAlias} */
export const setAlias = async (client, name, alias, version) =>
    dataOr(
        await client.PUT("/v1/models/{name}/aliases/{alias}", {
            params: { path: { name, alias } },
            body: { version },
        }),
    );

/** @type {typeof import("./client.js").getAlias} */
export const getAlias = async (client, name, alias) =>
    dataOr(await client.GET("/v1/models/{name}/aliases/{alias}", { params: { path: { name, alias } } }));

/** @type {typeof import("./client.js").listAliases} */
export const listAliases = async (client, name) =>
    dataOr(await client.GET("/v1/models/{name}/aliases", { params: { path: { name } } })).aliases;

/** @type {typeof import("./client.js").deleteAlias} */
export const deleteAlias = async (client, name, alias) => {
    dataOr(await client.DELETE("/v1/models/{name}/aliases/{alias}", { params: { path: { name, alias } } }));
};

/** @type {typeof import("./client.js").deleteVersion} */
export const deleteVersion = async (client, name, version) => {
    dataOr(
        await client.DELETE("/v1/models/{name}/versions/{version}", {
            params: { path: { name, version } },
        }),
    );
};

// ---- studies: the daemon suggests the next experiment (docs/design/api.md, "Studies") ----

/** @type {typeof import("./client.js").createStudy} */
export const createStudy = async (client, body) => dataOr(await client.POST("/v1/studies", { body }));

/** @type {typeof import("./client.js").getStudy} */
export const getStudy = async (client, name) =>
    dataOr(await client.GET("/v1/studies/{name}", { params: { path: { name } } }));

/** @type {typeof import("./client.js").deleteStudy} */
export const deleteStudy = async (client, name) => {
    dataOr(await client.DELETE("/v1/studies/{name}", { params: { path: { name } } }));
};

/** @type {typeof import("./client.js").suggest} */
export const suggest = async (client, name, { count = 1, clientId } = {}) =>
    dataOr(
        await client.POST("/v1/studies/{name}/suggestions", {
            params: { path: { name } },
            body: clientId === undefined ? { count } : { count, client_id: clientId },
        }),
    ).trials;

/** @type {typeof import("./client.js").listTrials} */
export const listTrials = async (client, name) =>
    dataOr(await client.GET("/v1/studies/{name}/trials", { params: { path: { name } } })).trials;

/** @type {typeof import("./client.js").completeTrial} */
export const completeTrial = async (client, name, trial, metrics) =>
    dataOr(
        await client.POST("/v1/studies/{name}/trials/{trial}", {
            params: { path: { name, trial } },
            body: { metrics },
        }),
    );

/** @type {typeof import("./client.js").reportInfeasible} */
export const reportInfeasible = async (client, name, trial, reason) =>
    dataOr(
        await client.POST("/v1/studies/{name}/trials/{trial}", {
            params: { path: { name, trial } },
            body: reason === undefined ? { infeasible: true } : { infeasible: true, reason },
        }),
    );

/** @type {typeof import("./client.js").attachTrial} */
export const attachTrial = async (client, name, parameters, metrics) =>
    dataOr(
        await client.POST("/v1/studies/{name}/trials", {
            params: { path: { name } },
            body: { parameters, metrics },
        }),
    );
