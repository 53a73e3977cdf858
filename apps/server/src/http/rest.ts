import { responseStatus, validationError, type Context } from "@cardctl/api";
import { callTRPCProcedure, getTRPCErrorFromUnknown, getTRPCErrorShape, type AnyRouter, type TRPCProcedureType } from "@trpc/server";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import {
  acceptsRequestBody,
  coerceSchema,
  forEachOpenApiProcedure,
  getInputOutputParsers,
  getQuery,
  instanceofZodTypeLikeVoid,
  instanceofZodTypeObject,
  normalizePath,
  unwrapZodType,
} from "trpc-to-openapi";

export type ContextFactory = (req: FastifyRequest) => Context;

/** A path parameter of an OpenAPI path (`{id}`). */
const PATH_PARAM = /\{(\w+)\}/g;

/**
 * Query values read by trpc-to-openapi's own getQuery, from the query Fastify parsed (it reads the
 * URL only when there is none): a repeated key stays an array, an empty value is left out (so
 * `?agent_id=` is no filter).
 */
const queryInput = (req: FastifyRequest) => getQuery(req as never, undefined as never);

/**
 * The REST surface of a router: each procedure with OpenAPI meta (trpc-to-openapi's route table)
 * becomes a Fastify route at `prefix` + its path, `{id}` as a path parameter. This is the work of
 * trpc-to-openapi's handler, done once at start-up instead of on every request: the handler
 * parsed the URL, tried each procedure's path pattern, unwrapped the input schema and switched on
 * coercion of its fields (coerceSchema, now once per procedure, and for query strings only), and
 * built a caller proxy.
 * Per request only this is left: the input (the query for GET, the JSON body otherwise, with the
 * path parameters beside it), the procedure call, and its status from the context (`answer`).
 */
export function registerRest(app: FastifyInstance, prefix: string, router: AnyRouter, createContext: ContextFactory) {
  forEachOpenApiProcedure(router._def.procedures, ({ path, procedure, meta: { openapi } }) => {
    const type = procedure._def.type;
    const schema = unwrapZodType(getInputOutputParsers(procedure).inputParser, true);
    const takesInput = !instanceofZodTypeLikeVoid(schema);
    const withBody = acceptsRequestBody(openapi.method);
    // Query strings carry text: their numbers and booleans are coerced. A JSON body is typed as
    // sent (coerced, `null` or `""` would pass as 0), as are the path's ids, which are text anyway.
    if (!withBody && instanceofZodTypeObject(schema)) coerceSchema(schema);
    const pathParams = [...openapi.path.matchAll(PATH_PARAM)].map((m) => m[1]!);
    app.route({
      method: openapi.method,
      url: prefix + normalizePath(openapi.path).replace(PATH_PARAM, ":$1"),
      // HEAD is no alias of GET here: reading a card makes an ephemeral key.
      exposeHeadRoute: false,
      handler: async (req, reply) => {
        const fields = takesInput ? ((withBody ? req.body : queryInput(req)) as object | undefined) : undefined;
        const ctx = createContext(req);
        // A field named like a path parameter would be overridden by the path: refused, not ignored.
        const inPath = pathParams.length > 0 && fields ? pathParams.filter((name) => Object.hasOwn(fields, name)) : [];
        // No query field takes a list: a repeated one is refused by name (not as "must be a number").
        const repeated = !withBody && fields ? Object.entries(fields).flatMap(([name, value]) => (Array.isArray(value) ? [name] : [])) : [];
        if (inPath.length || repeated.length)
          return answerError(
            reply,
            { router, path, type, ctx },
            validationError([
              ...inPath.map((name) => ({ path: name, message: `${name} is given by the path, not a field of the request` })),
              ...repeated.map((name) => ({ path: name, message: `${name} is given more than once; give it once` })),
            ]),
          );
        const input = takesInput ? { ...fields, ...(req.params as object) } : undefined;
        return answer(reply, { router, path, type, ctx, getRawInput: async () => input });
      },
    });
  });
}

export interface Call {
  router: AnyRouter;
  path: string;
  type: TRPCProcedureType;
  ctx: Context;
  getRawInput: () => Promise<unknown>;
}

/**
 * Runs a procedure call and answers it: its result as JSON with the status the procedure chose
 * (200 unless it set one), or its error (`answerError`). `trpc` wraps the body as tRPC's protocol
 * does (`{ result: { data } }`); REST sends it bare.
 */
export async function answer(reply: FastifyReply, call: Call, trpc = false) {
  reply.type("application/json");
  try {
    const data = await callTRPCProcedure({ ...call, input: undefined, signal: undefined, batchIndex: 0 });
    return reply.code(responseStatus(call.ctx, []) ?? 200).send(JSON.stringify(trpc ? { result: { data } } : data));
  } catch (cause) {
    return answerError(reply, call, cause, trpc);
  }
}

/**
 * Answers a failed call with its error's status. The error goes through the router's error
 * formatter, which hands the envelope to the context (reportError) for the onSend hook to send, so
 * both transports answer failures alike.
 */
export function answerError(
  reply: FastifyReply,
  { router, path, type, ctx }: Omit<Call, "type" | "getRawInput"> & { type: TRPCProcedureType | "unknown" },
  cause: unknown,
  trpc = false,
) {
  const error = getTRPCErrorFromUnknown(cause);
  const shape = getTRPCErrorShape({ config: router._def._config, error, type, path, input: undefined, ctx });
  return reply
    .code(responseStatus(ctx, [error])!)
    .type("application/json")
    .send(JSON.stringify(trpc ? { error: shape } : shape));
}
