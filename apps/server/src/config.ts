import { isIP } from "node:net";

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
  /**
   * Publishable keys (pk_test_… / pk_live_…) for Stripe.js in the dashboard: the Setup page's
   * Payment Element and the Cards page's reveal (Issuing Elements). Public by design.
   */
  stripeTestPublishableKey: string | undefined;
  stripeLivePublishableKey: string | undefined;
  stripeApiBase: string | undefined;
  /** One per Stripe webhook endpoint (test mode's and live mode's each have their own); empty: not configured. */
  stripeWebhookSecrets: string[];
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
  /** Interval of the comment lines that keep an idle event stream (GET /v1/events/stream) open through proxies. */
  eventStreamHeartbeatMs: number;
  /** How often an event stream looks for events committed on other instances (this instance's wake it at once). */
  eventStreamPollMs: number;
  /**
   * TRUST_PROXY: the proxies whose X-Forwarded-For names the client (addresses or CIDR ranges, or
   * how many hops in front of the server), for the per-IP limits and the logs; unset, the peer's
   * address is the client (a header anyone can send is never believed).
   */
  trustProxy: string[] | number | undefined;
  /** WEBHOOK_ALLOW_PRIVATE: webhook endpoints may use http:// and loopback/private addresses (tests, LANs). */
  webhookAllowPrivate: boolean;
  /** Longest a webhook attempt may take for a whole answer. */
  webhookTimeoutMs: number;
  /** First webhook retry delay; it doubles (with jitter) up to 6 hours. */
  webhookRetryBaseMs: number;
  /** Webhook retries stop this long after the event; then the endpoint is disabled. */
  webhookRetryWindowMs: number;
  /** How often an instance looks for deliveries it was not woken for: other instances' events, retries, leases that ended. */
  webhookPollMs: number;
  logLevel: string;
  /**
   * `pretty`: human-readable logs (pino-pretty), no per-request lines below debug, and a ready
   * banner; `json`: one JSON object a line. Defaults to pretty on a terminal, json otherwise.
   */
  logFormat: "pretty" | "json";
}

/** A setting the server cannot start with; its message names the variable and what to set. */
export class ConfigError extends Error {}

const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];

/** The URL with its password masked (`mysql://root:***@host/db`), for anything printed. */
export function maskUrl(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/@\s]*):[^@/\s]*@/i, "$1:***@");
}

/** Every `scheme://user:password@` in a text, its password masked. */
export function maskSecrets(text: string): string {
  return text.replace(/([a-z][a-z0-9+.-]*:\/\/[^:/@\s]*):[^@/\s]*@/gi, "$1:***@");
}

/** The database URL, checked: a supported scheme and, for MySQL, a host and a database name. */
function databaseUrl(raw: string): string {
  if (raw.startsWith("sqlite:")) {
    if (raw === "sqlite:") throw new ConfigError("DATABASE_URL 'sqlite:' names no file: use sqlite:<path> (e.g. sqlite:./data/cardctl.sqlite) or sqlite::memory:");
    return raw;
  }
  if (/^(mysql|mariadb):\/\//.test(raw)) {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw new ConfigError(`DATABASE_URL '${maskUrl(raw)}' is not a valid URL: use mysql://user:pass@host:port/db (percent-encode special characters in the password)`);
    }
    if (!url.hostname) throw new ConfigError(`DATABASE_URL '${maskUrl(raw)}' names no host: use mysql://user:pass@host:port/db`);
    if (url.pathname.replace(/^\//, "") === "")
      throw new ConfigError(`DATABASE_URL '${maskUrl(raw)}' names no database: add it, as in mysql://user:pass@${url.host}/cardctl`);
    return raw;
  }
  throw new ConfigError(
    `DATABASE_URL '${maskUrl(raw)}' is not supported: use sqlite:<path>, sqlite::memory: or mysql://user:pass@host:port/db (MySQL 8 / MariaDB 10.11)`,
  );
}

/** Holds last about 7 days, 5 for some Visa merchant-initiated payments: cards close within 4. */
const MAX_CARD_TTL_SECONDS = 4 * 24 * 3600;

function flag(env: NodeJS.ProcessEnv, name: string): boolean {
  const raw = (env[name] ?? "").toLowerCase();
  if (raw === "" || raw === "0" || raw === "false" || raw === "no") return false;
  if (raw === "1" || raw === "true" || raw === "yes") return true;
  throw new ConfigError(`${name} must be 1 or 0 (true or false), got '${env[name]}'`);
}

function int(env: NodeJS.ProcessEnv, name: string, fallback: number, min = 0, max = Number.MAX_SAFE_INTEGER): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max)
    throw new ConfigError(`${name} must be an integer from ${min}${max < Number.MAX_SAFE_INTEGER ? ` to ${max}` : " up"}, got '${raw}'`);
  return n;
}

/** TRUST_PROXY: unset, a number of hops, or comma-separated addresses and CIDR ranges of the proxies. */
function trustProxy(env: NodeJS.ProcessEnv): string[] | number | undefined {
  const raw = (env.TRUST_PROXY ?? "").trim();
  if (raw === "") return undefined;
  if (/^\d+$/.test(raw)) {
    const hops = Number(raw);
    if (hops >= 1 && hops <= 10) return hops;
  }
  const entries = raw.split(",").map((entry) => entry.trim());
  const valid = (entry: string) => {
    const [address, prefix, ...rest] = entry.split("/");
    const family = isIP(address ?? "");
    if (family === 0 || rest.length > 0) return false;
    return prefix === undefined || (/^\d+$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128));
  };
  const bad = entries.filter((entry) => !valid(entry));
  if (bad.length > 0)
    throw new ConfigError(
      `TRUST_PROXY must be the addresses or CIDR ranges of your proxies (e.g. 127.0.0.1,10.0.0.0/8) or how many hops sit in front of the server (1 to 10), got '${bad.join(",")}'`,
    );
  return entries;
}

/** STRIPE_TEST_PUBLISHABLE_KEY / STRIPE_LIVE_PUBLISHABLE_KEY: unset, or a pk_test_… / pk_live_… key. */
function publishableKey(env: NodeJS.ProcessEnv, mode: "test" | "live"): string | undefined {
  const name = `STRIPE_${mode.toUpperCase()}_PUBLISHABLE_KEY`;
  const raw = env[name];
  if (!raw) return undefined;
  if (!new RegExp(`^pk_${mode}_[A-Za-z0-9]+$`).test(raw))
    throw new ConfigError(`${name} must be a Stripe publishable key starting with pk_${mode}_ (Stripe Dashboard → Developers → API keys), got '${raw.slice(0, 8)}…'`);
  return raw;
}

/**
 * Reads and checks every setting; a bad one throws a ConfigError naming it. `isTTY` (stdout's)
 * picks the default LOG_FORMAT.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, isTTY: boolean = process.stdout.isTTY === true): Config {
  const port = int(env, "PORT", 4000, 0, 65535);
  const host = env.HOST || "127.0.0.1";
  const processor = env.PROCESSOR || "simulated";
  if (processor !== "simulated" && processor !== "stripe") throw new ConfigError(`PROCESSOR must be 'simulated' or 'stripe', got '${processor}'`);
  const logLevel = env.LOG_LEVEL || "info";
  if (!LOG_LEVELS.includes(logLevel)) throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(", ")}, got '${logLevel}'`);
  const logFormat = env.LOG_FORMAT || (isTTY ? "pretty" : "json");
  if (logFormat !== "pretty" && logFormat !== "json") throw new ConfigError(`LOG_FORMAT must be 'pretty' or 'json', got '${logFormat}'`);
  const publicUrl = (env.PUBLIC_URL || `http://${host}:${port}`).replace(/\/$/, "");
  if (env.PUBLIC_URL && !/^https?:\/\/[^/\s]+/.test(publicUrl))
    throw new ConfigError(`PUBLIC_URL must be an http:// or https:// URL (the base of setup_url and links), got '${maskUrl(env.PUBLIC_URL)}'`);
  return {
    port,
    host,
    databaseUrl: databaseUrl(env.DATABASE_URL || "sqlite:./data/cardctl.sqlite"),
    adminToken: env.ADMIN_TOKEN || undefined,
    redisUrl: env.REDIS_URL || undefined,
    processor,
    stripeTestSecretKey: env.STRIPE_TEST_SECRET_KEY || undefined,
    stripeLiveSecretKey: env.STRIPE_LIVE_SECRET_KEY || undefined,
    stripeTestPublishableKey: publishableKey(env, "test"),
    stripeLivePublishableKey: publishableKey(env, "live"),
    stripeApiBase: env.STRIPE_API_BASE || undefined,
    stripeWebhookSecrets: (env.STRIPE_WEBHOOK_SECRET ?? "").split(",").map((secret) => secret.trim()).filter(Boolean),
    approvalTtlSeconds: int(env, "APPROVAL_TTL_SECONDS", 86400, 1),
    cardTtlSeconds: int(env, "CARD_TTL_SECONDS", 86400, 1, MAX_CARD_TTL_SECONDS),
    rateLimitPerHour: int(env, "RATE_LIMIT_PER_HOUR", 1000, 1),
    publicUrl,
    processorTimeoutMs: int(env, "PROCESSOR_TIMEOUT_MS", 10000, 1),
    requestTimeoutMs: int(env, "REQUEST_TIMEOUT_MS", 30000, 1000),
    creationLeaseMs: int(env, "CREATION_LEASE_MS", 60000, 1),
    maintenanceIntervalMs: int(env, "MAINTENANCE_INTERVAL_MS", 30000),
    trustProxy: trustProxy(env),
    webhookAllowPrivate: flag(env, "WEBHOOK_ALLOW_PRIVATE"),
    webhookTimeoutMs: int(env, "WEBHOOK_TIMEOUT_MS", 10000, 100),
    webhookRetryBaseMs: int(env, "WEBHOOK_RETRY_BASE_MS", 5000, 1),
    webhookRetryWindowMs: int(env, "WEBHOOK_RETRY_WINDOW_MS", 3 * 24 * 3600 * 1000, 1),
    webhookPollMs: int(env, "WEBHOOK_POLL_MS", 500, 10),
    eventStreamHeartbeatMs: int(env, "EVENT_STREAM_HEARTBEAT_MS", 15000, 100),
    eventStreamPollMs: int(env, "EVENT_STREAM_POLL_MS", 500, 10),
    logLevel,
    logFormat,
  };
}
