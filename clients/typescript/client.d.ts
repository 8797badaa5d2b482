// Types of client.mjs. paths, components and operations are generated from
// api/openapi.yaml by openapi-typescript (schema.d.ts: `npm run generate`).
import type { Client, ClientOptions as FetchClientOptions } from "openapi-fetch";
import type { components, operations, paths } from "./schema.js";

export type { components, operations, paths };
/** The document's schemas by name: Schemas["Model"], Schemas["PredictResponse"], ... */
export type Schemas = components["schemas"];
/** A client of every route of the document (JSON bodies). */
export type GpserveClient = Client<paths>;

export interface ClientOptions extends FetchClientOptions {
    /** The daemon, e.g. "http://127.0.0.1:8080" (openapi-fetch drops a trailing slash). */
    baseUrl: string;
    /** The daemon's API key (--api-key-file), sent as `Authorization: Bearer KEY`. */
    apiKey?: string;
}

/** openapi-fetch's client for the daemon at baseUrl, with its API key if given. */
export function createClient(options: ClientOptions): GpserveClient;

/** An error answer of the daemon. */
export class GpserveError extends Error {
    constructor(status: number, body: Schemas["Error"]);
    /** The HTTP status. */
    status: number;
    /** The catalogue's code, e.g. "not_found". */
    code: Schemas["Error"]["error"]["code"];
    /** The request field the error is about, when one is. */
    field: string | undefined;
}

export interface WaitOptions {
    /** Time between two polls (default 200 ms). */
    intervalMs?: number;
    /** Give up (throw) after this long (default 10 minutes). */
    timeoutMs?: number;
}

/**
 * Poll GET /v1/jobs/{id} until the job has ended (succeeded, failed or
 * cancelled) and return it; throws a GpserveError on an error answer.
 */
export function waitForJob(
    client: GpserveClient,
    id: string,
    options?: WaitOptions,
): Promise<Schemas["Job"]>;
