/**
 * `npm run bench`: load the real server, beside a bare-Fastify baseline on the same database.
 *
 * For SQLite (always) and MariaDB (when 127.0.0.1:3306 answers), on a fresh database each:
 *  1. starts the real server as its own process (node --import tsx apps/server/src/main.ts,
 *     port 0, LOG_LEVEL=warn, RATE_LIMIT_PER_HOUR very high, MAINTENANCE_INTERVAL_MS=0);
 *  2. seeds through the operator API three accounts (setup complete, one full test key each)
 *     holding 10,000, 100 and 100,000 cards; the cards are inserted with direct multi-row SQL into
 *     the server's (already migrated) database, which takes seconds instead of minutes through
 *     POST /v1/cards. 2% are OPEN with an open hold, the rest USED or CLOSED, like a long history;
 *  3. starts bench/baseline.ts (its own process) on the same database;
 *  4. drives autocannon from this process (separate from both servers) for each case, with a
 *     short unrecorded warm-up, and prints req/s, p50, p99 and the ratio to the baseline;
 *  5. measures Stripe's real-time authorization webhook (signed issuing_authorization.request
 *     events on the seeded OPEN cards) while POST /v1/cards runs at full speed beside it;
 *  6. on the first database, tops the server up to 200,000 requests and reads its VmRSS.
 * Results go to bench/results/<timestamp>.json and the summary table of BENCHMARKS.md.
 *
 * Knobs (env): BENCH_DURATION (s, default 10), BENCH_CONNECTIONS (10), BENCH_DB (sqlite,mysql),
 * BENCH_ONLY (substring filter on case names), BENCH_MEMORY_REQUESTS (200000; 0 skips),
 * BENCH_CPU_PROF=<dir> (server runs with --cpu-prof into <dir>), BENCH_NO_WRITE=1 (no json/md).
 *
 * `npm run bench:layers` (BENCH_LAYERS=1) measures instead where GET /v1/balance's time goes: the
 * server is bench/layers-server.ts (the same app plus routes that stop at shallower layers), the
 * cases run interleaved in BENCH_ROUNDS rounds (3) and the medians are printed; nothing is written.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { cpus, tmpdir, totalmem } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import autocannon from "autocannon";
import Stripe from "stripe";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const DURATION = Number(process.env.BENCH_DURATION ?? 10);
const WARMUP = Math.min(2, Math.max(1, Math.round(DURATION / 5)));
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);
const ONLY = process.env.BENCH_ONLY;
const MEMORY_REQUESTS = Number(process.env.BENCH_MEMORY_REQUESTS ?? 200_000);
const CPU_PROF = process.env.BENCH_CPU_PROF;
const LAYERS = process.env.BENCH_LAYERS === "1";
const ROUNDS = LAYERS ? Number(process.env.BENCH_ROUNDS ?? 3) : 1;
const ADMIN_TOKEN = `adm_bench_${randomBytes(16).toString("hex")}`;
const MYSQL_ROOT = "mysql://root@127.0.0.1:3306/";
const WEBHOOK_SECRET = `whsec_bench_${randomBytes(16).toString("hex")}`;
const AUTHORIZATION_CASE = "issuing_authorization.request beside POST /v1/cards";
const WEBHOOKS_NONE = "POST /v1/cards, no webhook endpoints";
const WEBHOOKS_THREE = "POST /v1/cards, 3 webhook endpoints (1 hanging)";

// ---------------------------------------------------------------- processes

interface Proc {
  child: ChildProcess;
  url: string;
  stop(): Promise<void>;
}

/** Spawns node with tsx and waits for "<banner> <url>" on stdout. */
function startProcess(script: string, env: Record<string, string>, banner: RegExp, extraArgs: string[] = []): Promise<Proc> {
  const child = spawn(process.execPath, [...extraArgs, "--import", "tsx", script], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  return new Promise((resolveStart, reject) => {
    const timer = setTimeout(() => reject(new Error(`${script} did not start:\n${out}\n${err}`)), 60_000);
    child.stderr!.on("data", (d) => {
      err += d;
      if (err.length > 20_000) err = err.slice(-10_000);
    });
    child.stdout!.on("data", (d) => {
      out += d;
      const m = banner.exec(out);
      if (m) {
        clearTimeout(timer);
        child.stdout!.removeAllListeners("data");
        child.stdout!.resume();
        resolveStart({
          child,
          url: m[1]!,
          stop: () =>
            new Promise<void>((done) => {
              if (child.exitCode !== null) return done();
              child.once("exit", () => done());
              child.kill("SIGINT");
              setTimeout(() => child.exitCode === null && child.kill("SIGKILL"), 15_000).unref();
            }),
        });
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`${script} exited with ${code}:\n${out}\n${err}`));
    });
  });
}

/** CPU time (user + system) of a process in ms, from /proc/<pid>/stat (clock ticks of 10 ms). */
const cpuMs = (pid: number): number => {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
};

const rssMb = (pid: number): number => {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Math.round(Number(m[1]) / 1024) : NaN;
};

// ---------------------------------------------------------------- databases

type Sql = { exec(sql: string, params?: unknown[]): Promise<void>; rows(sql: string): Promise<any[]>; close(): Promise<void> };

async function sqlClient(url: string): Promise<Sql> {
  if (url.startsWith("sqlite:")) {
    const { default: Database } = await import("better-sqlite3");
    const db = new Database(url.slice("sqlite:".length));
    db.pragma("busy_timeout = 5000");
    return {
      exec: async (sql, params = []) => void db.prepare(sql).run(...params),
      rows: async (sql) => db.prepare(sql).all(),
      close: async () => void db.close(),
    };
  }
  const mysql = await import("mysql2/promise");
  const conn = await mysql.createConnection(url);
  return {
    exec: async (sql, params = []) => void (await conn.query(sql, params)),
    rows: async (sql) => (await conn.query(sql))[0] as any[],
    close: () => conn.end(),
  };
}

/**
 * MariaDB writes the seeded rows back to disk in the background for a minute or so; measuring
 * meanwhile charged that work to the first cases. Waits until its dirty pages stop going down.
 */
async function settleInnoDb(sql: Sql) {
  let lowest = Infinity;
  for (let i = 0, still = 0; i < 120 && still < 3; i++) {
    const [row] = await sql.rows("SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_pages_dirty'");
    const dirty = Number(row.Value);
    still = dirty < lowest ? 0 : still + 1;
    lowest = Math.min(lowest, dirty);
    await new Promise((r) => setTimeout(r, 1000));
  }
}

const mariadbAnswers = () =>
  new Promise<boolean>((done) => {
    const s = connect({ host: "127.0.0.1", port: 3306 }, () => (s.destroy(), done(true)));
    s.on("error", () => done(false));
    s.setTimeout(1000, () => (s.destroy(), done(false)));
  });

interface Database {
  kind: "sqlite" | "mysql";
  url: string;
  drop(): Promise<void>;
}

async function freshDatabase(kind: "sqlite" | "mysql", stamp: string): Promise<Database> {
  if (kind === "sqlite") {
    const dir = mkdtempSync(join(tmpdir(), "cardctl-bench-"));
    return { kind, url: `sqlite:${join(dir, "bench.sqlite")}`, drop: async () => rmSync(dir, { recursive: true, force: true }) };
  }
  const name = `cardctl_bench_${stamp.replace(/\W/g, "").toLowerCase()}`;
  const root = await sqlClient(MYSQL_ROOT);
  await root.exec(`CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4`);
  await root.close();
  return {
    kind,
    url: MYSQL_ROOT + name,
    drop: async () => {
      const c = await sqlClient(MYSQL_ROOT);
      await c.exec(`DROP DATABASE IF EXISTS \`${name}\``);
      await c.close();
    },
  };
}

// ---------------------------------------------------------------- seeding

interface Seeded {
  key: string;
  accountId: string;
  cardIds: string[];
  /** The processor card ids of OPEN cards: what Stripe's authorization events name. */
  openProcessorCardIds: string[];
}

async function api(base: string, method: string, path: string, auth: string, body?: unknown) {
  const res = await fetch(base + path, {
    method,
    headers: { authorization: `Bearer ${auth}`, ...(body ? { "content-type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const json: any = await res.json();
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

const token = (n: number) => randomBytes(n).toString("base64url").replace(/[-_]/g, "x").slice(0, n);

/** An account with complete setup and a full test key (operator API), and `cards` cards (direct SQL; none: no `sql`). */
async function seedAccount(base: string, sql: Sql | null, name: string, cards: number): Promise<Seeded> {
  const account = await api(base, "POST", "/admin/v1/accounts", ADMIN_TOKEN, { name });
  await api(base, "POST", `/admin/v1/accounts/${account.id}/kyb`, ADMIN_TOKEN, { verified: true });
  await api(base, "POST", `/admin/v1/accounts/${account.id}/payment_method`, ADMIN_TOKEN, { payment_method: "pm_card_visa" });
  const key = await api(base, "POST", `/admin/v1/accounts/${account.id}/keys`, ADMIN_TOKEN, { mode: "test", role: "full" });
  const cols = [
    "id", "account_id", "mode", "status", "amount_cents", "remaining_cents", "spent_cents", "agent_id", "purpose", "last_four",
    "expiration", "processor_card_id", "hold_id", "hold_status", "revoked_at", "created_at", "closed_at", "used_at", "expires_at",
  ];
  const cardIds: string[] = [];
  const openProcessorCardIds: string[] = [];
  const start = Date.now() - cards * 60_000;
  const BATCH = 500;
  for (let i = 0; i < cards; i += BATCH) {
    const rows: unknown[] = [];
    const n = Math.min(BATCH, cards - i);
    for (let j = 0; j < n; j++) {
      const k = i + j;
      const id = `card_${token(24)}`;
      const at = start + k * 60_000;
      const status = k % 50 === 0 ? "OPEN" : k % 3 === 0 ? "CLOSED" : "USED";
      const amount = 500 + (k % 40) * 100;
      const spent = status === "USED" ? amount - 100 : 0;
      const processorCardId = `ic_${token(24)}`;
      rows.push(
        id, account.id, "test", status, amount, status === "OPEN" ? amount : 0, spent, `agent-${k % 7}`, `bench purchase ${k}`,
        String(1000 + (k % 9000)), "11/29", processorCardId, `pi_sim_${token(24)}`,
        status === "OPEN" ? "OPEN" : status === "USED" ? "CAPTURED" : "RELEASED",
        status === "OPEN" ? null : at + 1000, at, status === "CLOSED" ? at + 1000 : null, status === "USED" ? at + 500 : null,
        // Open cards stay unexpired through the run (the maintenance pass would close them).
        status === "OPEN" ? Date.now() + 86_400_000 : at + 86_400_000,
      );
      if (cardIds.length < 200 && (status === "OPEN" || k % 10 === 1)) cardIds.push(id);
      if (status === "OPEN") openProcessorCardIds.push(processorCardId);
    }
    const tuple = `(${cols.map(() => "?").join(", ")})`;
    await sql!.exec(`INSERT INTO cards (${cols.join(", ")}) VALUES ${Array(n).fill(tuple).join(", ")}`, rows);
  }
  return { key: key.secret, accountId: account.id, cardIds, openProcessorCardIds };
}

// ---------------------------------------------------------------- load

interface Case {
  name: string;
  target: "server" | "baseline";
  /** Name of the baseline case this one is compared to. */
  baseline?: string;
  key: string;
  method?: string;
  path: string | (() => string);
  body?: string | (() => string);
  /** Extra headers per request, given the body (a webhook's signature). */
  headers?: (body: string) => Record<string, string>;
  idempotent?: boolean;
}

interface Result {
  db: string;
  name: string;
  reqPerSec: number;
  p50: number;
  p99: number;
  total: number;
  /** CPU time the answering process spent per request, in µs: robust to other load on the machine. */
  cpuUsPerReq: number;
  non2xx: number;
  errors: number;
  ratio?: number;
}

let requestsToServer = 0;

async function load(c: Case, url: string, opts: { duration?: number; amount?: number }) {
  const pathOf = typeof c.path === "function" ? c.path : () => c.path as string;
  let n = 0;
  const stamp = token(8);
  const result = await autocannon({
    url,
    connections: CONNECTIONS,
    ...(opts.amount ? { amount: opts.amount } : { duration: opts.duration }),
    requests: [
      {
        method: (c.method ?? "GET") as any,
        setupRequest: (req: any) => {
          const body = typeof c.body === "function" ? c.body() : c.body;
          return {
            ...req,
            path: pathOf(),
            headers: {
              authorization: `Bearer ${c.key}`,
              ...(body ? { "content-type": "application/json" } : {}),
              ...(c.idempotent ? { "idempotency-key": `bench-${stamp}-${n++}` } : {}),
              ...(body && c.headers ? c.headers(body) : {}),
            },
            ...(body ? { body } : {}),
          };
        },
      },
    ],
  });
  if (c.target === "server") requestsToServer += result.requests.total;
  return result;
}

async function measure(db: string, c: Case, url: string, pid: number, duration = DURATION): Promise<Result> {
  await load(c, url, { duration: WARMUP });
  const cpu0 = cpuMs(pid);
  const r = await load(c, url, { duration });
  const cpu = cpuMs(pid) - cpu0;
  const out: Result = {
    db,
    name: c.name,
    reqPerSec: Math.round(r.requests.average),
    p50: r.latency.p50,
    p99: r.latency.p99,
    total: r.requests.total,
    cpuUsPerReq: Math.round((cpu * 1000) / Math.max(1, r.requests.total)),
    non2xx: r.non2xx,
    errors: r.errors + r.timeouts,
  };
  process.stdout.write(`  ${db.padEnd(7)} ${c.name.padEnd(34)} ${String(out.reqPerSec).padStart(6)} req/s  p50 ${out.p50} ms  p99 ${out.p99} ms  cpu ${out.cpuUsPerReq} µs/req${out.non2xx || out.errors ? `  non2xx ${out.non2xx} errors ${out.errors}` : ""}\n`);
  return out;
}

/** Two measurements of one case, of equal duration, as one. */
function combine(a: Result, b: Result): Result {
  const total = a.total + b.total;
  return {
    ...a,
    reqPerSec: Math.round((a.reqPerSec + b.reqPerSec) / 2),
    p50: Math.max(a.p50, b.p50),
    p99: Math.max(a.p99, b.p99),
    total,
    cpuUsPerReq: Math.round((a.cpuUsPerReq * a.total + b.cpuUsPerReq * b.total) / Math.max(1, total)),
    non2xx: a.non2xx + b.non2xx,
    errors: a.errors + b.errors,
  };
}

function cases(a: Seeded, small: Seeded, big: Seeded): Case[] {
  const pick = (ids: string[]) => () => ids[Math.floor(Math.random() * ids.length)]!;
  const cardA = pick(a.cardIds);
  const trpcInput = (v: unknown) => `input=${encodeURIComponent(JSON.stringify(v))}`;
  return [
    { name: "baseline balance", target: "baseline", key: a.key, path: "/v1/balance" },
    { name: "GET /v1/balance", target: "server", baseline: "baseline balance", key: a.key, path: "/v1/balance" },
    { name: "GET /trpc/balance.retrieve", target: "server", baseline: "baseline balance", key: a.key, path: "/trpc/balance.retrieve" },
    { name: "baseline list 10k", target: "baseline", key: a.key, path: "/v1/cards?limit=20" },
    { name: "GET /v1/cards?limit=20 (10k)", target: "server", baseline: "baseline list 10k", key: a.key, path: "/v1/cards?limit=20" },
    {
      name: "GET /trpc/cards.list (10k)",
      target: "server",
      baseline: "baseline list 10k",
      key: a.key,
      path: `/trpc/cards.list?${trpcInput({ limit: 20 })}`,
    },
    { name: "baseline list 100", target: "baseline", key: small.key, path: "/v1/cards?limit=20" },
    { name: "GET /v1/cards?limit=20 (100)", target: "server", baseline: "baseline list 100", key: small.key, path: "/v1/cards?limit=20" },
    { name: "baseline list 100k", target: "baseline", key: big.key, path: "/v1/cards?limit=20" },
    { name: "GET /v1/cards?limit=20 (100k)", target: "server", baseline: "baseline list 100k", key: big.key, path: "/v1/cards?limit=20" },
    { name: "baseline get", target: "baseline", key: a.key, path: () => `/v1/cards/${cardA()}` },
    { name: "GET /v1/cards/:id", target: "server", baseline: "baseline get", key: a.key, path: () => `/v1/cards/${cardA()}` },
    {
      name: "GET /trpc/cards.get",
      target: "server",
      baseline: "baseline get",
      key: a.key,
      path: () => `/trpc/cards.get?${trpcInput({ id: cardA() })}`,
    },
    {
      name: "POST /v1/cards",
      target: "server",
      key: a.key,
      method: "POST",
      path: "/v1/cards",
      body: JSON.stringify({ amount_cents: 1500, agent_id: "bench-agent", purpose: "benchmark" }),
      idempotent: true,
    },
  ];
}

/** GET /v1/balance at each depth of the stack (bench/layers-server.ts), beside its baseline. */
function layerCases(a: Seeded): Case[] {
  const layer = (name: string, path: string): Case => ({ name, target: "server", baseline: "baseline balance", key: a.key, path });
  return [
    { name: "baseline balance", target: "baseline", key: a.key, path: "/v1/balance" },
    layer("pipeline, constant body", "/v1/_layers/pipeline"),
    layer("+ domain (balance reads)", "/v1/_layers/domain/balance"),
    layer("+ tRPC procedure (caller)", "/v1/_layers/trpc/balance"),
    layer("+ REST route: GET /v1/balance", "/v1/balance"),
  ];
}

/** The median of each case's rounds (by CPU per request; req/s, p50 and p99 from that round). */
function medians(rounds: Result[]): Result[] {
  const names = [...new Set(rounds.map((r) => r.name))];
  return names.map((name) => {
    const runs = rounds.filter((r) => r.name === name).sort((x, y) => x.cpuUsPerReq - y.cpuUsPerReq);
    return runs[runs.length >> 1]!;
  });
}

/**
 * Stripe's synchronous issuing_authorization.request webhook, signed as Stripe signs it, on the
 * seeded OPEN cards in turn: the first on a card is approved (the card becomes USED), the rest
 * declined; every decision reads the card and records the authorization.
 */
function authorizationCase(a: Seeded): Case {
  let n = 0;
  return {
    name: AUTHORIZATION_CASE,
    target: "server",
    key: "none", // the webhook is authenticated by its signature
    method: "POST",
    path: "/v1/webhooks/stripe",
    body: () => {
      const card = a.openProcessorCardIds[n++ % a.openProcessorCardIds.length]!;
      return JSON.stringify({
        id: `evt_${token(24)}`,
        object: "event",
        api_version: Stripe.API_VERSION,
        created: Math.floor(Date.now() / 1000),
        livemode: false,
        type: "issuing_authorization.request",
        data: {
          object: {
            id: `iauth_${token(24)}`,
            object: "issuing.authorization",
            amount: 0,
            approved: false,
            status: "pending",
            pending_request: { amount: 100 + (n % 400), currency: "usd" },
            merchant_data: { name: "Bench shop", category: "book_stores", country: "US" },
            card,
          },
        },
      });
    },
    headers: (body) => ({ "stripe-signature": Stripe.webhooks.generateTestHeaderString({ payload: body, secret: WEBHOOK_SECRET }) }),
  };
}

/**
 * Card creation on an account without webhook endpoints, then on one with three (two receivers
 * that answer at once, one that never answers): every card's event is delivered three times by the
 * server's worker meanwhile, and the hanging receiver holds its share of the worker's slots.
 */
async function webhookCases(kind: "sqlite" | "mysql", server: Proc): Promise<Result[]> {
  const receiver = await startProcess("bench/webhook-receiver.ts", {}, /receiver listening on (\S+)/);
  try {
    const none = await seedAccount(server.url, null, "Bench webhooks none", 0);
    const three = await seedAccount(server.url, null, "Bench webhooks 3", 0);
    for (const path of ["/ok-1", "/ok-2", "/hang"]) await api(server.url, "POST", "/v1/webhook_endpoints", three.key, { url: receiver.url + path, events: ["*"] });
    const create = (name: string, key: string): Case => ({
      name,
      target: "server",
      key,
      method: "POST",
      path: "/v1/cards",
      body: JSON.stringify({ amount_cents: 1500, agent_id: "bench-agent", purpose: "benchmark" }),
      idempotent: true,
    });
    // In the order none, three, three, none (half the duration each): the database grows during the
    // run and each create costs a little more, which a plain "none, then three" charged to three.
    const half = (name: string, key: string) => measure(kind, create(name, key), server.url, server.child.pid!, DURATION / 2);
    const first = await half(WEBHOOKS_NONE, none.key);
    const withThree = combine(await half(WEBHOOKS_THREE, three.key), await half(WEBHOOKS_THREE, three.key));
    const without = combine(first, await half(WEBHOOKS_NONE, none.key));
    withThree.ratio = Math.round((withThree.reqPerSec / without.reqPerSec) * 100) / 100;
    process.stdout.write(`  ${kind.padEnd(7)} webhooks: ${withThree.reqPerSec} vs ${without.reqPerSec} creates/s, ratio ${withThree.ratio}, ${withThree.ratio >= 0.9 ? "within" : "NOT within"} 10%\n`);
    return [without, withThree];
  } finally {
    await receiver.stop();
  }
}

// ---------------------------------------------------------------- one database

interface DbRun {
  results: Result[];
  memory?: { requests: number; rssStartMb: number; rssEndMb: number; rssPeakMb: number };
}

async function runDatabase(kind: "sqlite" | "mysql", stamp: string, withMemory: boolean): Promise<DbRun> {
  const db = await freshDatabase(kind, stamp);
  requestsToServer = 0;
  let server: Proc | undefined;
  let baseline: Proc | undefined;
  let peak = 0;
  let sampler: NodeJS.Timeout | undefined;
  try {
    if (CPU_PROF) mkdirSync(CPU_PROF, { recursive: true });
    server = await startProcess(
      LAYERS ? "bench/layers-server.ts" : "apps/server/src/main.ts",
      {
        DATABASE_URL: db.url,
        PORT: "0",
        HOST: "127.0.0.1",
        ADMIN_TOKEN,
        LOG_LEVEL: "warn",
        RATE_LIMIT_PER_HOUR: "1000000000",
        MAINTENANCE_INTERVAL_MS: "0",
        STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
        // The bench's webhook receivers listen on 127.0.0.1.
        WEBHOOK_ALLOW_PRIVATE: "1",
      },
      /cardctl listening on ([^\s"]+)/,
      CPU_PROF ? ["--cpu-prof", `--cpu-prof-dir=${resolve(CPU_PROF)}`] : [],
    );
    const pid = server.child.pid!;
    sampler = setInterval(() => (peak = Math.max(peak, rssMb(pid))), 500);
    const rssStartMb = rssMb(pid);
    process.stdout.write(`\n[${kind}] server ${server.url} (pid ${pid}, RSS ${rssStartMb} MB); seeding…\n`);
    const t0 = Date.now();
    const sql = await sqlClient(db.url);
    const a = await seedAccount(server.url, sql, "Bench 10k", 10_000);
    const small = await seedAccount(server.url, sql, "Bench 100", 100);
    const big = await seedAccount(server.url, sql, "Bench 100k", 100_000);
    if (kind === "sqlite") await sql.exec("ANALYZE");
    else await sql.exec("ANALYZE TABLE cards");
    process.stdout.write(`[${kind}] seeded 110,100 cards in ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);
    if (kind === "mysql") {
      const t1 = Date.now();
      await settleInnoDb(sql);
      process.stdout.write(`[${kind}] InnoDB wrote the seeded rows back in ${((Date.now() - t1) / 1000).toFixed(0)} s\n`);
    }
    await sql.close();
    baseline = await startProcess("bench/baseline.ts", { DATABASE_URL: db.url }, /baseline listening on (\S+)/);

    const rounds: Result[] = [];
    const all = LAYERS ? layerCases(a) : cases(a, small, big);
    for (let round = 0; round < ROUNDS; round++)
      for (const c of all) {
        if (ONLY && !c.name.includes(ONLY) && !(c.baseline && c.baseline.includes(ONLY))) continue;
        const target = c.target === "server" ? server : baseline;
        rounds.push(await measure(kind, c, target.url, target.child.pid!));
      }
    if (!LAYERS && (!ONLY || AUTHORIZATION_CASE.includes(ONLY))) {
      // Real-time authorization decisions while cards are created at full speed beside them.
      const [creates] = all.filter((c) => c.name === "POST /v1/cards");
      const [decided] = await Promise.all([
        measure(kind, authorizationCase(a), server.url, server.child.pid!),
        load(creates!, server.url, { duration: WARMUP + DURATION }),
      ]);
      rounds.push(decided);
    }
    if (!LAYERS && (!ONLY || WEBHOOKS_THREE.includes(ONLY) || WEBHOOKS_NONE.includes(ONLY))) rounds.push(...(await webhookCases(kind, server)));
    const results = ROUNDS > 1 ? medians(rounds) : rounds;
    for (const c of all) {
      const r = results.find((x) => x.name === c.name);
      const b = c.baseline && results.find((x) => x.name === c.baseline);
      if (r && b) r.ratio = Math.round((r.reqPerSec / b.reqPerSec) * 100) / 100;
    }

    let memory: DbRun["memory"];
    if (withMemory && MEMORY_REQUESTS > 0 && !LAYERS) {
      const rest = MEMORY_REQUESTS - requestsToServer;
      process.stdout.write(`[${kind}] memory: ${requestsToServer} requests so far; ${Math.max(0, rest)} more (balance, lists, get)…\n`);
      if (rest > 0) {
        const paths = ["/v1/balance", "/v1/cards?limit=20", `/v1/cards/${a.cardIds[0]}`, "/trpc/balance.retrieve"];
        let i = 0;
        await load({ name: "memory", target: "server", key: a.key, path: () => paths[i++ % paths.length]! }, server.url, { amount: rest });
      }
      await new Promise((r) => setTimeout(r, 1000));
      const end = rssMb(pid);
      memory = { requests: requestsToServer, rssStartMb, rssEndMb: end, rssPeakMb: Math.max(peak, end) };
      process.stdout.write(`[${kind}] RSS after ${memory.requests} requests: ${memory.rssEndMb} MB (peak ${memory.rssPeakMb} MB)\n`);
    }
    return { results, memory };
  } finally {
    clearInterval(sampler);
    await baseline?.stop();
    await server?.stop();
    await db.drop().catch(() => undefined);
  }
}

// ---------------------------------------------------------------- report

function machine() {
  const cpu = cpus()[0]?.model ?? "unknown";
  return {
    nproc: cpus().length,
    cpu,
    ramGb: Math.round(totalmem() / 1024 ** 3),
    node: process.version,
    date: new Date().toISOString().slice(0, 16).replace("T", " ") + " UTC",
  };
}

function table(results: Result[]): string {
  const lines = [
    "| database | endpoint | req/s | p50 ms | p99 ms | vs baseline | server CPU µs/req |",
    "|---|---|---:|---:|---:|---:|---:|",
  ];
  for (const r of results) {
    if (r.name.startsWith("baseline")) continue;
    const flag = r.non2xx || r.errors ? ` (non-2xx ${r.non2xx}, errors ${r.errors})` : "";
    lines.push(`| ${r.db} | ${r.name}${flag} | ${r.reqPerSec} | ${r.p50} | ${r.p99} | ${r.ratio === undefined ? "" : `${Math.round(r.ratio * 100)}%`} | ${r.cpuUsPerReq} |`);
  }
  lines.push("", "Baselines (bare Fastify, same SQL, same database):", "", "| database | baseline | req/s | p50 ms | p99 ms | CPU µs/req |", "|---|---|---:|---:|---:|---:|");
  for (const r of results) if (r.name.startsWith("baseline")) lines.push(`| ${r.db} | ${r.name.slice(9)} | ${r.reqPerSec} | ${r.p50} | ${r.p99} | ${r.cpuUsPerReq} |`);
  return lines.join("\n");
}

function targets(results: Result[], memory: DbRun["memory"]): string[] {
  const out: string[] = [];
  const ok = (b: boolean) => (b ? "met" : "NOT met");
  for (const r of results) {
    if (r.name.startsWith("GET /v1/") && r.ratio !== undefined) out.push(`${r.db} ${r.name} ≥ 60% of baseline: ${Math.round(r.ratio * 100)}%, ${ok(r.ratio >= 0.6)}`);
    if (r.name === WEBHOOKS_THREE && r.ratio !== undefined)
      out.push(`${r.db} ${r.name} within 10% of none: ${Math.round(r.ratio * 100)}%, ${ok(r.ratio >= 0.9 && !r.non2xx && !r.errors)}`);
    if (r.name === AUTHORIZATION_CASE) out.push(`${r.db} ${r.name}: p99 < 100 ms: p99 ${r.p99} ms, ${ok(r.p99 < 100 && !r.non2xx && !r.errors)}`);
    if (r.name === "POST /v1/cards") {
      const floor = r.db === "sqlite" ? 1500 : 600;
      out.push(`${r.db} POST /v1/cards ≥ ${floor}/s, p99 < 25 ms: ${r.reqPerSec}/s p99 ${r.p99} ms, ${ok(r.reqPerSec >= floor && r.p99 < 25 && !r.non2xx)}`);
    }
  }
  for (const db of new Set(results.map((r) => r.db))) {
    const s = results.find((r) => r.db === db && r.name === "GET /v1/cards?limit=20 (100)");
    const b = results.find((r) => r.db === db && r.name === "GET /v1/cards?limit=20 (100k)");
    if (s && b) out.push(`${db} list of 20 on 100k vs 100 cards: ${b.reqPerSec} vs ${s.reqPerSec} req/s (${Math.round((b.reqPerSec / s.reqPerSec) * 100)}%), ${ok(b.reqPerSec >= 0.9 * s.reqPerSec)}`);
  }
  if (memory)
    out.push(`RSS stays under 250 MB through ${memory.requests} requests: ${memory.rssEndMb} MB at the end, peak ${memory.rssPeakMb} MB, ${ok(memory.rssPeakMb < 250)}`);
  return out;
}

/** Each layer's CPU per request, what it adds to the one above, and its req/s against the baseline. */
function layersTable(results: Result[]): string {
  const lines = ["| database | layer | CPU µs/req | added µs/req | req/s | vs baseline |", "|---|---|---:|---:|---:|---:|"];
  let previous: Result | undefined;
  for (const r of results) {
    const added = previous && previous.db === r.db && !previous.name.startsWith("baseline") ? String(r.cpuUsPerReq - previous.cpuUsPerReq) : "";
    previous = r;
    lines.push(`| ${r.db} | ${r.name} | ${r.cpuUsPerReq} | ${added} | ${r.reqPerSec} | ${r.ratio === undefined ? "" : `${Math.round(r.ratio * 100)}%`} |`);
  }
  return lines.join("\n");
}

const START = "<!-- bench:latest:start -->";
const END = "<!-- bench:latest:end -->";

function updateBenchmarksMd(section: string) {
  const file = join(ROOT, "BENCHMARKS.md");
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch {
    text = `# Benchmarks\n\n${START}\n${END}\n`;
  }
  const block = `${START}\n${section}\n${END}`;
  text = text.includes(START) && text.includes(END) ? text.slice(0, text.indexOf(START)) + block + text.slice(text.indexOf(END) + END.length) : `${text.trimEnd()}\n\n${block}\n`;
  writeFileSync(file, text);
}

// ---------------------------------------------------------------- main

const stamp = new Date().toISOString().replace(/[:.]/g, "-");
const wanted = (process.env.BENCH_DB ?? "sqlite,mysql").split(",").map((s) => s.trim());
const kinds: ("sqlite" | "mysql")[] = [];
if (wanted.includes("sqlite")) kinds.push("sqlite");
if (wanted.includes("mysql")) {
  if (await mariadbAnswers()) kinds.push("mysql");
  else process.stdout.write("MariaDB does not answer on 127.0.0.1:3306: SQLite only.\n");
}
const m = machine();
process.stdout.write(`cardctl bench: ${m.nproc} × ${m.cpu}, ${m.ramGb} GB, node ${m.node}; ${DURATION} s per case, ${CONNECTIONS} connections\n`);

const all: Result[] = [];
let memory: DbRun["memory"];
for (const [i, kind] of kinds.entries()) {
  const run = await runDatabase(kind, stamp, i === 0);
  all.push(...run.results);
  memory ??= run.memory;
}

if (LAYERS) {
  process.stdout.write(`\n${layersTable(all)}\n`);
  process.exit(0);
}

const md = table(all);
const verdicts = targets(all, memory);
process.stdout.write(`\n${md}\n\n${verdicts.map((v) => `- ${v}`).join("\n")}\n`);

if (!process.env.BENCH_NO_WRITE) {
  mkdirSync(join(ROOT, "bench/results"), { recursive: true });
  const json = join(ROOT, "bench/results", `${stamp}.json`);
  writeFileSync(json, JSON.stringify({ machine: m, durationSeconds: DURATION, connections: CONNECTIONS, results: all, memory, targets: verdicts }, null, 2));
  const head = `Latest run: ${m.date}, ${m.nproc} × ${m.cpu}, ${m.ramGb} GB RAM, node ${m.node}; ${DURATION} s per case after a ${WARMUP} s warm-up, ${CONNECTIONS} connections (\`npm run bench\`, raw numbers in bench/results/).`;
  const mem = memory ? `\n\nMemory: server RSS ${memory.rssStartMb} MB at start, ${memory.rssEndMb} MB after ${memory.requests} requests (peak ${memory.rssPeakMb} MB).` : "";
  updateBenchmarksMd(`${head}\n\n${md}${mem}\n\nTargets:\n\n${verdicts.map((v) => `- ${v}`).join("\n")}`);
  process.stdout.write(`\nwrote ${json} and BENCHMARKS.md\n`);
}
