import { adminRouter, appRouter, responseStatus, type Context, type Services } from "@cardctl/api";
import type { AnyRouter } from "@trpc/server";
import { fetchRequestHandler } from "@trpc/server/adapters/fetch";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { createOpenApiNodeHttpHandler } from "trpc-to-openapi";

const METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"] as const;

/** Methods whose request carries a JSON body to the adapters (a bodyless POST gets `{}`). */
const hasJsonBody = (method: string) => method !== "GET" && method !== "HEAD" && method !== "DELETE";

/**
 * The Fastify request as a fetch Request. Bodies were already parsed (and limited) by Fastify; a
 * bodyless POST becomes `{}` so both adapters see JSON.
 */
function toFetchRequest(req: FastifyRequest): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined || name === "content-length" || name === "transfer-encoding") continue;
    headers.set(name, Array.isArray(value) ? value.join(", ") : value);
  }
  const hasBody = hasJsonBody(req.method);
  if (hasBody) headers.set("content-type", "application/json");
  return new Request(`http://${req.hostname}${req.url}`, {
    method: req.method,
    headers,
    body: hasBody ? JSON.stringify(req.body ?? {}) : undefined,
  });
}

type ContextFactory = (req: FastifyRequest) => Context;
type ResponseMeta = (opts: { ctx?: Context; errors: any[] }) => { status?: number };
const FASTIFY_REQUEST = Symbol("fastify request");
/** The signal of a Request made without one: never aborted. */
const NEVER_ABORTED = new AbortController().signal;

/**
 * trpc-to-openapi's node handler, built once per router (building it rebuilds the route table
 * and, unless NODE_ENV=production, generates the whole OpenAPI document to validate the router),
 * driven straight from the Fastify request and reply instead of through its fetch adapter.
 *
 * The handler reads of its request only `method`, `url`, the content type (through
 * `headers.get`, since it is a fetch Request), `body` (taken as is when present) and `signal`;
 * anything else would make it build a fetch Request of a node request per call. So it gets a
 * Request-shaped object with exactly those, as the fetch adapter's proxy gave it: the URL without
 * the prefix, the parsed body (a bodyless POST is `{}`), JSON as the content type of every method
 * with a body, and the signal of a Request that nobody aborts. Its response (status, headers, a
 * JSON string) goes to the Fastify reply, so every onSend hook sees a string payload.
 */
function openApiHandler(prefix: string, router: AnyRouter, createContext: ContextFactory, responseMeta: ResponseMeta) {
  const handler = createOpenApiNodeHttpHandler({
    router: router as never,
    createContext: (({ req }: { req: Record<symbol, FastifyRequest> }) => createContext(req[FASTIFY_REQUEST]!)) as never,
    responseMeta: responseMeta as never,
  });
  return (fastifyReq: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
    const hasBody = hasJsonBody(fastifyReq.method);
    const contentType = hasBody ? "application/json" : fastifyReq.headers["content-type"];
    const req = {
      __proto__: Request.prototype,
      [FASTIFY_REQUEST]: fastifyReq,
      method: fastifyReq.method,
      url: fastifyReq.url.slice(prefix.length),
      headers: { get: (name: string) => (name.toLowerCase() === "content-type" ? (contentType ?? null) : null) },
      ...(hasBody ? { body: fastifyReq.body ?? {} } : {}),
      signal: NEVER_ABORTED,
    };
    return new Promise<FastifyReply>((resolve) => {
      const res = {
        setHeader: (name: string, value: string | string[]) => {
          if (name.toLowerCase() !== "content-length") reply.header(name, typeof value === "string" ? value : value.join(", "));
        },
        get statusCode() {
          return reply.statusCode;
        },
        set statusCode(code: number) {
          reply.code(code);
        },
        end: (payload?: string) => resolve(reply.send(payload ?? "")),
      };
      void handler(req as never, res as never);
    });
  };
}

/** Sends the adapter's Response through Fastify, so every onSend hook sees a string payload. */
async function send(reply: FastifyReply, res: Response) {
  reply.code(res.status);
  res.headers.forEach((value, name) => {
    if (name !== "content-length") reply.header(name, value);
  });
  return reply.send(await res.text());
}

/**
 * The one router on both transports: tRPC at /trpc, the spec's REST paths at /v1 through
 * trpc-to-openapi (and the operator router at /admin/v1). Both share the Fastify pipeline, so
 * auth, rate limits, idempotency, errors and request ids behave the same.
 */
export function registerTransports(app: FastifyInstance, services: Services) {
  const createContext = (req: FastifyRequest): Context => {
    return {
      services,
      requestId: req.id,
      principal: req.principal ?? null,
      admin: req.isAdmin === true,
      creationKey: req.idempotency?.scope,
      response: {},
      reportError: (status, envelope, error) => {
        req.errorEnvelope = envelope;
        if (status >= 500 && envelope.error.code === "internal_error") req.log.error({ err: error.cause ?? error }, "unhandled error");
      },
    };
  };
  const responseMeta = ({ ctx, errors }: { ctx?: Context; errors: any[] }) => ({ status: responseStatus(ctx, errors) });

  app.route({
    method: METHODS as unknown as string[],
    url: "/trpc/:path",
    handler: async (req, reply) =>
      send(
        reply,
        await fetchRequestHandler({
          endpoint: "/trpc",
          req: toFetchRequest(req),
          router: appRouter,
          createContext: () => createContext(req),
          responseMeta,
          allowBatching: false,
        }),
      ),
  });

  const rest = (prefix: "/v1" | "/admin/v1", router: AnyRouter) => {
    const handle = openApiHandler(prefix, router, createContext, responseMeta);
    app.route({
      method: METHODS as unknown as string[],
      url: `${prefix}/*`,
      handler: (req, reply) => handle(req, reply),
    });
  };
  rest("/v1", appRouter);
  rest("/admin/v1", adminRouter);
}
