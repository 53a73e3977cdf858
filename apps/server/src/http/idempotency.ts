import { AppError, READ_ONLY_POSTS, SECRET_ANSWER_POSTS, sha256, type Principal, type Services } from "@cardctl/api";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { isApiPath, requestPath, routedPath } from "./paths.js";
import { sendError } from "./errors.js";

declare module "fastify" {
  interface FastifyRequest {
    /** The Idempotency-Key this request claimed; its response is stored on send. */
    idempotency?: { keyId: string; key: string; scope: string; retry: boolean; lease: number };
  }
}

/** JSON with every object's keys in order: the same request in another field order is the same request. */
const canonical = (value: unknown): string =>
  Array.isArray(value)
    ? `[${value.map(canonical).join(",")}]`
    : value !== null && typeof value === "object"
      ? `{${Object.keys(value)
          .sort()
          .map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`)
          .join(",")}}`
      : JSON.stringify(value ?? null);

/** The procedure a request runs, as routing decoded it (`/trpc/apiKeys%2Ecreate` is apiKeys.create, `/%761/policies/check` the dry run). */
const procedureOf = requestPath;
/** POSTs that only read (POST /v1/policies/check): the key is ignored, each call answers afresh and nothing is stored. */
const READ_ONLY = new Set<string>([...READ_ONLY_POSTS.rest, ...READ_ONLY_POSTS.trpc.map((p) => `/trpc/${p}`)]);
/** POSTs whose answer holds a key's secret, never stored: a key on them is refused. */
const SECRET_ANSWER = new Set<string>(SECRET_ANSWER_POSTS.trpc.map((p) => `/trpc/${p}`));

/** The request id a stored error envelope carries (`"request_id":"req_…"`). */
const STORED_REQUEST_ID = /"request_id":"(req_[A-Za-z0-9]+)"/;

/**
 * A stored answer as replayed: an error's envelope names this request's id, as every error's does
 * (its Request-Id header), and `Original-Request` names the request that made the answer.
 */
function replayed(req: FastifyRequest, reply: FastifyReply, body: string): string {
  const original = STORED_REQUEST_ID.exec(body)?.[1];
  if (!original) return body;
  reply.header("Original-Request", original);
  return body.replaceAll(`"request_id":"${original}"`, `"request_id":"${req.id}"`);
}

/** An empty JSON object is no body: a bodyless POST (close, approve) and one sending `{}` are the same request. */
const bodyOf = (req: FastifyRequest) => (req.body !== null && typeof req.body === "object" && !Array.isArray(req.body) && Object.keys(req.body).length === 0 ? undefined : req.body);
const requestHash = (req: FastifyRequest) => sha256(`${req.method} ${requestPath(req)}\n${canonical(bodyOf(req))}`);

/**
 * What happens to a claimed key after its answer. Bad input (400) ran nothing: the key is
 * forgotten, so the corrected request may use it. An answer that a retry must be able to redo
 * (still running elsewhere, 409; a server-side failure, 5xx) may have left work behind (a card in
 * CREATING): the key is kept, with the request it belongs to, and unlocked, so the retry takes
 * over under the same claim and finds that work. Anything else is the answer, stored.
 */
const afterAnswer = (status: number, payload: string): "forget" | "unlock" | "store" =>
  status === 400 ? "forget" : status >= 500 || (status === 409 && payload.includes('"idempotency_key_in_use"')) ? "unlock" : "store";

/**
 * Idempotency for every POST on both transports (DESIGN 3.4): after auth and rate limiting,
 * before the procedure. The first request with a key runs; a repeat gets its stored status and
 * body with `Idempotent-Replayed: true`. Read-only POSTs (dry runs) ignore the key.
 */
export function registerIdempotency(app: FastifyInstance, services: Services) {
  /** Claims the key, or answers: a replay, or a key of the wrong length. True when it answered. */
  const claim = async (req: FastifyRequest, reply: FastifyReply, principal: Principal, header: string | string[]): Promise<boolean> => {
    const key = Array.isArray(header) ? header[0]! : header;
    if (SECRET_ANSWER.has(procedureOf(req))) {
      const message = "is not accepted here: the answer holds the new key's secret, which is never stored (only its sha256 is)";
      sendError(req, reply, new AppError(400, "validation_error", `Idempotency-Key ${message}.`, { issues: [{ path: "Idempotency-Key", message }] }));
      return true;
    }
    if (key.length < 1 || key.length >= 200) {
      sendError(
        req,
        reply,
        new AppError(400, "validation_error", "Idempotency-Key must be 1 to 199 characters.", {
          issues: [{ path: "Idempotency-Key", message: "must be 1 to 199 characters" }],
        }),
      );
      return true;
    }
    // An API key has one mode; an owner's session works in both, and a key of one is not the other's.
    const keyId = principal.ownerId ? `${principal.keyId}:${principal.mode}` : principal.keyId;
    const outcome = await services.idempotency.begin(keyId, key, requestHash(req));
    if (outcome.kind === "replay") {
      reply.code(outcome.status).header("Idempotent-Replayed", "true").type("application/json").send(replayed(req, reply, outcome.body));
      return true;
    }
    req.idempotency = { keyId, key, scope: outcome.scope, retry: outcome.retry, lease: outcome.lease };
    return false;
  };
  // Callback hooks, not async ones: most requests pass straight through, without a promise each.
  app.addHook("preHandler", (req, reply, done) => {
    const header = req.headers["idempotency-key"];
    // An unknown route runs nothing: its 404 needs no key.
    if (req.method !== "POST" || header === undefined || !req.principal || req.is404 || !isApiPath(routedPath(req)) || READ_ONLY.has(procedureOf(req))) return done();
    claim(req, reply, req.principal, header).then((answered) => answered || done(), done);
  });

  /**
   * What the claimed key keeps after this answer (afterAnswer). A retry that took the key over is
   * not forgotten on its 400 (a query or header the request's hash leaves out): the request it
   * took over may have made something, which the next retry must still find.
   */
  const record = async ({ keyId, key, lease, retry }: NonNullable<FastifyRequest["idempotency"]>, status: number, payload: string): Promise<void> => {
    const next = afterAnswer(status, payload);
    if (next === "forget" && !retry) await services.idempotency.forget(keyId, key, lease);
    else if (next !== "store") await services.idempotency.unlock(keyId, key, lease);
    else await services.idempotency.complete(keyId, key, lease, status, payload);
  };
  app.addHook("onSend", (req, reply, payload, done) => {
    const claimed = req.idempotency;
    if (!claimed || typeof payload !== "string") return done(null, payload);
    req.idempotency = undefined;
    record(claimed, reply.statusCode, payload).then(() => done(null, payload), done);
  });
}
