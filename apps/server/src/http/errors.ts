import { AppError, errorEnvelope, newId, toAppError, type ErrorEnvelope } from "@cardctl/api";
import { STATUS_CODES } from "node:http";
import type { Socket } from "node:net";
import { TRPCError } from "@trpc/server";
import type { TRPC_ERROR_CODE_KEY } from "@trpc/server/rpc";
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { routedPath } from "./paths.js";
import { rateLimitUnrouted } from "./rate-limit.js";

export const BODY_LIMIT = 100 * 1024;

/**
 * Deepest nesting of a JSON body. Ours nest 3 levels; `[` × 20,000 fits in 100 kB and overflowed
 * the stack in everything recursive after the parser (hashing, validation, re-serialising).
 */
export const MAX_JSON_DEPTH = 32;

/** True when `text` (JSON or not) opens more than `max` arrays/objects at once; strings are skipped. */
export function nestsDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92 /* \\ */) i++;
      else if (c === 34 /* " */) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 91 /* [ */ || c === 123 /* { */) {
      if (++depth > max) return true;
    } else if (c === 93 /* ] */ || c === 125 /* } */) depth--;
  }
  return false;
}

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
 * an over-long path parameter): the same envelope, Request-Id and rate limit (per client IP, the
 * key unread) instead of Fastify's own body.
 */
export async function frameworkErrors(err: FastifyError, req: FastifyRequest, reply: FastifyReply) {
  reply.header("Request-Id", req.id);
  let appErr =
    err.code === "FST_ERR_BAD_URL"
      ? new AppError(400, "bad_request", "The URL is not valid: it has malformed percent-encoding.")
      : err.code === "FST_ERR_MAX_PARAM_LENGTH"
        ? new AppError(414, "uri_too_long", "A path segment of the URL is too long.")
        : fromFastify(err);
  await rateLimitUnrouted(req, reply).catch((limited: unknown) => {
    appErr = limited instanceof AppError ? limited : internalError();
  });
  return sendError(req, reply, appErr);
}

/** Connection-level failures Node answers before Fastify sees a request. */
const CLIENT_ERRORS: Record<string, [number, string, string]> = {
  HPE_HEADER_OVERFLOW: [431, "headers_too_large", "The request headers are too large."],
  ERR_HTTP_REQUEST_TIMEOUT: [408, "request_timeout", "The request was not received in time; send the whole request promptly."],
};

/**
 * Fastify's clientErrorHandler: requests Node's parser refuses (headers too large, a request not
 * received within the request timeout, malformed HTTP) get the error envelope and a Request-Id
 * like every other error, written on the socket, which is then closed.
 */
export function clientErrorHandler(err: NodeJS.ErrnoException, socket: Socket) {
  if (err.code === "ECONNRESET" || socket.destroyed) return;
  const [status, code, message] = CLIENT_ERRORS[err.code ?? ""] ?? [400, "bad_request", "The request is not valid HTTP."];
  const requestId = newId("req");
  const body = JSON.stringify(errorEnvelope(requestId, code, message));
  if (socket.writable)
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${body}`,
    );
  socket.destroy();
}

/**
 * One error envelope for every failure, whichever layer produced it: Fastify, the tRPC and REST
 * routes, or a procedure.
 */
export function registerErrorShaping(app: FastifyInstance) {
  // JSON is the only body type (anything else is refused by Fastify as 415); an empty body
  // (close, approve) is no body, and bad JSON is invalid_json.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("application/json", { parseAs: "string", bodyLimit: BODY_LIMIT }, (_req, body, done) => {
    const text = String(body);
    if (text.trim() === "") return done(null, undefined);
    if (nestsDeeperThan(text, MAX_JSON_DEPTH))
      return done(new AppError(400, "invalid_json", `The request body nests deeper than ${MAX_JSON_DEPTH} levels.`), undefined);
    try {
      done(null, JSON.parse(text));
    } catch {
      done(new AppError(400, "invalid_json", "The request body is not valid JSON."), undefined);
    }
  });

  // A bodyless POST needs no Content-Type, and an empty body has no media type to refuse (e.g.
  // `curl -d ''` sends application/x-www-form-urlencoded), which Fastify would answer with 415.
  app.addHook("onRequest", (req, _reply, done) => {
    if (req.method === "POST" || req.method === "PUT") {
      const length = req.headers["content-length"];
      if ((length === undefined || length === "0") && !req.headers["transfer-encoding"]) req.headers["content-type"] = "application/json";
    }
    done();
  });

  app.setErrorHandler((err: FastifyError, req, reply) => {
    const appErr = fromFastify(err);
    if (appErr.status >= 500) req.log.error({ err }, "unhandled error");
    return sendError(req, reply, appErr);
  });

  app.addHook("onSend", (req, reply, payload, done) => {
    // A replayed stored error is sent as stored (its request_id made this request's: idempotency.ts).
    if (reply.statusCode < 400 || typeof payload !== "string" || reply.hasHeader("idempotent-replayed") || req.processorErrorShape) return done(null, payload);
    done(null, JSON.stringify(req.errorEnvelope ?? normalize(req, payload)));
  });
}

/**
 * REST bodies are JSON objects. The REST routes spread the body into the input, so an array or
 * `null` would pass as "no fields" (PUT /v1/policies/default with `[]` answered 200). Runs after
 * authentication, for authenticated REST calls only (webhooks parse their own raw bodies).
 */
export function registerBodyShape(app: FastifyInstance) {
  app.addHook("preHandler", (req, reply, done) => {
    if (req.body === undefined || (!req.principal && !req.isAdmin) || routedPath(req).startsWith("/trpc/")) return done();
    if (typeof req.body === "object" && req.body !== null && !Array.isArray(req.body)) return done();
    sendError(
      req,
      reply,
      new AppError(400, "validation_error", "Invalid request: the request body must be a JSON object.", {
        issues: [{ path: "(body)", message: "the request body must be a JSON object" }],
      }),
    );
  });
}

/**
 * 404 for unknown routes, rate limited like every other request, and before anything else answers
 * it (preValidation runs before the global preHandlers: the rejection of a wrong key or admin
 * token, the idempotency claim), so an unknown path is no unthrottled way to try keys.
 */
export function registerNotFound(app: FastifyInstance & { rateLimit?: () => any }) {
  app.setNotFoundHandler({ preValidation: app.rateLimit?.() }, (req, reply) =>
    sendError(req, reply, new AppError(404, "not_found", `No route ${req.method} ${req.url.split("?")[0]}.`)),
  );
}

/**
 * An error body a route sent itself, without handing over its envelope, under this request's id;
 * anything unrecognisable is an internal error.
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
