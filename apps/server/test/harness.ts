import { randomToken } from "@cardctl/api";
import mysql from "mysql2/promise";
import { buildApp, loadConfig, type App, type AppOptions } from "../src/app.js";
import { faults, startFakeStripe, type FakeStripe } from "./fake-stripe.js";

/** TEST_DATABASE_URL=mysql://root@127.0.0.1:3306/ runs every suite on a throwaway MariaDB database. */
const TEST_DB = process.env.TEST_DATABASE_URL ?? "sqlite::memory:";
export const dbKind = TEST_DB.startsWith("mysql") ? "mysql" : "sqlite";
/** TEST_PROCESSOR=stripe runs the suites that do not choose a processor on Stripe, against the local fake. */
export const processor: "simulated" | "stripe" = process.env.TEST_PROCESSOR === "stripe" ? "stripe" : "simulated";
export const ADMIN_TOKEN = "adm_test_0123456789abcdefghijklmnopqrstuv";

export interface Reply<T = any> {
  status: number;
  headers: Headers;
  body: T;
}

/** The cardholder details accounts get through newAccount when the server runs on Stripe. */
export const TEST_CARDHOLDER = {
  type: "company" as const,
  name: "Acme Robotics",
  email: "ops@acme.example",
  billing: { line1: "1 Main Street", city: "Springfield", state: "IL", postal_code: "62701", country: "US" },
  tax_id: "12-3456789",
};

export interface RequestOptions {
  body?: unknown;
  /** Sent as is, instead of JSON.stringify(body). */
  rawBody?: string;
  /** API key; defaults to the demo account's full test key. null sends no Authorization header. */
  key?: string | null;
  headers?: Record<string, string>;
}

export type ProbeStep = "hold" | "mint" | "revoke" | "capture" | "cancel" | "ephemeral_key" | "charge" | "refund";
/** A hold as the processor sees it; status is one of requires_capture, captured, canceled. */
export interface ProbeHold {
  status: string;
  /** What the processor holds (Stripe: at least its minimum charge). */
  amount_cents: number;
  /** Net captured: what the payment method is charged in the end. */
  captured_cents: number;
}

/**
 * The processor's own view of holds and cards, and its fault injection, the same for both
 * processors: the simulated one (its sim_* tables and setFault) and Stripe (the fake's objects and
 * failures). States use one vocabulary: holds requires_capture | captured | canceled, cards
 * active | inactive | canceled.
 */
export interface ProcessorProbe {
  readonly kind: "simulated" | "stripe";
  /** What hold ids (cards.hold_id) look like at this processor. */
  readonly holdIdPattern: RegExp;
  /** A test payment method this processor declines, and the decline code it answers. */
  readonly declined: { paymentMethod: string; declineCode: string };
  /** The holds made under our card's hold key: none, or exactly one. */
  holds(cardId: string): Promise<ProbeHold[]>;
  /** One hold by its processor id (cards.hold_id). */
  hold(holdId: string): Promise<ProbeHold | undefined>;
  /** Statuses of the processor cards made for our card. */
  cards(cardId: string): Promise<string[]>;
  /** Status of one processor card by its id (cards.processor_card_id). */
  card(processorCardId: string): Promise<string | undefined>;
  /** How many holds the processor has made in all. */
  holdCount(): Promise<number>;
  /** The processor cancels a hold on its own (it lapsed), before any news of it reaches us. */
  lapse(holdId: string): Promise<void>;
  /** Every following call of a step fails (an error, → 502) or hangs (never answers), until clear(). */
  fail(step: ProbeStep, fault: "fail" | "hang" | "decline"): void;
  /** The next call of a step does its work and its answer is lost (Stripe: no answer until the timeout). */
  lose(step: ProbeStep): void;
  clear(): void;
  /** How many calls of a step have reached the processor so far (a hanging one included). */
  calls(step: ProbeStep): number;
}

/** Rows of one SQL statement on the server's own database. */
const queryOf =
  (app: App) =>
  (sql: string, params: unknown[] = []) =>
    app.ds.query(sql, params) as Promise<any[]>;

function simulatedProbe(app: App): ProcessorProbe {
  const q = queryOf(app);
  const hold = (h: any): ProbeHold => ({ status: h.status, amount_cents: Number(h.amount_cents), captured_cents: Number(h.captured_cents) });
  return {
    kind: "simulated",
    holdIdPattern: /^pi_sim_/,
    declined: { paymentMethod: "pm_card_decline", declineCode: "card_declined" },
    holds: async (cardId) =>
      (await q("SELECT status, amount_cents, captured_cents FROM sim_holds WHERE idempotency_key = ? OR idempotency_key LIKE ?", [`${cardId}:hold`, `${cardId}:hold:%`])).map(hold),
    hold: async (holdId) => (await q("SELECT status, amount_cents, captured_cents FROM sim_holds WHERE id = ?", [holdId])).map(hold)[0],
    cards: async (cardId) => (await q("SELECT status FROM sim_cards WHERE card_ref = ?", [cardId])).map((c) => c.status as string),
    card: async (id) => (await q("SELECT status FROM sim_cards WHERE id = ?", [id]))[0]?.status,
    holdCount: async () => Number((await q("SELECT COUNT(*) AS n FROM sim_holds"))[0].n),
    lapse: async (holdId) => void (await q("UPDATE sim_holds SET status = 'canceled' WHERE id = ?", [holdId])),
    fail: (step, fault) => app.simulated.setFault(step, fault),
    lose: (step) => app.simulated.setFault(step, "lost"),
    clear: () => {
      for (const step of ["hold", "mint", "revoke", "capture", "cancel", "ephemeral_key", "charge", "refund"] as const) app.simulated.setFault(step, null);
    },
    calls: (step) => app.simulated.calls(step),
  };
}

/** The adapter's call for each step, as the fake names its routes. */
const STRIPE_ROUTES: Record<ProbeStep, string> = {
  hold: "payment_intents.create",
  mint: "issuing.cards.create",
  revoke: "issuing.cards.update",
  capture: "payment_intents.capture",
  cancel: "payment_intents.cancel",
  ephemeral_key: "ephemeral_keys.create",
  // An off-session charge is a PaymentIntent too: a fault on it hits holds as well.
  charge: "payment_intents.create",
  refund: "refunds.create",
};

function stripeProbe(fake: FakeStripe): ProcessorProbe {
  const hold = (id: string | undefined): ProbeHold | undefined => {
    const pi = id ? fake.paymentIntents.get(id) : undefined;
    if (!pi) return undefined;
    const status = pi.status === "succeeded" ? "captured" : pi.status;
    return { status, amount_cents: pi.amount, captured_cents: pi.amount_received - fake.refunded(pi.id) };
  };
  return {
    kind: "stripe",
    holdIdPattern: /^pi_[A-Za-z0-9]+$/,
    // Stripe's test payment method for a generic decline.
    declined: { paymentMethod: "pm_card_visa_chargeDeclined", declineCode: "generic_decline" },
    // Holds carry our card id in their metadata, whatever key made them.
    holds: async (cardId) =>
      [...fake.paymentIntents.values()].filter((pi) => pi.metadata?.card_id === cardId && pi.metadata?.purpose === "hold").map((pi) => hold(pi.id)!),
    hold: async (holdId) => hold(holdId),
    cards: async (cardId) => [...fake.cards.values()].filter((c) => c.metadata.card_id === cardId).map((c) => c.status),
    card: async (id) => fake.cards.get(id)?.status,
    holdCount: async () => fake.paymentIntents.size,
    lapse: async (holdId) => void Object.assign(fake.paymentIntents.get(holdId)!, { status: "canceled", amount_capturable: 0 }),
    fail: (step, fault) =>
      fake.fail(STRIPE_ROUTES[step], fault === "fail" ? faults.serverError() : fault === "decline" ? faults.decline() : faults.hang(), Number.POSITIVE_INFINITY),
    lose: (step) => fake.fail(STRIPE_ROUTES[step], faults.hangAfter()),
    clear: () => fake.clearFaults(),
    calls: (step) => fake.requests.filter((r) => r.route === STRIPE_ROUTES[step]).length,
  };
}

/** A throwaway database: a fresh in-memory SQLite, or a new MariaDB schema dropped on close. */
export async function freshDatabase(): Promise<{ url: string; drop: () => Promise<void> }> {
  if (dbKind === "sqlite") return { url: "sqlite::memory:", drop: async () => undefined };
  const name = `cardctl_t_${randomToken(12).toLowerCase()}`;
  const root = TEST_DB.replace(/\/[^/]*$/, "/");
  const conn = await mysql.createConnection(root);
  await conn.query(`CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4`);
  await conn.end();
  return {
    url: root + name,
    drop: async () => {
      const c = await mysql.createConnection(root);
      await c.query(`DROP DATABASE IF EXISTS \`${name}\``);
      await c.end();
    },
  };
}

/** An HTTP client for a server at `url`; `key` is the default API key (see RequestOptions.key). */
export function requestTo(url: string, defaultKey: string | null) {
  return async function request<T = any>(method: string, path: string, o: RequestOptions = {}): Promise<Reply<T>> {
    const headers: Record<string, string> = { ...o.headers };
    const key = o.key === undefined ? defaultKey : o.key;
    if (key !== null && !("authorization" in headers) && !("Authorization" in headers)) headers.authorization = `Bearer ${key}`;
    let body: string | undefined = o.rawBody;
    if (body === undefined && o.body !== undefined) {
      body = JSON.stringify(o.body);
      headers["content-type"] ??= "application/json";
    }
    const res = await fetch(url + path, { method, headers, body });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      // not JSON: keep the text
    }
    return { status: res.status, headers: res.headers, body: parsed as T };
  };
}

/**
 * The real server on a real port, on a fresh database, with the demo account (setup complete,
 * test mode) seeded. Tests talk to it over HTTP only; `app` is there for asserting on stored state,
 * `processor` for the processor's own state and fault injection, whichever processor runs.
 */
export async function startServer(env: Record<string, string> = {}, opts: AppOptions & { databaseUrl?: string } = {}) {
  const db = opts.databaseUrl ? { url: opts.databaseUrl, drop: async () => undefined } : await freshDatabase();
  // TEST_PROCESSOR=stripe: suites that do not choose a processor run on Stripe, against a local fake.
  // A suite's own STRIPE_TEST_SECRET_KEY is the one the fake accepts.
  const fakeKey = env.STRIPE_TEST_SECRET_KEY || "sk_test_fake";
  const fake = processor === "stripe" && !env.PROCESSOR ? await startFakeStripe(fakeKey) : undefined;
  if (fake) env = { PROCESSOR: "stripe", STRIPE_TEST_SECRET_KEY: fakeKey, STRIPE_API_BASE: fake.url, ...env };
  const config = loadConfig({
    DATABASE_URL: db.url,
    ADMIN_TOKEN,
    PORT: "0",
    PUBLIC_URL: "http://cardctl.test",
    MAINTENANCE_INTERVAL_MS: "0",
    LOG_LEVEL: "silent",
    ...env,
  });
  const app: App = await buildApp(config, opts);
  await app.app.listen({ port: config.port, host: "127.0.0.1" });
  const address = app.app.server.address();
  const url = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`;
  const apiKey = app.boot.created.demoApiKey!;
  const accountId = app.boot.created.demoAccountId!;

  const request = requestTo(url, apiKey);

  const admin = <T = any>(method: string, path: string, body?: unknown) =>
    request<T>(method, `/admin/v1${path}`, { body, headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, key: null });

  const onStripe = config.processor === "stripe";

  /**
   * A new account through the operator API; setup complete unless told otherwise. On Stripe that
   * includes the cardholder (TEST_CARDHOLDER unless `cardholder` says otherwise; null: none); on
   * the simulated processor the cardholder is set only when `cardholder` is given.
   */
  async function newAccount(o: { kyb?: boolean; paymentMethod?: string | null; name?: string; cardholder?: object | null } = {}) {
    const account = (await admin("POST", "/accounts", { name: o.name ?? "Test account" })).body;
    if (o.kyb !== false) await admin("POST", `/accounts/${account.id}/kyb`, { verified: true });
    const pm = o.paymentMethod === undefined ? "pm_card_visa" : o.paymentMethod;
    if (pm) await admin("POST", `/accounts/${account.id}/payment_method`, { payment_method: pm });
    const cardholder = o.cardholder === undefined ? (onStripe ? TEST_CARDHOLDER : null) : o.cardholder;
    if (cardholder) {
      const set = await admin("POST", `/accounts/${account.id}/cardholder`, cardholder);
      if (set.status !== 200) throw new Error(`setting the cardholder failed: ${set.status} ${JSON.stringify(set.body)}`);
    }
    const key = async (mode: "test" | "live" = "test", role: "full" | "agent" = "full") =>
      (await admin("POST", `/accounts/${account.id}/keys`, { mode, role })).body.secret as string;
    return { id: account.id as string, key };
  }

  return {
    url,
    app,
    apiKey,
    accountId,
    request,
    admin,
    newAccount,
    /** Rows of one SQL statement on the server's database (what the API does not show). */
    query: queryOf(app),
    /** The processor's own state and fault injection (see ProcessorProbe). */
    processor: fake ? stripeProbe(fake) : simulatedProbe(app),
    /** The fake Stripe API when the suite runs on Stripe (TEST_PROCESSOR=stripe). */
    fake,
    /** Whether this server issues on Stripe (its own PROCESSOR=stripe, or TEST_PROCESSOR=stripe). */
    onStripe,
    async close() {
      await app.app.close();
      await fake?.close();
      await db.drop();
    },
  };
}

export type TestServer = Awaited<ReturnType<typeof startServer>>;

/** Asserts the one error envelope: exactly {error: {code, message, details?, request_id}}. */
export function expectError(reply: Reply, status: number, code: string) {
  const problems: string[] = [];
  if (reply.status !== status) problems.push(`status ${reply.status} != ${status}`);
  const b = reply.body;
  if (!b || typeof b !== "object" || Object.keys(b).join() !== "error") problems.push(`top-level keys ${Object.keys(b ?? {})}`);
  else {
    const e = b.error;
    const keys = Object.keys(e).filter((k) => !["code", "message", "details", "request_id"].includes(k));
    if (keys.length) problems.push(`extra error keys ${keys}`);
    if (e.code !== code) problems.push(`code ${e.code} != ${code}`);
    if (typeof e.message !== "string" || !e.message) problems.push("message missing");
    if (!/^req_/.test(e.request_id ?? "")) problems.push("request_id missing");
    if (e.request_id !== reply.headers.get("request-id")) problems.push("request_id differs from Request-Id header");
  }
  if (problems.length) throw new Error(`${problems.join("; ")}\nbody: ${JSON.stringify(b)}`);
  return b.error as { code: string; message: string; details?: any; request_id: string };
}
