/** Every setting of the server, from the environment (DESIGN 3.1). */
export interface Config {
  port: number;
  host: string;
  databaseUrl: string;
  /** Operator token; generated and stored on first start when unset. */
  adminToken: string | undefined;
  redisUrl: string | undefined;
  processor: "simulated" | "stripe";
  stripeTestSecretKey: string | undefined;
  stripeLiveSecretKey: string | undefined;
  stripeApiBase: string | undefined;
  stripeWebhookSecret: string | undefined;
  approvalTtlSeconds: number;
  /** Lifetime of a card from issue; at most 4 days, inside the shortest hold validity (DESIGN 3.6). */
  cardTtlSeconds: number;
  rateLimitPerHour: number;
  publicUrl: string;
  processorTimeoutMs: number;
  /** Longest a client may take to send a whole request (headers and body) before it gets 408. */
  requestTimeoutMs: number;
  /**
   * How long a request owns a card it is minting (and its Idempotency-Key) before the recovery
   * pass or a retry may take over; must exceed a few processor timeouts.
   */
  creationLeaseMs: number;
  /** Interval of the maintenance pass (expiry sweep and recovery); 0 disables the timer. */
  maintenanceIntervalMs: number;
  logLevel: string;
}

/** Holds last about 7 days, 5 for some Visa merchant-initiated payments: cards close within 4. */
const MAX_CARD_TTL_SECONDS = 4 * 24 * 3600;

function int(env: NodeJS.ProcessEnv, name: string, fallback: number, min = 0, max = Number.MAX_SAFE_INTEGER): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max)
    throw new Error(`${name} must be an integer from ${min}${max < Number.MAX_SAFE_INTEGER ? ` to ${max}` : " up"}, got '${raw}'`);
  return n;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const port = int(env, "PORT", 4000);
  const host = env.HOST || "127.0.0.1";
  const processor = env.PROCESSOR || "simulated";
  if (processor !== "simulated" && processor !== "stripe") throw new Error(`PROCESSOR must be 'simulated' or 'stripe', got '${processor}'`);
  return {
    port,
    host,
    databaseUrl: env.DATABASE_URL || "sqlite:./data/cardctl.sqlite",
    adminToken: env.ADMIN_TOKEN || undefined,
    redisUrl: env.REDIS_URL || undefined,
    processor,
    stripeTestSecretKey: env.STRIPE_TEST_SECRET_KEY || undefined,
    stripeLiveSecretKey: env.STRIPE_LIVE_SECRET_KEY || undefined,
    stripeApiBase: env.STRIPE_API_BASE || undefined,
    stripeWebhookSecret: env.STRIPE_WEBHOOK_SECRET || undefined,
    approvalTtlSeconds: int(env, "APPROVAL_TTL_SECONDS", 86400, 1),
    cardTtlSeconds: int(env, "CARD_TTL_SECONDS", 86400, 1, MAX_CARD_TTL_SECONDS),
    rateLimitPerHour: int(env, "RATE_LIMIT_PER_HOUR", 1000, 1),
    publicUrl: (env.PUBLIC_URL || `http://${host}:${port}`).replace(/\/$/, ""),
    processorTimeoutMs: int(env, "PROCESSOR_TIMEOUT_MS", 10000, 1),
    requestTimeoutMs: int(env, "REQUEST_TIMEOUT_MS", 30000, 1000),
    creationLeaseMs: int(env, "CREATION_LEASE_MS", 60000, 1),
    maintenanceIntervalMs: int(env, "MAINTENANCE_INTERVAL_MS", 30000),
    logLevel: env.LOG_LEVEL || "info",
  };
}
