import { AppError } from "@cardctl/api";
import rateLimit from "@fastify/rate-limit";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { Redis } from "ioredis";
import { clientAddress } from "./client-address.js";
import { createFallbackStore } from "./rate-limit-store.js";

const HOUR_MS = 60 * 60 * 1000;
/** Longest a request waits on Redis before it is counted by this instance alone. */
const REDIS_TIMEOUT_MS = 250;

/**
 * @fastify/rate-limit, per API key (or per client address, an IPv6 one by its /64, for requests without a valid key, so keys
 * cannot be brute-forced; the operator's requests are not limited), shared through Redis when REDIS_URL is set. The spec wants
 * RateLimit-Reset as a unix timestamp; the plugin sends seconds-until-reset, converted on send.
 * While Redis is unreachable, counting falls back to this instance's memory (rate-limit-store.ts).
 */
export async function registerRateLimit(app: FastifyInstance, perHour: number, redisUrl: string | undefined) {
  // Fail fast while disconnected (no offline queue: a command is refused at once instead of
  // waiting for a reconnect; pending ones are dropped on a disconnect, not replayed after it, as
  // they were counted locally already), and keep reconnecting, at most a second apart.
  const redis = redisUrl
    ? new Redis(redisUrl, {
        enableOfflineQueue: false,
        autoResendUnfulfilledCommands: false,
        maxRetriesPerRequest: 0,
        commandTimeout: REDIS_TIMEOUT_MS,
        connectTimeout: 1000,
        retryStrategy: (attempt) => Math.min(attempt * 100, 1000),
      })
    : undefined;
  const store = redis
    ? await createFallbackStore(redis, { nameSpace: "cardctl-rate-limit:", log: app.log, timeoutMs: REDIS_TIMEOUT_MS })
    : undefined;
  await app.register(rateLimit, {
    global: true,
    max: perHour,
    timeWindow: HOUR_MS,
    enableDraftSpec: true,
    ...(store ? { store } : {}),
    keyGenerator: (req) => (req.principal ? `key:${req.principal.keyId}` : `ip:${clientAddress(req.ip)}`),
    // The operator (valid admin token) is trusted; a wrong admin token is limited per IP like any.
    allowList: (req) => req.isAdmin === true,
    addHeadersOnExceeding: { "ratelimit-limit": true, "ratelimit-remaining": true, "ratelimit-reset": true },
    addHeaders: { "ratelimit-limit": true, "ratelimit-remaining": true, "ratelimit-reset": true, "retry-after": true },
    errorResponseBuilder: (_req, ctx) =>
      new AppError(429, "rate_limited", `Rate limit of ${ctx.max} requests per hour exceeded; retry after ${ctx.after}.`, {
        limit: ctx.max,
        retry_after_seconds: Math.ceil(ctx.ttl / 1000),
      }),
  });
  app.addHook("onSend", (_req, reply, payload, done) => {
    resetAsTimestamp(reply);
    done(null, payload);
  });
  // quit() is refused while disconnected (no offline queue); disconnect() also stops reconnecting.
  if (redis) app.addHook("onClose", async () => void (await redis.quit().catch(() => redis.disconnect())));
}

/**
 * The rate limit for a request the router refused before any hook ran (frameworkErrors: a URL it
 * cannot read): counted like any request without a valid key, per client IP, with the headers.
 * Past the limit it throws the 429 (an AppError). The plugin's handler without options is the
 * global limit itself (its parameters and store), so it is made per call.
 */
export async function rateLimitUnrouted(req: FastifyRequest, reply: FastifyReply): Promise<void> {
  try {
    await req.server.rateLimit().call(req.server, req, reply);
  } finally {
    resetAsTimestamp(reply);
  }
}

/**
 * RateLimit-Reset as the spec wants it, a unix timestamp (the plugin sets whole seconds until
 * reset, rounded up, at most the hour's window), rounded up too: never before the window resets,
 * so a client that waits for it is not refused again. Also for replies sent without onSend (event
 * streams). A value past the window is a timestamp already (/mcp passes on the inner API call's).
 */
export function resetAsTimestamp(reply: FastifyReply): void {
  const untilReset = Number(reply.getHeader("ratelimit-reset"));
  if (untilReset >= 0 && untilReset <= HOUR_MS / 1000) reply.header("ratelimit-reset", Math.ceil(Date.now() / 1000) + untilReset);
}
