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
  stripeWebhookSecrets: WebhookSecret[];
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

/** The URL, or undefined when it does not parse. */
function parseUrl(raw: string): URL | undefined {
  try {
    return new URL(raw);
  } catch {
    return undefined;
  }
}

/**
 * Whether the parser read part of the credentials as the path, query or fragment: an `@` past
 * the host (a password with `/`, `?` or `#` parses as host, port and path).
 */
const credentialsPastHost = (url: URL) => (url.pathname + url.search + url.hash).includes("@");

/**
 * The URL with its password masked (`mysql://root:***@host/db`), for anything printed. A URL that
 * does not parse, or parses wrong, is masked from its `user:` (or its `://`) to its last `@`.
 */
export function maskUrl(url: string): string {
  const parsed = parseUrl(url);
  if (parsed && !credentialsPastHost(parsed)) {
    if (!parsed.password) return url;
    parsed.password = "***";
    return parsed.href;
  }
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/)([^:/@]*:)?.*@/i, "$1$2***@");
}

/** Every URL in a text (up to a space or a quote), its password masked. */
export function maskSecrets(text: string): string {
  return text.replace(/[a-z][a-z0-9+.-]*:\/\/[^\s'"`]+/gi, maskUrl);
}

/** The database URL, checked: a supported scheme and, for MySQL, a host and a database name. */
function databaseUrl(raw: string): string {
  if (raw.startsWith("sqlite:")) {
    if (raw === "sqlite:") throw new ConfigError("DATABASE_URL 'sqlite:' names no file: use sqlite:<path> (e.g. sqlite:./data/cardctl.sqlite) or sqlite::memory:");
    return raw;
  }
  if (/^(mysql|mariadb):\/\//.test(raw)) {
    const url = parseUrl(raw);
    if (!url || credentialsPastHost(url))
      throw new ConfigError(`DATABASE_URL '${maskUrl(raw)}' is not a valid URL: use mysql://user:pass@host:port/db (percent-encode special characters in the password)`);
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

const MINUTE_MS = 60_000;
/** CREATION_LEASE_MS is at least this many processor timeouts. */
const LEASE_PER_TIMEOUT = 4;
const HOUR_MS = 60 * MINUTE_MS;
const DAY_MS = 24 * HOUR_MS;

function flag(env: NodeJS.ProcessEnv, name: string): boolean {
  const raw = (env[name] ?? "").toLowerCase();
  if (raw === "" || raw === "0" || raw === "false" || raw === "no") return false;
  if (raw === "1" || raw === "true" || raw === "yes") return true;
  throw new ConfigError(`${name} must be 1 or 0 (true or false), got '${env[name]}'`);
}

/**
 * A whole number in [min, max], written in decimal digits (Number() would take ' ', 0x12A0 or 4e3).
 * Every number has a ceiling: past it dates overflow (an approval's expiry) or timers of more
 * than 2^31-1 ms fire at once.
 */
function int(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const range = `an integer from ${min} to ${max}`;
  const digits = raw.trim();
  if (digits === "") throw new ConfigError(`${name} is blank: set it to ${range}, or unset it for the default (${fallback})`);
  const n = /^\d+$/.test(digits) ? Number(digits) : NaN;
  if (!(n >= min && n <= max)) throw new ConfigError(`${name} must be ${range}, got '${raw}'`);
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

/** What a Stripe key starts with (`sk_live_`), to say which kind was given without printing it. */
function keyKind(raw: string): string {
  const prefix = /^(?:[a-z]{2}_(?:test|live)_|whsec_)/.exec(raw)?.[0];
  return prefix ? `'${prefix}…'` : "something that is not a Stripe key";
}

/** STRIPE_TEST_PUBLISHABLE_KEY / STRIPE_LIVE_PUBLISHABLE_KEY: unset, or a pk_test_… / pk_live_… key. */
function publishableKey(env: NodeJS.ProcessEnv, mode: "test" | "live"): string | undefined {
  const name = `STRIPE_${mode.toUpperCase()}_PUBLISHABLE_KEY`;
  const raw = env[name];
  if (!raw) return undefined;
  if (!new RegExp(`^pk_${mode}_[A-Za-z0-9]+$`).test(raw))
    throw new ConfigError(`${name} must be a Stripe publishable key starting with pk_${mode}_ (Stripe Dashboard → Developers → API keys), got ${keyKind(raw)}`);
  return raw;
}

/**
 * STRIPE_TEST_SECRET_KEY / STRIPE_LIVE_SECRET_KEY: unset, or a secret (sk_) or restricted (rk_)
 * key of that mode; a live key in the test setting would run test-mode work on real money.
 */
function secretKey(env: NodeJS.ProcessEnv, mode: "test" | "live"): string | undefined {
  const name = `STRIPE_${mode.toUpperCase()}_SECRET_KEY`;
  const raw = env[name];
  if (!raw) return undefined;
  if (!new RegExp(`^[sr]k_${mode}_\\S+$`).test(raw))
    throw new ConfigError(
      `${name} must be a ${mode}-mode Stripe secret key, starting with sk_${mode}_ or rk_${mode}_ (Stripe Dashboard → Developers → API keys, in ${mode} mode), got ${keyKind(raw)}`,
    );
  return raw;
}

/** A Stripe endpoint's signing secret, and the mode of the events it may sign (either, when it came without one). */
export interface WebhookSecret {
  secret: string;
  mode: "test" | "live" | undefined;
}

/**
 * STRIPE_TEST_WEBHOOK_SECRET / STRIPE_LIVE_WEBHOOK_SECRET: the signing secrets (whsec_…,
 * comma-separated) of each mode's Stripe endpoints; an event signed with one must be of its mode,
 * so the test endpoint's secret (shared with developers, CI, `stripe listen`) cannot sign live
 * money. STRIPE_WEBHOOK_SECRET, the older setting, signs for either mode.
 */
function webhookSecrets(env: NodeJS.ProcessEnv): WebhookSecret[] {
  const settings = [
    ["STRIPE_TEST_WEBHOOK_SECRET", "test"],
    ["STRIPE_LIVE_WEBHOOK_SECRET", "live"],
    ["STRIPE_WEBHOOK_SECRET", undefined],
  ] as const;
  return settings.flatMap(([name, mode]) => {
    const secrets = (env[name] ?? "").split(",").map((secret) => secret.trim()).filter(Boolean);
    const bad = secrets.find((secret) => !/^whsec_\S+$/.test(secret));
    if (bad !== undefined)
      throw new ConfigError(
        `${name} must be Stripe webhook signing secrets, each starting with whsec_ (comma-separated, one per endpoint: Stripe Dashboard → Developers → Webhooks), got ${keyKind(bad)}`,
      );
    return secrets.map((secret) => ({ secret, mode }));
  });
}

/**
 * ADMIN_TOKEN: unset (one is generated), or a token a client can send. A Bearer credential is one
 * run of non-space characters, and headers carry ASCII only: any other token could never match.
 */
function adminToken(env: NodeJS.ProcessEnv): string | undefined {
  const raw = env.ADMIN_TOKEN;
  if (!raw) return undefined;
  if (!/^[\x21-\x7e]+$/.test(raw))
    throw new ConfigError(
      "ADMIN_TOKEN must be printable ASCII with no whitespace: a client sends it as 'Authorization: Bearer <ADMIN_TOKEN>', which could not carry it; fix it, or unset it to have one generated",
    );
  if (raw.length < 16)
    throw new ConfigError(`ADMIN_TOKEN must be at least 16 characters (it has ${raw.length}): use a long random value (openssl rand -hex 32), or unset it to have one generated`);
  return raw;
}

/**
 * PUBLIC_URL, or `http://HOST:PORT` (an IPv6 HOST in brackets), checked: the base of setup_url
 * and links, so http(s) with no query, fragment or credentials. Returned as the parser wrote it,
 * without a trailing slash.
 */
function publicUrl(env: NodeJS.ProcessEnv, host: string, port: number): string {
  const raw = env.PUBLIC_URL;
  const url = parseUrl(raw || `http://${isIP(host) === 6 ? `[${host}]` : host}:${port}`);
  if (!raw && !url) throw new ConfigError(`HOST '${host}' gives no valid default PUBLIC_URL (http://HOST:PORT): set HOST to an address or name of this machine, or set PUBLIC_URL`);
  if (raw) {
    const got = `got '${maskUrl(raw)}'`;
    if (!url || (url.protocol !== "http:" && url.protocol !== "https:"))
      throw new ConfigError(`PUBLIC_URL must be an http:// or https:// URL (the base of setup_url and links), ${got}`);
    if (/[?#]/.test(url.href)) throw new ConfigError(`PUBLIC_URL must have no query (?…) or fragment (#…): it is the base of setup_url and links, ${got}`);
    if (url.username || url.password) throw new ConfigError(`PUBLIC_URL must have no user or password: it is shown in links to everyone, ${got}`);
  }
  return url!.href.replace(/\/$/, "");
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
  const stripeTestSecretKey = secretKey(env, "test");
  const stripeLiveSecretKey = secretKey(env, "live");
  if (processor === "stripe" && !stripeTestSecretKey && !stripeLiveSecretKey)
    throw new ConfigError(
      "PROCESSOR=stripe needs STRIPE_TEST_SECRET_KEY or STRIPE_LIVE_SECRET_KEY (Stripe Dashboard → Developers → API keys): without either, every card call would answer 503 processor_not_configured",
    );
  const logLevel = env.LOG_LEVEL || "info";
  if (!LOG_LEVELS.includes(logLevel)) throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(", ")}, got '${logLevel}'`);
  const logFormat = env.LOG_FORMAT || (isTTY ? "pretty" : "json");
  if (logFormat !== "pretty" && logFormat !== "json") throw new ConfigError(`LOG_FORMAT must be 'pretty' or 'json', got '${logFormat}'`);
  const processorTimeoutMs = int(env, "PROCESSOR_TIMEOUT_MS", 10000, 1, 10 * MINUTE_MS);
  const creationLeaseMs = int(env, "CREATION_LEASE_MS", 60000, 1, HOUR_MS);
  // A card's creation makes up to four processor calls in a row (a card taken over: its hold's
  // lookup, the hold, its card's lookup, the mint): a lease shorter would hand an attempt still at
  // the processor to another.
  if (creationLeaseMs < LEASE_PER_TIMEOUT * processorTimeoutMs)
    throw new ConfigError(
      `CREATION_LEASE_MS (${creationLeaseMs}) must be at least ${LEASE_PER_TIMEOUT} x PROCESSOR_TIMEOUT_MS (${processorTimeoutMs}): a request still at the processor would be taken over. Raise CREATION_LEASE_MS to ${LEASE_PER_TIMEOUT * processorTimeoutMs} or more, or lower PROCESSOR_TIMEOUT_MS`,
    );
  return {
    port,
    host,
    databaseUrl: databaseUrl(env.DATABASE_URL || "sqlite:./data/cardctl.sqlite"),
    adminToken: adminToken(env),
    redisUrl: env.REDIS_URL || undefined,
    processor,
    stripeTestSecretKey,
    stripeLiveSecretKey,
    stripeTestPublishableKey: publishableKey(env, "test"),
    stripeLivePublishableKey: publishableKey(env, "live"),
    stripeApiBase: env.STRIPE_API_BASE || undefined,
    stripeWebhookSecrets: webhookSecrets(env),
    approvalTtlSeconds: int(env, "APPROVAL_TTL_SECONDS", 86400, 1, 30 * 24 * 3600) /* 30 days */,
    cardTtlSeconds: int(env, "CARD_TTL_SECONDS", 86400, 1, MAX_CARD_TTL_SECONDS),
    rateLimitPerHour: int(env, "RATE_LIMIT_PER_HOUR", 1000, 1, 1_000_000_000),
    publicUrl: publicUrl(env, host, port),
    processorTimeoutMs,
    requestTimeoutMs: int(env, "REQUEST_TIMEOUT_MS", 30000, 1000, HOUR_MS),
    creationLeaseMs,
    maintenanceIntervalMs: int(env, "MAINTENANCE_INTERVAL_MS", 30000, 0, DAY_MS),
    trustProxy: trustProxy(env),
    webhookAllowPrivate: flag(env, "WEBHOOK_ALLOW_PRIVATE"),
    webhookTimeoutMs: int(env, "WEBHOOK_TIMEOUT_MS", 10000, 100, 10 * MINUTE_MS),
    webhookRetryBaseMs: int(env, "WEBHOOK_RETRY_BASE_MS", 5000, 1, 6 * HOUR_MS) /* the longest delay */,
    // A day inside the 30 days events are kept: the last attempt, and the endpoint's disabling, come before the purge.
    webhookRetryWindowMs: int(env, "WEBHOOK_RETRY_WINDOW_MS", 3 * DAY_MS, 1, 29 * DAY_MS),
    webhookPollMs: int(env, "WEBHOOK_POLL_MS", 500, 10, HOUR_MS),
    eventStreamHeartbeatMs: int(env, "EVENT_STREAM_HEARTBEAT_MS", 15000, 100, HOUR_MS),
    eventStreamPollMs: int(env, "EVENT_STREAM_POLL_MS", 500, 10, HOUR_MS),
    logLevel,
    logFormat,
  };
}
