import type { FastifyRateLimitOptions, FastifyRateLimitStore, FastifyRateLimitStoreCtor } from "@fastify/rate-limit";
import type { FastifyBaseLogger } from "fastify";
import type { Redis } from "ioredis";
import { createRequire } from "node:module";

/**
 * A @fastify/rate-limit store that counts in Redis and falls back to per-instance (in-memory)
 * counting while Redis is unreachable, so an outage degrades rate limiting instead of failing every
 * request. It wraps the plugin's own RedisStore and LocalStore (same Lua script, same key layout,
 * same ttl semantics, so headers do not change); they are not re-exported by the package's main
 * entry, but the package has no "exports" map, so their files can be loaded directly.
 */

type Result = { current: number; ttl: number };
type Callback = (err: Error | null, res?: Result) => void;
type StoreMethod = "incr" | "read";
interface InnerStore {
  incr(key: string, cb: Callback, timeWindow: number, max: number): void;
  read?(key: string, cb: Callback, timeWindow: number, max: number): void;
  child(routeOptions: unknown): InnerStore;
}

const require = createRequire(import.meta.url);
const RedisStore = require("@fastify/rate-limit/store/RedisStore.js") as new (
  continueExceeding: boolean,
  exponentialBackoff: boolean,
  redis: Redis,
  key?: string,
) => InnerStore;
const LocalStore = require("@fastify/rate-limit/store/LocalStore.js") as new (
  continueExceeding: boolean,
  exponentialBackoff: boolean,
  cache?: number,
) => InnerStore;

export interface FallbackStoreOptions {
  nameSpace: string;
  log: FastifyBaseLogger;
  /** Longest a request waits on Redis before it is counted locally. */
  timeoutMs?: number;
  /** While Redis is marked down but connected, one request per interval tries it again. */
  probeIntervalMs?: number;
  /** How long start-up waits for the first connection before counting locally. */
  startupWaitMs?: number;
}

/**
 * Up/down state of Redis as the store sees it, shared by the root store and its per-route children,
 * so an outage logs one warning and its end one info line, whatever the number of requests.
 */
class RedisHealth {
  private down = false;
  private nextProbeAt = 0;
  lastError: string | undefined;

  constructor(
    private readonly redis: Redis,
    private readonly log: FastifyBaseLogger,
    private readonly probeIntervalMs: number,
  ) {}

  /** Whether this call should go to Redis. Never waits: a disconnected client is skipped at once. */
  tryRedis(): boolean {
    if (this.redis.status !== "ready") {
      if (!this.down) this.failed(this.lastError ?? `connection ${this.redis.status}`);
      return false;
    }
    if (!this.down) return true;
    // Connected again (or still connected but slow): let one call through per interval.
    const now = Date.now();
    if (now < this.nextProbeAt) return false;
    this.nextProbeAt = now + this.probeIntervalMs;
    return true;
  }

  failed(reason: string) {
    this.nextProbeAt = Date.now() + this.probeIntervalMs;
    if (this.down) return;
    this.down = true;
    // One line, on a terminal too (the reason in the message, not as a field pino-pretty prints below it).
    this.log.warn(`Redis unavailable (${reason}): rate limits are counted per instance until it is back`);
  }

  succeeded() {
    if (!this.down) return;
    this.down = false;
    this.lastError = undefined;
    this.log.info("Redis reachable again: rate limits are shared through Redis again");
  }
}

/**
 * The store class to give @fastify/rate-limit as `store` (the plugin constructs it with its global
 * options). Waits up to `startupWaitMs` for the first connection so a healthy Redis that is still
 * connecting at boot does not count as an outage; if it is not there by then, the warning is logged
 * at start-up and counting is local until it comes.
 */
export async function createFallbackStore(redis: Redis, opts: FallbackStoreOptions): Promise<FastifyRateLimitStoreCtor> {
  const { nameSpace, log, timeoutMs = 250, probeIntervalMs = 1000, startupWaitMs = 1000 } = opts;
  const health = new RedisHealth(redis, log, probeIntervalMs);
  // Connection errors repeat on every reconnect attempt: remember the last one for the warning, and
  // keep them at debug level. An ioredis client without an 'error' listener prints each to stderr.
  redis.on("error", (err: Error) => {
    health.lastError = err.message;
    log.debug({ err: err.message }, "Redis connection error");
  });

  if (redis.status !== "ready") {
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        redis.off("ready", done).off("error", done).off("end", done);
        resolve();
      };
      const timer = setTimeout(done, startupWaitMs);
      redis.once("ready", done).once("error", done).once("end", done);
    });
    // (status changed during the wait; TypeScript still narrows it from the check above)
    if ((redis.status as string) !== "ready") health.failed(health.lastError ?? `connection ${redis.status}`);
  }

  class FallbackStore implements FastifyRateLimitStore {
    private readonly shared: InnerStore;
    private readonly local: InnerStore;

    constructor(options: FastifyRateLimitOptions, inner?: { shared: InnerStore; local: InnerStore }) {
      // The plugin passes its merged parameters, which include these two (not in the public type).
      const params = options as { continueExceeding?: boolean; exponentialBackoff?: boolean };
      const continueExceeding = params.continueExceeding ?? false;
      const exponentialBackoff = params.exponentialBackoff ?? false;
      this.shared = inner?.shared ?? new RedisStore(continueExceeding, exponentialBackoff, redis, nameSpace);
      this.local = inner?.local ?? new LocalStore(continueExceeding, exponentialBackoff);
    }

    incr(key: string, cb: Callback, timeWindow: number, max: number) {
      this.call("incr", key, cb, timeWindow, max);
    }

    /** The plugin's non-mutating peek (`{ increment: false }`), with the same fallback. */
    read(key: string, cb: Callback, timeWindow: number, max: number) {
      this.call("read", key, cb, timeWindow, max);
    }

    child(routeOptions: Parameters<FastifyRateLimitStore["child"]>[0]): FastifyRateLimitStore {
      return new FallbackStore(routeOptions as FastifyRateLimitOptions, {
        shared: this.shared.child(routeOptions),
        local: this.local.child(routeOptions),
      });
    }

    /**
     * Redis first, bounded by `timeoutMs` (ioredis' own commandTimeout is the same, but this timer
     * also covers the script's EVALSHA → EVAL retry); on an error or a timeout the call is answered
     * by the local store instead, so no request fails or waits longer because of Redis.
     */
    private call(method: StoreMethod, key: string, cb: Callback, timeWindow: number, max: number) {
      const local = () => this.local[method]!(key, cb, timeWindow, max);
      if (!health.tryRedis()) return local();
      let settled = false;
      const timer = setTimeout(() => {
        if (settled) return;
        settled = true;
        health.failed(`no answer within ${timeoutMs} ms`);
        local();
      }, timeoutMs);
      this.shared[method]!(
        key,
        (err, res) => {
          if (settled) return; // already answered locally after the timeout
          settled = true;
          clearTimeout(timer);
          if (err || !res) {
            // (a command pending when the connection drops is aborted with MaxRetriesPerRequestError)
            health.failed(err?.name === "MaxRetriesPerRequestError" ? "connection lost" : (err?.message ?? "no result"));
            return local();
          }
          health.succeeded();
          cb(null, res);
        },
        timeWindow,
        max,
      );
    }
  }
  return FallbackStore;
}
