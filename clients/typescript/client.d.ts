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

// ---- studies (types taken from the routes, so that they follow api/openapi.yaml) ----

type JsonOf<R> = R extends { content: { "application/json": infer T } } ? T : never;
type BodyOf<O> = O extends { requestBody?: infer B } ? JsonOf<NonNullable<B>> : never;
type OkOf<O> = O extends { responses: infer R }
    ? JsonOf<R[Extract<keyof R, 200 | 201>]>
    : never;

/** The body of POST /v1/studies: name, parameters, objective, constraints, acquisition, model, seed, ... */
export type StudyCreate = BodyOf<paths["/v1/studies"]["post"]>;
/** A study as GET /v1/studies/{name} answers it (config, trials' counts, best_trial, model). */
export type Study = OkOf<paths["/v1/studies/{name}"]["get"]>;
/** A trial: id, state, parameters (by name), metrics, client_id, seq, ... */
export type Trial = OkOf<paths["/v1/studies/{name}/trials/{trial}"]["get"]>;
/** A trial's metrics by name: the objective and each constraint. */
export type Metrics = Record<string, number>;

/** POST /v1/studies: create a study; its answer. */
export function createStudy(client: GpserveClient, body: StudyCreate): Promise<OkOf<paths["/v1/studies"]["post"]>>;
/** GET /v1/studies/{name}. */
export function getStudy(client: GpserveClient, name: string): Promise<Study>;
/** DELETE /v1/studies/{name}: the study, its trials and its models. */
export function deleteStudy(client: GpserveClient, name: string): Promise<void>;
/**
 * POST /v1/studies/{name}/suggestions: `count` trials to run (default 1); a
 * clientId that still has active trials gets them back.
 */
export function suggest(
    client: GpserveClient,
    name: string,
    options?: { count?: number; clientId?: string },
): Promise<Trial[]>;
/** GET /v1/studies/{name}/trials: every trial, by id. */
export function listTrials(client: GpserveClient, name: string): Promise<Trial[]>;
/** POST /v1/studies/{name}/trials/{trial}: complete an active trial with its metrics. */
export function completeTrial(client: GpserveClient, name: string, trial: number, metrics: Metrics): Promise<Trial>;
/** POST /v1/studies/{name}/trials/{trial} with {"infeasible": true}: the point could not be evaluated. */
export function reportInfeasible(client: GpserveClient, name: string, trial: number, reason?: string): Promise<Trial>;
/** POST /v1/studies/{name}/trials: a trial run elsewhere, completed at once. */
export function attachTrial(
    client: GpserveClient,
    name: string,
    parameters: Record<string, number | string>,
    metrics: Metrics,
): Promise<Trial>;
