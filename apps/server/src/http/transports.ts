import { adminRouter, appRouter, responseStatus, type Context, type Services } from "@cardctl/api";
import { fetchRequestHandler } from "@trpc/server/adapters/fetch";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { registerRest, type ContextFactory } from "./rest.js";

const METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"] as const;

/** Methods whose request carries a JSON body to the tRPC adapter (a bodyless POST gets `{}`). */
const hasJsonBody = (method: string) => method !== "GET" && method !== "HEAD" && method !== "DELETE";

/**
 * The Fastify request as a fetch Request. Bodies were already parsed (and limited) by Fastify; a
 * bodyless POST becomes `{}` so the adapter sees JSON.
 */
function toFetchRequest(req: FastifyRequest): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined || name === "content-length" || name === "transfer-encoding") continue;
    headers.set(name, Array.isArray(value) ? value.join(", ") : value);
  }
  const hasBody = hasJsonBody(req.method);
  if (hasBody) headers.set("content-type", "application/json");
  // The origin is fixed: the adapter reads only the path and query, and a client's Host header
  // (`a b`, `%00`) would make the URL unparseable.
  return new Request(`http://localhost${req.url}`, {
    method: req.method,
    headers,
    body: hasBody ? JSON.stringify(req.body ?? {}) : undefined,
  });
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
 * The one router on both transports: tRPC at /trpc, the spec's REST paths at /v1 from
 * trpc-to-openapi's route table (and the operator router at /admin/v1). Both share the Fastify
 * pipeline, so auth, rate limits, idempotency, errors and request ids behave the same.
 */
export function registerTransports(app: FastifyInstance, services: Services) {
  const createContext: ContextFactory = (req) => {
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

  registerRest(app, "/v1", appRouter, createContext);
  registerRest(app, "/admin/v1", adminRouter, createContext);
}
