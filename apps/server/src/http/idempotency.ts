import { AppError, sha256, type Services } from "@cardctl/api";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { isApiPath } from "./auth.js";
import { sendError } from "./errors.js";

declare module "fastify" {
  interface FastifyRequest {
    /** The Idempotency-Key this request claimed; its response is stored on send. */
    idempotency?: { keyId: string; key: string; scope: string };
  }
}

const requestHash = (req: FastifyRequest) =>
  sha256(`${req.method} ${req.url.split("?")[0]}\n${JSON.stringify(req.body ?? null)}`);

/** Outcomes a retry must be able to redo: bad input and server-side failures are not remembered. */
const forgettable = (status: number, payload: string) =>
  status === 400 || status >= 500 || (status === 409 && payload.includes('"idempotency_key_in_use"'));

/**
 * Idempotency for every POST on both transports (DESIGN 3.4): after auth and rate limiting,
 * before the procedure. The first request with a key runs; a repeat gets its stored status and
 * body with `Idempotent-Replayed: true`.
 */
export function registerIdempotency(app: FastifyInstance, services: Services) {
  app.addHook("preHandler", async (req, reply) => {
    const header = req.headers["idempotency-key"];
    if (req.method !== "POST" || header === undefined || !req.principal || !isApiPath(req.url)) return;
    const key = Array.isArray(header) ? header[0]! : header;
    if (key.length < 1 || key.length >= 200)
      return sendError(
        req,
        reply,
        new AppError(400, "validation_error", "Idempotency-Key must be 1 to 199 characters.", {
          issues: [{ path: "Idempotency-Key", message: "must be 1 to 199 characters" }],
        }),
      );
    const outcome = await services.idempotency.begin(req.principal.keyId, key, requestHash(req));
    if (outcome.kind === "replay")
      return reply.code(outcome.status).header("Idempotent-Replayed", "true").type("application/json").send(outcome.body);
    req.idempotency = { keyId: req.principal.keyId, key, scope: outcome.scope };
  });

  app.addHook("onSend", async (req, reply, payload) => {
    const claim = req.idempotency;
    if (!claim || typeof payload !== "string") return payload;
    req.idempotency = undefined;
    if (forgettable(reply.statusCode, payload)) await services.idempotency.release(claim.keyId, claim.key);
    else await services.idempotency.complete(claim.keyId, claim.key, reply.statusCode, payload);
    return payload;
  });
}
