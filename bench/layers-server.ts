/**
 * The server of `npm run bench:layers`: the real app (buildApp: the same pipeline, database and
 * services as apps/server/src/main.ts) plus diagnostic routes that answer GET /v1/balance's work
 * at shallower depths, so one run shows where a read's time goes:
 *
 *   /v1/_layers/pipeline        Fastify and the pipeline's hooks (request id, auth, rate limit,
 *                               idempotency, error shaping, logging); a constant body
 *   /v1/_layers/domain/balance  the same, plus the domain call the procedure makes
 *   /v1/_layers/procedure/balance  the same through the tRPC procedure (middleware, input and
 *                               output validation), answered as the server's routes answer
 *                               (rest.ts `answer`), without the REST route's input
 *   /v1/balance                 the real thing: the REST route made from trpc-to-openapi's route
 *                               table, calling the procedure
 *   /v1/_layers/trpc/balance    the procedure by a server-side caller (createCaller) instead
 *
 * All of them sit under /v1/, so every hook runs for them as for the real route.
 *
 * For `npm run bench:transports`, the supported adapters are mounted beside the server's own
 * transports, under /v1/ for the same reason, on the same router and context:
 *
 *   /v1/_adapters/rest/…        trpc-to-openapi's fastifyTRPCOpenApiPlugin (vs the compiled REST routes, rest.ts)
 *   /v1/_adapters/trpc/…        tRPC's own Fastify adapter, fastifyTRPCPlugin (vs /trpc, transports.ts)
 */
import { appRouter, type Context } from "@cardctl/api";
import { fastifyTRPCPlugin } from "@trpc/server/adapters/fastify";
import type { FastifyRequest } from "fastify";
import { fastifyTRPCOpenApiPlugin } from "trpc-to-openapi";
import { buildApp, loadConfig } from "../apps/server/src/app.js";
import { answer } from "../apps/server/src/http/rest.js";

const { app, services } = await buildApp(loadConfig());

const context = (req: FastifyRequest): Context => ({ services, requestId: req.id, principal: req.principal ?? null, admin: false, response: {} });

app.get("/v1/_layers/pipeline", async (_req, reply) => reply.type("application/json").send('{"ok":true}'));
app.get("/v1/_layers/domain/balance", async (req, reply) =>
  reply.type("application/json").send(JSON.stringify(await services.cards.balance(req.principal!))),
);
app.get("/v1/_layers/trpc/balance", async (req, reply) =>
  reply.type("application/json").send(JSON.stringify(await appRouter.createCaller(context(req)).balance.retrieve({}))),
);
// The procedure answered as the server's routes answer it (rest.ts `answer`), without the REST route's input.
app.get("/v1/_layers/procedure/balance", (req, reply) =>
  answer(reply, { router: appRouter, path: "balance.retrieve", type: "query", ctx: context(req), getRawInput: async () => ({}) }),
);

await app.register(fastifyTRPCPlugin, { prefix: "/v1/_adapters/trpc", trpcOptions: { router: appRouter, createContext: ({ req }: { req: FastifyRequest }) => context(req) } });
await app.register(fastifyTRPCOpenApiPlugin, { basePath: "/v1/_adapters/rest", router: appRouter, createContext: ({ req }: { req: FastifyRequest }) => context(req) });

for (const signal of ["SIGINT", "SIGTERM"] as const)
  process.once(signal, async () => {
    await app.close();
    process.exit(0);
  });

const url = await app.listen({ port: 0, host: "127.0.0.1" });
process.stdout.write(`cardctl listening on ${url}\n`);
