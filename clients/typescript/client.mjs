// The gpserve client: openapi-fetch's createClient over the types that
// openapi-typescript generated from api/openapi.yaml (schema.d.ts). This file
// adds what the document cannot say: the daemon's base URL, its optional API
// key, and the polling of an async fit's job. Its types are in client.d.ts.
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
