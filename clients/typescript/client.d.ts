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

/** A version number (from 1) or an alias of one (predict, sample, observe, setAlias). */
export type VersionRef = Schemas["VersionRef"];

/** PUT /v1/models/{name}/aliases/{alias}: point alias at version (a number or another alias). */
export function setAlias(
    client: GpserveClient,
    name: string,
    alias: string,
    version: VersionRef,
): Promise<Schemas["Alias"]>;
/** GET /v1/models/{name}/aliases/{alias}. */
export function getAlias(client: GpserveClient, name: string, alias: string): Promise<Schemas["Alias"]>;
/** GET /v1/models/{name}/aliases: every alias of the model, by name. */
export function listAliases(client: GpserveClient, name: string): Promise<Schemas["Alias"][]>;
/** DELETE /v1/models/{name}/aliases/{alias}. */
export function deleteAlias(client: GpserveClient, name: string, alias: string): Promise<void>;
/** DELETE /v1/models/{name}/versions/{version}: by number (409 while an alias points at it). */
export function deleteVersion(client: GpserveClient, name: string, version: number): Promise<void>;
