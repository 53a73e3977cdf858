import { AppError, errorEnvelope, toAppError, type ErrorEnvelope } from "@cardctl/api";
import { TRPCError } from "@trpc/server";
import type { TRPC_ERROR_CODE_KEY } from "@trpc/server/rpc";
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";

export const BODY_LIMIT = 100 * 1024;

/** Answers with the error envelope; handed to the onSend hook too, which then need not parse it back. */
export function sendError(req: FastifyRequest, reply: FastifyReply, err: AppError) {
  req.errorEnvelope = errorEnvelope(req.id, err.code, err.message, err.details);
  return reply.code(err.status).type("application/json").send(req.errorEnvelope);
}

/** Fastify's failures that have a tRPC twin: the API error comes from the one mapping, toAppError. */
const TRPC_TWIN: Record<string, TRPC_ERROR_CODE_KEY> = {
  FST_ERR_CTP_BODY_TOO_LARGE: "PAYLOAD_TOO_LARGE",
  FST_ERR_CTP_INVALID_MEDIA_TYPE: "UNSUPPORTED_MEDIA_TYPE",
};

const internalError = () => toAppError(new TRPCError({ code: "INTERNAL_SERVER_ERROR" }));

/** Fastify's own failures (body parsing, limits, media types) as API errors. */
function fromFastify(err: FastifyError): AppError {
  if (err instanceof AppError) return err;
  const twin = TRPC_TWIN[err.code];
  if (twin) return toAppError(new TRPCError({ code: twin }));
  if (err.code === "FST_ERR_CTP_INVALID_CONTENT_LENGTH") return new AppError(400, "bad_request", "Content-Length does not match the body.");
  if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) return new AppError(err.statusCode, "bad_request", err.message);
  return internalError();
}

/**
 * Failures Fastify's router answers before any hook runs (malformed percent-encoding in the path,
 * an over-long path parameter): the same envelope and Request-Id instead of Fastify's own body.
 */
export function frameworkErrors(err: FastifyError, req: FastifyRequest, reply: FastifyReply) {
  reply.header("Request-Id", req.id);
  const appErr =
    err.code === "FST_ERR_BAD_URL"
      ? new AppError(400, "bad_request", "The URL is not valid: it has malformed percent-encoding.")
      : err.code === "FST_ERR_MAX_PARAM_LENGTH"
        ? new AppError(414, "uri_too_long", "A path segment of the URL is too long.")
        : fromFastify(err);
  return sendError(req, reply, appErr);
}

/**
 * One error envelope for every failure, whichever layer produced it: Fastify, the tRPC adapter,
 * the REST routes, or a procedure.
 */
export function registerErrorShaping(app: FastifyInstance) {
  // JSON is the only body type (anything else is refused by Fastify as 415); an empty body
  // (close, approve) is no body, and bad JSON is invalid_json.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("application/json", { parseAs: "string", bodyLimit: BODY_LIMIT }, (_req, body, done) => {
    const text = String(body);
    if (text.trim() === "") return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch {
      done(new AppError(400, "invalid_json", "The request body is not valid JSON."), undefined);
    }
  });

  // A bodyless POST needs no Content-Type, and an empty body has no media type to refuse (e.g.
  // `curl -d ''` sends application/x-www-form-urlencoded), which Fastify would answer with 415.
  app.addHook("onRequest", async (req) => {
    if (req.method === "POST" || req.method === "PUT") {
      const length = req.headers["content-length"];
      if ((length === undefined || length === "0") && !req.headers["transfer-encoding"]) req.headers["content-type"] = "application/json";
    }
  });

  app.setErrorHandler((err: FastifyError, req, reply) => {
    const appErr = fromFastify(err);
    if (appErr.status >= 500) req.log.error({ err }, "unhandled error");
    return sendError(req, reply, appErr);
  });

  app.addHook("onSend", async (req, reply, payload) => {
    if (reply.statusCode < 400 || typeof payload !== "string") return payload;
    return JSON.stringify(req.errorEnvelope ?? normalize(req, payload));
  });
}

/**
 * REST bodies are JSON objects. The REST routes spread the body into the input, so an array or
 * `null` would pass as "no fields" (PUT /v1/policies/default with `[]` answered 200). Runs after
 * authentication, for authenticated REST calls only (webhooks parse their own raw bodies).
 */
export function registerBodyShape(app: FastifyInstance) {
  app.addHook("preHandler", async (req, reply) => {
    if (req.body === undefined || (!req.principal && !req.isAdmin) || req.url.startsWith("/trpc/")) return;
    if (typeof req.body === "object" && req.body !== null && !Array.isArray(req.body)) return;
    return sendError(
      req,
      reply,
      new AppError(400, "validation_error", "Invalid request: the body must be a JSON object.", {
        issues: [{ path: "(body)", message: "Expected a JSON object" }],
      }),
    );
  });
}

/** 404 for unknown routes, rate limited like every other request. */
export function registerNotFound(app: FastifyInstance & { rateLimit?: () => any }) {
  app.setNotFoundHandler({ preHandler: app.rateLimit?.() }, (req, reply) =>
    sendError(req, reply, new AppError(404, "not_found", `No route ${req.method} ${req.url.split("?")[0]}.`)),
  );
}

/**
 * An error body sent without its envelope handed over (the tRPC adapter's, when it failed before
 * a context existed), under this request's id; anything unrecognisable is an internal error.
 */
function normalize(req: FastifyRequest, payload: string): ErrorEnvelope {
  let body: any;
  try {
    body = JSON.parse(payload);
  } catch {
    body = {};
  }
  if (body?.error && typeof body.error.code === "string" && typeof body.error.message === "string")
    return errorEnvelope(req.id, body.error.code, body.error.message, body.error.details);
  const app = internalError();
  return errorEnvelope(req.id, app.code, app.message, app.details);
}
