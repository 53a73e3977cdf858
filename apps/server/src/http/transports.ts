import { AppError, adminRouter, appRouter, type Services } from "@cardctl/api";
import { TRPCError, type AnyTRPCProcedure, type TRPCProcedureType } from "@trpc/server";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { answer, answerError, registerRest, type ContextFactory } from "./rest.js";

/** tRPC's route: one procedure per request (`:path` as routing decoded it). */
export const TRPC_ROUTE = "/trpc/:path";

const METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"];

/** The one method tRPC accepts for each procedure type it serves over plain HTTP. */
const METHOD_OF: Partial<Record<TRPCProcedureType, string>> = { query: "GET", mutation: "POST" };

/**
 * Why tRPC's HTTP protocol refuses a call before running it (the errors and messages of its own
 * handler, `resolveResponse`), or undefined. Batching and streamed responses (httpBatchLink,
 * httpBatchStreamLink) are not served; the dashboard uses httpLink.
 */
function refusal(
  req: FastifyRequest<{ Querystring: { batch?: unknown } }>,
  reply: FastifyReply,
  path: string,
  procedure: AnyTRPCProcedure | undefined,
): TRPCError | undefined {
  if (req.query.batch === "1") return new TRPCError({ code: "BAD_REQUEST", message: "Batching is not enabled on the server" });
  const accept = req.headers["trpc-accept"] ?? (req.headers.accept?.split(",").some((t) => t.trim() === "application/jsonl") ? "application/jsonl" : undefined);
  if (accept === "application/jsonl") return new TRPCError({ code: "BAD_REQUEST", message: "Streaming requests must be batched (you can do a batch of 1)" });
  if (!procedure) return new TRPCError({ code: "NOT_FOUND", message: `No procedure found on path "${path}"` });
  const type = procedure._def.type;
  const method = METHOD_OF[type];
  if (req.method === method) return undefined;
  if (method) reply.header("allow", method);
  return new TRPCError({ code: "METHOD_NOT_SUPPORTED", message: `Unsupported ${req.method}-request to ${type} procedure at path "${path}"` });
}

/** A query's input: the `input` parameter as JSON (unparseable, it fails the call with 400, as in tRPC). */
function queryInput(value: unknown): unknown {
  const text = Array.isArray(value) ? value[0] : value;
  if (typeof text !== "string" || text === "") return undefined;
  try {
    return JSON.parse(text);
  } catch (err) {
    // As a body that is not JSON: invalid_json, the same on both transports (DESIGN 3.4).
    const cause = new AppError(400, "invalid_json", `The input query parameter is not valid JSON: ${(err as Error).message}`);
    throw new TRPCError({ code: "PARSE_ERROR", message: cause.message, cause });
  }
}

/**
 * The one router on both transports: tRPC at /trpc, the spec's REST paths at /v1 from
 * trpc-to-openapi's route table (and the operator router at /admin/v1). Both share the Fastify
 * pipeline, so auth, rate limits, idempotency, errors and request ids behave the same, and both
 * call the procedure straight from the Fastify route (rest.ts `answer`).
 *
 * /trpc speaks tRPC's HTTP protocol for httpLink (a query by GET with `?input=<json>`, a mutation
 * by POST with a JSON body; `{ result: { data } }` or `{ error }`). tRPC's own adapters
 * (`fastifyTRPCPlugin`, `fetchRequestHandler`) build a fetch Request and Response around each call,
 * a quarter to a third of a /trpc read's CPU (BENCHMARKS.md); the plugin would also swap Fastify's
 * JSON parser, the one place bodies are read and limited, for a pass-through.
 */
export function registerTransports(app: FastifyInstance, services: Services) {
  const createContext: ContextFactory = (req) => {
    return {
      services,
      requestId: req.id,
      principal: req.principal ?? null,
      admin: req.isAdmin === true,
      creationKey: req.idempotency?.scope,
      creationRetry: req.idempotency?.retry === true,
      response: {},
      reportError: (status, envelope, error) => {
        req.errorEnvelope = envelope;
        if (status >= 500 && envelope.error.code === "internal_error") req.log.error({ err: error.cause ?? error }, "unhandled error");
      },
    };
  };

  // Keyed by the full dotted path at run time, as tRPC's own lookup (getProcedureAtPath) reads it.
  const procedures = appRouter._def.procedures as unknown as Record<string, AnyTRPCProcedure | undefined>;
  app.route<{ Params: { path: string }; Querystring: { input?: unknown; batch?: unknown } }>({
    method: METHODS,
    url: TRPC_ROUTE,
    handler: async (req, reply) => {
      // As tRPC answers it: HEAD (a client's warm-up) runs nothing.
      if (req.method === "HEAD") return reply.code(204).send();
      reply.header("vary", "trpc-accept, accept");
      const { path } = req.params;
      const procedure = procedures[path];
      const ctx = createContext(req);
      const refused = refusal(req, reply, path, procedure);
      if (refused || !procedure) return answerError(reply, { router: appRouter, path, type: procedure?._def.type ?? "unknown", ctx }, refused, true);
      // A mutation's input is the body Fastify parsed; a bodyless POST is `{}`, and so is a query
      // without `input` (cards.list() with no filters is the first page, as GET /v1/cards is).
      const getRawInput = req.method === "GET" ? async () => queryInput(req.query.input) ?? {} : async () => req.body ?? {};
      return answer(reply, { router: appRouter, path, type: procedure._def.type, ctx, getRawInput }, true);
    },
  });

  registerRest(app, "/v1", appRouter, createContext);
  registerRest(app, "/admin/v1", adminRouter, createContext);
}
