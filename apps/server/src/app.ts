import "./http/types.js";
import { createDataSource, createServices, migrate, newId, startCheckpointer, ThreadedWebhookSender, WebhookWorker } from "@cardctl/api";
import cookie from "@fastify/cookie";
import Fastify, { LogController, type FastifyServerOptions } from "fastify";
import pretty from "pino-pretty";
import { bootstrap } from "./bootstrap.js";
import type { Config } from "./config.js";
import { registerAuth, registerAuthRejection } from "./http/auth.js";
import { registerDashboard } from "./http/dashboard.js";
import { registerDocs } from "./http/docs.js";
import { registerEventStream } from "./http/event-stream.js";
import { registerSetup } from "./http/setup.js";
import { registerSimulatedProcessor } from "./http/simulated-processor.js";
import { BODY_LIMIT, clientErrorHandler, frameworkErrors, registerBodyShape, registerErrorShaping, registerNotFound } from "./http/errors.js";
import { registerIdempotency } from "./http/idempotency.js";
import { registerMcp } from "./http/mcp.js";
import { registerOwnerSessions } from "./http/owner-session.js";
import { registerRateLimit } from "./http/rate-limit.js";
import { registerTransports } from "./http/transports.js";
import { registerStripeWebhooks } from "./http/webhooks.js";
import { redactUrl } from "./http/secrets-in-urls.js";
import { createProcessors } from "./processors.js";

export interface AppOptions {
  /** Where logs go (tests capture them); stdout by default. */
  logStream?: NodeJS.WritableStream;
  /** Test hooks before the hold and between hold and mint. */
  afterHold?: (cardId: string) => Promise<void>;
  beforeHold?: (cardId: string) => Promise<void>;
}

/** Fastify's request log lines, without the two a request logs when all goes well. */
class QuietRequestLogs extends LogController {
  override incomingRequest() {}
  override requestCompleted(error: Error | null | undefined, ...rest: unknown[]) {
    if (error) (super.requestCompleted as (...args: unknown[]) => void)(error, ...rest);
  }
  override routeNotFound() {}
}

/** The API's paths (REST, tRPC, operator, owner sessions, MCP), answered `Cache-Control: no-store`. */
const UNCACHED = /^\/(v1|trpc|admin|auth|mcp)(\/|\?|$)/;

/** Builds the whole server: database (migrated), processors, domain services and the HTTP pipeline. */
export async function buildApp(config: Config, opts: AppOptions = {}) {
  const ds = createDataSource(config.databaseUrl);
  await ds.initialize();
  await migrate(ds);
  const stopCheckpointer = startCheckpointer(ds);
  const processors = createProcessors(config, ds);
  const services = createServices({
    ds,
    processors: processors.resolve,
    config: {
      publicUrl: config.publicUrl,
      approvalTtlMs: config.approvalTtlSeconds * 1000,
      cardTtlMs: config.cardTtlSeconds * 1000,
      processorTimeoutMs: config.processorTimeoutMs,
      creationLeaseMs: config.creationLeaseMs,
      webhooks: {
        allowPrivate: config.webhookAllowPrivate,
        timeoutMs: config.webhookTimeoutMs,
        retryBaseMs: config.webhookRetryBaseMs,
        retryWindowMs: config.webhookRetryWindowMs,
      },
    },
    afterHold: opts.afterHold,
    beforeHold: opts.beforeHold,
  });
  const boot = await bootstrap(ds, services, config.adminToken);

  // LOG_FORMAT=pretty (a terminal): pino-pretty in-process, writing through process.stdout so its
  // lines keep their order with the banner's; a test's logStream always gets JSON.
  const prettyLogs = config.logFormat === "pretty" && !opts.logStream;
  const stream = opts.logStream ?? (prettyLogs ? pretty({ destination: process.stdout, ignore: "pid,hostname", translateTime: "SYS:HH:MM:ss.l" }) : undefined);
  const logger: FastifyServerOptions["logger"] = {
    level: config.logLevel,
    ...(stream ? { stream } : {}),
    // Secrets never reach the logs: no headers are logged, and key-like parts of URLs are masked.
    serializers: {
      req: (req: { method: string; url: string; id: string }) => ({
        method: req.method,
        url: redactUrl(req.url),
        id: req.id,
      }),
    },
  };
  const trusted = config.trustProxy;
  const app = Fastify({
    logger,
    bodyLimit: BODY_LIMIT,
    genReqId: () => newId("req"),
    // A line per request ("incoming request", "request completed") is for log collectors: on a
    // terminal they show from LOG_LEVEL=debug only.
    ...(prettyLogs && !["debug", "trace"].includes(config.logLevel) ? { logController: new QuietRequestLogs() } : {}),
    requestIdHeader: false,
    // Unset: the peer's address is the client, whatever X-Forwarded-For says. A hop count trusts
    // that many addresses from the peer back (Fastify's trust function takes the hop's index).
    trustProxy: typeof trusted === "number" ? (_address: string, hop: number) => hop < trusted : (trusted ?? false),
    frameworkErrors,
    clientErrorHandler,
    // A client that sends its headers and then stalls or trickles its body is answered 408 and
    // disconnected once the whole request has taken longer than this; Node checks open
    // connections every second (its default, 30 s, would double the wait).
    requestTimeout: config.requestTimeoutMs,
    http: { connectionsCheckingInterval: 1000, headersTimeout: Math.min(config.requestTimeoutMs, 60_000) },
  });
  // Served as https (PUBLIC_URL): browsers are told to come back over https only.
  const https = config.publicUrl.startsWith("https:");
  app.addHook("onRequest", (req, reply, done) => {
    reply.header("Request-Id", req.id);
    if (https) reply.header("strict-transport-security", "max-age=31536000");
    // API answers carry secrets (a card's ephemeral key, a new API key, a session's CSRF token) and
    // per-client state: no cache, in the browser or between, keeps one.
    if (UNCACHED.test(req.url)) reply.header("cache-control", "no-store");
    done();
  });
  // The pipeline, in order: request id → error shaping → auth → rate limit → idempotency → procedure.
  registerErrorShaping(app);
  // Before auth: the cookie parser, for the dashboard's sessions.
  await app.register(cookie);
  registerAuth(app, services, boot.adminTokenHash, new URL(config.publicUrl).origin);
  await registerRateLimit(app, config.rateLimitPerHour, config.redisUrl);
  registerAuthRejection(app);
  registerBodyShape(app);
  registerIdempotency(app, services);
  registerNotFound(app);
  registerDocs(app, config.publicUrl);
  registerSimulatedProcessor(app, processors.simulated);
  registerTransports(app, services);
  registerEventStream(app, services, { heartbeatMs: config.eventStreamHeartbeatMs, pollMs: config.eventStreamPollMs });
  registerMcp(app, config.publicUrl);
  registerOwnerSessions(app, services, config.publicUrl);
  const dashboardPage = await registerDashboard(app, { stripe: config.processor === "stripe" });
  registerSetup(app, services, config.publicUrl, dashboardPage);
  await registerStripeWebhooks(app, services, config.stripeWebhookSecrets);
  // Outgoing webhooks are delivered by every instance, from the database's queue (leased claims),
  // sent from a thread of their own so that delivering costs the API's thread next to nothing.
  const sender = new ThreadedWebhookSender({ timeoutMs: config.webhookTimeoutMs, allowPrivate: config.webhookAllowPrivate });
  const webhookWorker = new WebhookWorker(services.webhookDeliveries, sender.send, (err, msg) => app.log.error({ err }, msg), () => sender.close(), {
    pollMs: config.webhookPollMs,
  });
  app.addHook("onReady", async () => {
    sender.start();
    webhookWorker.start();
  });
  app.addHook("onClose", async () => {
    await webhookWorker.stop();
    await stopCheckpointer();
    await ds.destroy();
  });
  return { app, services, ds, simulated: processors.simulated, boot };
}

export type App = Awaited<ReturnType<typeof buildApp>>;
export { loadConfig, type Config } from "./config.js";
