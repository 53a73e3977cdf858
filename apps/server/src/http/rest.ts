import { responseStatus, type Context } from "@cardctl/api";
import { callTRPCProcedure, getTRPCErrorFromUnknown, getTRPCErrorShape, type AnyRouter } from "@trpc/server";
import type { FastifyInstance, FastifyRequest } from "fastify";
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
 * coercion of its query fields (coerceSchema, now once per procedure), and built a caller proxy.
 * Per request only this is left: the input (the query for GET, the JSON body otherwise, with the
 * path parameters over it), the procedure call, and its status from the context. Errors go through
 * the router's error formatter, as on /trpc, so both transports send the same envelope.
 */
export function registerRest(app: FastifyInstance, prefix: string, router: AnyRouter, createContext: ContextFactory) {
  forEachOpenApiProcedure(router._def.procedures, ({ path, procedure, meta: { openapi } }) => {
    const type = procedure._def.type;
    const schema = unwrapZodType(getInputOutputParsers(procedure).inputParser, true);
    const takesInput = !instanceofZodTypeLikeVoid(schema);
    if (instanceofZodTypeObject(schema)) coerceSchema(schema);
    const withBody = acceptsRequestBody(openapi.method);
    app.route({
      method: openapi.method,
      url: prefix + normalizePath(openapi.path).replace(/\{(\w+)\}/g, ":$1"),
      // HEAD is no alias of GET here: reading a card makes an ephemeral key.
      exposeHeadRoute: false,
      handler: async (req, reply) => {
        const ctx = createContext(req);
        const input = takesInput
          ? { ...(withBody ? (req.body as object | undefined) : queryInput(req)), ...(req.params as object) }
          : undefined;
        reply.type("application/json");
        try {
          const data = await callTRPCProcedure({ router, path, type, ctx, getRawInput: async () => input, input: undefined, signal: undefined, batchIndex: 0 });
          return reply.code(responseStatus(ctx, []) ?? 200).send(JSON.stringify(data));
        } catch (cause) {
          const error = getTRPCErrorFromUnknown(cause);
          // The formatter hands the envelope to the context (reportError); the onSend hook sends it.
          const shape = getTRPCErrorShape({ config: router._def._config, error, type, path, input, ctx });
          return reply.code(responseStatus(ctx, [error])!).send(JSON.stringify(shape));
        }
      },
    });
  });
}
