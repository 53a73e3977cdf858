/**
 * `npm run bench`: load the real server, beside a bare-Fastify baseline on the same database, and
 * judge the targets of issue 19 in one run.
 *
 * For SQLite (always) and MariaDB (when 127.0.0.1:3306 answers), on a fresh database each:
 *  1. builds the server and starts it as `npm start` does, as its own process (node
 *     apps/server/dist/main.js, port 0, LOG_LEVEL=warn, RATE_LIMIT_PER_HOUR very high,
 *     MAINTENANCE_INTERVAL_MS=0);
 *  2. seeds through the operator API five accounts (setup complete, one full test key each):
 *     three holding 10,000, 100 and 100,000 cards (2% OPEN with an open hold, the rest USED or
 *     CLOSED, like a long history), and two whose outbox holds 20 (one page) and 1,000,000 events spread over
 *     the last 29 days; cards and events are inserted with direct multi-row SQL into the server's
 *     (already migrated) database, which takes a minute or two instead of hours through the API;
 *  3. starts bench/baseline.ts (its own process) on the same database;
 *  4. drives autocannon from this process (separate from both servers) for each case, with a
 *     short unrecorded warm-up, and prints req/s, p50, p99 and the ratio to the baseline:
 *     balance, the list of 20 on each card account and get, on /v1 and /trpc; balance on the 100
 *     and 100k accounts and the events list on the 20 and 1M accounts; POST /v1/cards. A read and
 *     its baseline (and the two sides of a scale comparison) are measured in turn, in BENCH_ROUNDS
 *     rounds of BENCH_DURATION / BENCH_ROUNDS each, the order reversed every other round, and
 *     judged on their rounds together: the host's drift over minutes falls on both sides alike;
 *  5. real-time authorization decisions: Stripe's signed issuing_authorization.request webhook
 *     while POST /v1/cards runs at full speed beside it, then alone, then the simulated
 *     processor's test helper (POST /v1/test_helpers/cards/:id/authorizations) alone;
 *  6. creates on an account with three webhook endpoints (one never answers) against none (with
 *     BENCH_WEBHOOK_SPLIT=1 also two answering endpoints alone and the hanging one alone);
 *  7. on the first database, tops the server up to 200,000 requests with mixed reads on both
 *     transports and the dashboard's static files (its page and the assets it loads), and reads
 *     its VmRSS.
 * It prints one verdict per target (met / NOT met) and writes bench/results/<timestamp>.json and
 * the "Latest run" block of BENCHMARKS.md.
 *
 * Knobs (env): BENCH_DURATION (s, default 10), BENCH_CONNECTIONS (10), BENCH_DB (sqlite,mysql),
 * BENCH_ROUNDS (3: rounds of each read beside its baseline), BENCH_ONLY (cases whose name holds it,
 * with their baselines), BENCH_MEMORY_REQUESTS (200000; 0 skips),
 * BENCH_CPU_PROF=<dir> (server runs with --cpu-prof into <dir>), BENCH_NO_WRITE=1 (no json/md),
 * BENCH_WEBHOOK_ROUNDS (3: rounds of the webhook cases' none, three, three, none), BENCH_WEBHOOK_SPLIT=1
 * (the three endpoints' cost split: two answering endpoints alone and the hanging one alone, in the same
 * rounds: none, three, two, hanging, hanging, two, three, none), BENCH_BREAKDOWN=1
 * (each case's CPU per request split over the server's main thread, its other threads, MariaDB, the
 * webhook receivers and the load generator; on MariaDB also its statements, commits and redo-log
 * writes per request), BENCH_NO_IDEM=1 (creates without an Idempotency-Key,
 * to measure what the key's claim and answer cost; the targets assume the key, so nothing is written).
 *
 * `npm run bench:layers` (BENCH_LAYERS=1) measures instead where GET /v1/balance's time goes: the
 * server is bench/layers-server.ts (the same app plus routes that stop at shallower layers), each
 * layer measured in rounds beside the baseline as the reads are; nothing is written.
 * `npm run bench:transports` (BENCH_TRANSPORTS=1) runs the same server and measures balance, the
 * list of 20 and get through the server's own transports and through the supported adapters
 * (trpc-to-openapi's and tRPC's Fastify plugins) it mounts beside them; nothing is written.
 */
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { cpus, tmpdir, totalmem } from "node:os";
import { join, resolve } from "node:path";
import autocannon from "autocannon";
import Stripe from "stripe";
// The server's own id alphabet and generator (a pool of random bytes: cheap for a million ids).
import { randomToken } from "../packages/api/src/domain/ids.js";
import { cpuMs, ROOT, START_FLAGS, startProcess, type Proc } from "./processes.js";

const DURATION = Number(process.env.BENCH_DURATION ?? 10);
/** Rounds of the webhook cases' none, three, three, none (each segment DURATION / 2). */
const WEBHOOK_ROUNDS = Number(process.env.BENCH_WEBHOOK_ROUNDS ?? 3);
/** The webhook cases also split the three endpoints: the two answering ones alone, the hanging one alone. */
const WEBHOOK_SPLIT = process.env.BENCH_WEBHOOK_SPLIT === "1";
const WARMUP = Math.min(2, Math.max(1, Math.round(DURATION / 5)));
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);
const ONLY = process.env.BENCH_ONLY;
const MEMORY_REQUESTS = Number(process.env.BENCH_MEMORY_REQUESTS ?? 200_000);
const CPU_PROF = process.env.BENCH_CPU_PROF;
/** bench:transports: the server's own transports against the supported adapters (bench/layers-server.ts serves both). */
const TRANSPORTS = process.env.BENCH_TRANSPORTS === "1";
const LAYERS = process.env.BENCH_LAYERS === "1" || TRANSPORTS;
const BREAKDOWN = process.env.BENCH_BREAKDOWN === "1";
/** Creates without an Idempotency-Key: not the targets' run, so nothing is written. */
const NO_IDEM = process.env.BENCH_NO_IDEM === "1";
/** Rounds in which each read and its baseline are measured in turn (DURATION / ROUNDS each). */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const ADMIN_TOKEN = `adm_bench_${randomBytes(16).toString("hex")}`;
const MYSQL_ROOT = "mysql://root@127.0.0.1:3306/";
const WEBHOOK_SECRET = `whsec_bench_${randomBytes(16).toString("hex")}`;
const AUTHORIZATION_CASE = "issuing_authorization.request beside POST /v1/cards";
const AUTHORIZATION_ALONE = "issuing_authorization.request alone";
const HELPER_ALONE = "POST /v1/test_helpers/cards/:id/authorizations alone";
const WEBHOOKS_NONE = "POST /v1/cards, no webhook endpoints";
const WEBHOOKS_THREE = "POST /v1/cards, 3 webhook endpoints (1 hanging)";
const WEBHOOKS_TWO = "POST /v1/cards, 2 answering webhook endpoints";
const WEBHOOKS_HANGING = "POST /v1/cards, 1 hanging webhook endpoint";
// ---------------------------------------------------------------- processes

/** MariaDB's server process on this machine, if it runs here. */
const mysqldPid = (() => {
  let pid: number | undefined | null = null;
  return () => {
    if (pid === null) {
      try {
        pid = Number(execFileSync("pidof", ["mariadbd", "mysqld"]).toString().trim().split(/\s+/)[0]) || undefined;
      } catch {
        pid = undefined;
      }
    }
    return pid;
  };
})();

/** The webhook receivers' process while the webhook cases run. */
let receiverPid: number | undefined;

/**
 * Where a case's CPU went, per request (BENCH_BREAKDOWN=1): the answering process's main thread,
 * its other threads (the webhook sender, V8's GC helpers, libuv's pool), MariaDB, the webhook
 * receivers and the load generator (this process), all sharing the machine's cores. Returns the
 * line to print.
 */
function cpuBreakdown(pid: number, db: string): (requests: number) => string {
  const sample = (): [string, number][] => {
    const main = cpuMs(pid, pid);
    const mysqld = db === "mysql" ? mysqldPid() : undefined;
    const own = process.cpuUsage();
    return [
      ["main thread", main],
      ["other threads", cpuMs(pid) - main],
      ...(mysqld ? [["mysqld", cpuMs(mysqld)] as [string, number]] : []),
      ...(receiverPid ? [["webhook receivers", cpuMs(receiverPid)] as [string, number]] : []),
      ["load generator", (own.user + own.system) / 1000],
    ];
  };
  const before = new Map(sample());
  return (requests) =>
    sample()
      .map(([name, ms]) => `${name} ${Math.round(((ms - (before.get(name) ?? 0)) * 1000) / Math.max(1, requests))}`)
      .join(", ");
}

/**
 * MariaDB's statements and commits per request while a case runs (BENCH_BREAKDOWN=1): the server's
 * global counters (every client's, so only the cases that run alone read true), sampled before and
 * after. Returns the line to print.
 */
async function mysqlStatements(): Promise<(requests: number) => Promise<string>> {
  const names = ["Questions", "Com_commit", "Innodb_log_writes"];
  const sample = async () => {
    const sql = await sqlClient(MYSQL_ROOT);
    const rows = await sql.rows(`SHOW GLOBAL STATUS WHERE Variable_name IN (${names.map(() => "?").join(", ")})`, names);
    await sql.close();
    return new Map(rows.map((r) => [String(r.Variable_name), Number(r.Value)]));
  };
  const before = await sample();
  return async (requests) => {
    const after = await sample();
    return names.map((n) => `${n} ${(((after.get(n) ?? 0) - (before.get(n) ?? 0)) / Math.max(1, requests)).toFixed(2)}`).join(", ");
  };
}

const rssMb = (pid: number): number => {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Math.round(Number(m[1]) / 1024) : NaN;
};

// ---------------------------------------------------------------- databases

type Sql = { exec(sql: string, params?: unknown[]): Promise<void>; rows(sql: string, params?: unknown[]): Promise<any[]>; close(): Promise<void> };

async function sqlClient(url: string): Promise<Sql> {
  if (url.startsWith("sqlite:")) {
    const { default: Database } = await import("better-sqlite3");
    const db = new Database(url.slice("sqlite:".length));
    db.pragma("busy_timeout = 5000");
    return {
      exec: async (sql, params = []) => void db.prepare(sql).run(...params),
      rows: async (sql, params = []) => db.prepare(sql).all(...params),
      close: async () => void db.close(),
    };
  }
  const mysql = await import("mysql2/promise");
  const conn = await mysql.createConnection(url);
  return {
    exec: async (sql, params = []) => void (await conn.query(sql, params)),
    rows: async (sql, params = []) => (await conn.query(sql, params))[0] as any[],
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
  /** The key's id: the actor of the seeded events. */
  keyId: string;
  accountId: string;
  cardIds: string[];
  /** The OPEN cards, with the processor card id Stripe's authorization events name. */
  open: { id: string; processorCardId: string }[];
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

/** Inserts `count` rows of `cols` in multi-row statements of `batch` rows (each its own transaction), `row(k)` giving the values of row k. */
async function insertRows(sql: Sql, table: string, cols: string[], count: number, batch: number, row: (k: number) => unknown[]) {
  const tuple = `(${cols.map(() => "?").join(", ")})`;
  for (let i = 0; i < count; i += batch) {
    const n = Math.min(batch, count - i);
    const values: unknown[] = [];
    for (let k = i; k < i + n; k++) values.push(...row(k));
    await sql.exec(`INSERT INTO ${table} (${cols.join(", ")}) VALUES ${Array(n).fill(tuple).join(", ")}`, values);
  }
}

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
  const open: Seeded["open"] = [];
  const start = Date.now() - cards * 60_000;
  if (cards > 0)
    await insertRows(sql!, "cards", cols, cards, 500, (k) => {
      const id = `card_${randomToken(24)}`;
      const at = start + k * 60_000;
      const status = k % 50 === 0 ? "OPEN" : k % 3 === 0 ? "CLOSED" : "USED";
      const amount = 500 + (k % 40) * 100;
      const spent = status === "USED" ? amount - 100 : 0;
      const processorCardId = `ic_${randomToken(24)}`;
      if (cardIds.length < 200 && (status === "OPEN" || k % 10 === 1)) cardIds.push(id);
      if (status === "OPEN") open.push({ id, processorCardId });
      return [
        id, account.id, "test", status, amount, status === "OPEN" ? amount : 0, spent, `agent-${k % 7}`, `bench purchase ${k}`,
        String(1000 + (k % 9000)), "11/29", processorCardId, `pi_sim_${randomToken(24)}`,
        status === "OPEN" ? "OPEN" : status === "USED" ? "CAPTURED" : "RELEASED",
        status === "OPEN" ? null : at + 1000, at, status === "CLOSED" ? at + 1000 : null, status === "USED" ? at + 500 : null,
        // Open cards stay unexpired through the run (the maintenance pass would close them).
        status === "OPEN" ? Date.now() + 86_400_000 : at + 86_400_000,
      ];
    });
  return { key: key.secret, keyId: key.id, accountId: account.id, cardIds, open };
}

const EVENT_TYPES_SEEDED = ["card.created", "authorization.approved", "card.used", "transaction.created"];
const DAY_MS = 86_400_000;

/**
 * Replaces the account's test-mode outbox (seeding through the operator API wrote a few events) with
 * `total` events by direct multi-row SQL, oldest first over the last 29 days (the 30-day purge keeps
 * them), each a card's event as GET /v1/events shows it. Returns the number of events it now has.
 */
async function seedEvents(sql: Sql, s: Seeded, total: number): Promise<number> {
  await sql.exec("DELETE FROM events WHERE account_id = ? AND mode = 'test'", [s.accountId]);
  const step = (29 * DAY_MS) / total;
  const start = Date.now() - 29 * DAY_MS;
  const cols = ["id", "account_id", "mode", "type", "actor_type", "actor_id", "data", "created_at"];
  await insertRows(sql, "events", cols, total, 1000, (k) => {
    const at = Math.round(start + k * step);
    const amount = 500 + (k % 40) * 100;
    const card = {
      id: `card_${randomToken(24)}`, status: "USED", last_four: String(1000 + (k % 9000)), expiration: "11/29", amount_cents: amount, remaining_cents: 0,
      agent_id: `agent-${k % 7}`, purpose: `bench purchase ${k}`, created_at: new Date(at).toISOString(), expires_at: new Date(at + DAY_MS).toISOString(),
      spent_cents: amount - 100,
    };
    return [`evt_${randomToken(24)}`, s.accountId, "test", EVENT_TYPES_SEEDED[k % EVENT_TYPES_SEEDED.length], "api_key", s.keyId, JSON.stringify(card), at];
  });
  return Number((await sql.rows("SELECT COUNT(1) AS n FROM events WHERE account_id = ? AND mode = 'test'", [s.accountId]))[0].n);
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
  /** A load run on the server at full speed through this case's warm-up and measurement. */
  beside?: Case;
  /** What this case must show (issue 19). */
  goal?: Goal;
}

/** A target of issue 19 for one case's result: the rule, what was measured, and whether it holds. */
type Goal = (r: Result) => { rule: string; value: string; met: boolean };

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
  /** Webhook cases: the share of an answering endpoint's deliveries that reached it while its creates ran. */
  sentDuringLoad?: number;
  /** Webhook cases: how long after a round's last create its last delivery reached that endpoint, in s (the longest). */
  drainSeconds?: number;
}

let requestsToServer = 0;

async function load(c: Case, url: string, opts: { duration?: number; amount?: number }) {
  const pathOf = typeof c.path === "function" ? c.path : () => c.path as string;
  let n = 0;
  const stamp = randomToken(8);
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

async function measure(db: string, c: Case, url: string, pid: number, duration = DURATION, warmUp = true): Promise<Result> {
  if (warmUp) await load(c, url, { duration: WARMUP });
  const statements = BREAKDOWN && db === "mysql" ? await mysqlStatements() : undefined;
  const breakdown = BREAKDOWN ? cpuBreakdown(pid, db) : undefined;
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
  process.stdout.write(`  ${db.padEnd(7)} ${c.name.padEnd(44)} ${String(out.reqPerSec).padStart(6)} req/s  p50 ${out.p50} ms  p99 ${out.p99} ms  cpu ${out.cpuUsPerReq} µs/req${out.non2xx || out.errors ? `  non2xx ${out.non2xx} errors ${out.errors}` : ""}\n`);
  if (breakdown) process.stdout.write(`    cpu µs/req: ${breakdown(out.total)}\n`);
  if (statements) process.stdout.write(`    mysql per request: ${await statements(out.total)}\n`);
  return out;
}

/** Segments of one case measured for equal durations, as one result: rates averaged, worst percentiles. */
function combine(parts: Result[]): Result {
  const total = parts.reduce((n, r) => n + r.total, 0);
  return {
    ...parts[0]!,
    reqPerSec: Math.round(parts.reduce((n, r) => n + r.reqPerSec, 0) / parts.length),
    p50: Math.max(...parts.map((r) => r.p50)),
    p99: Math.max(...parts.map((r) => r.p99)),
    total,
    cpuUsPerReq: Math.round(parts.reduce((n, r) => n + r.cpuUsPerReq * r.total, 0) / Math.max(1, total)),
    non2xx: parts.reduce((n, r) => n + r.non2xx, 0),
    errors: parts.reduce((n, r) => n + r.errors, 0),
  };
}

// ---------------------------------------------------------------- cases and their targets

/** The seeded accounts: 10,000 / 100 / 100,000 cards; 20 (one page) / 1,000,000 events in the outbox. */
interface Accounts {
  a: Seeded;
  small: Seeded;
  big: Seeded;
  quiet: Seeded;
  busy: Seeded;
}

const pct = (x: number) => `${Math.round(x * 100)}%`;
const thousands = (n: number) => n.toLocaleString("en-US");
const trpcInput = (v: unknown) => `input=${encodeURIComponent(JSON.stringify(v))}`;
const pick = (ids: string[]) => () => ids[Math.floor(Math.random() * ids.length)]!;

/** The case's ratio (to its baseline, or to the webhook-less creates) at least `floor`. */
const ratioAtLeast =
  (rule: string, floor: number): Goal =>
  (r) => ({ rule, value: r.ratio === undefined ? "not compared" : pct(r.ratio), met: (r.ratio ?? 0) >= floor });
const perSecond =
  (floor: number, p99Ms?: number): Goal =>
  (r) => ({
    rule: `≥ ${thousands(floor)}/s${p99Ms ? `, p99 < ${p99Ms} ms` : ""}`,
    value: `${r.reqPerSec}/s, p99 ${r.p99} ms`,
    met: r.reqPerSec >= floor && (p99Ms === undefined || r.p99 < p99Ms),
  });
const p99Below =
  (ms: number): Goal =>
  (r) => ({ rule: `p99 < ${ms} ms`, value: `p99 ${r.p99} ms at ${r.reqPerSec}/s`, met: r.p99 < ms });

/** Issue 19, item 1: every read on both transports. */
const OF_BASELINE = ratioAtLeast("≥ 75% of baseline", 0.75);
/** Item 4. */
const WEBHOOKS_GOAL: Goal = (r) => {
  const g = ratioAtLeast("within 10% of none", 0.9)(r);
  return r.sentDuringLoad === undefined ? g : { ...g, value: `${g.value} (an answering endpoint got ${pct(r.sentDuringLoad)} of its deliveries during the creates, the last ${r.drainSeconds} s after)` };
};
/** Item 6: the bigger account's /v1 req/s against the smaller's, at least this share. */
const SCALE_FLOOR = 0.9;
const SCALE: [label: string, small: string, big: string][] = [
  ["list of 20 on 100k vs 100 cards", "GET /v1/cards?limit=20 (100)", "GET /v1/cards?limit=20 (100k)"],
  ["balance on 100k vs 100 cards", "GET /v1/balance (100)", "GET /v1/balance (100k)"],
  ["events list of 20 with 1M vs 20 events", "GET /v1/events?limit=20 (20)", "GET /v1/events?limit=20 (1M)"],
];

const createCase = (name: string, key: string, goal?: Goal): Case => ({
  name,
  target: "server",
  key,
  method: "POST",
  path: "/v1/cards",
  body: JSON.stringify({ amount_cents: 1500, agent_id: "bench-agent", purpose: "benchmark" }),
  idempotent: !NO_IDEM,
  goal,
});

/** A read's baseline, then the same read on the server's /v1 and (given) /trpc routes, compared to it. */
function reads(o: { baseline: string; key: string; path: Case["path"]; v1: string; trpc?: [name: string, path: Case["path"]]; goal?: Goal }): Case[] {
  const baseline = `baseline ${o.baseline}`;
  const server = (name: string, path: Case["path"]): Case => ({ name, target: "server", baseline, key: o.key, path, goal: o.goal });
  return [{ name: baseline, target: "baseline", key: o.key, path: o.path }, server(o.v1, o.path), ...(o.trpc ? [server(...o.trpc)] : [])];
}

function cases(kind: "sqlite" | "mysql", { a, small, big, quiet, busy }: Accounts): Case[] {
  const cardA = pick(a.cardIds);
  const list = (size: string, s: Seeded) =>
    reads({
      baseline: `list ${size}`,
      key: s.key,
      path: "/v1/cards?limit=20",
      v1: `GET /v1/cards?limit=20 (${size})`,
      trpc: [`GET /trpc/cards.list (${size})`, `/trpc/cards.list?${trpcInput({ limit: 20 })}`],
      goal: OF_BASELINE,
    });
  const creates = createCase("POST /v1/cards", a.key, perSecond(kind === "sqlite" ? 2500 : 1200, 15));
  return [
    ...reads({ baseline: "balance", key: a.key, path: "/v1/balance", v1: "GET /v1/balance", trpc: ["GET /trpc/balance.retrieve", "/trpc/balance.retrieve"], goal: OF_BASELINE }),
    ...list("10k", a),
    ...list("100", small),
    ...list("100k", big),
    ...reads({
      baseline: "get",
      key: a.key,
      path: () => `/v1/cards/${cardA()}`,
      v1: "GET /v1/cards/:id",
      trpc: ["GET /trpc/cards.get", () => `/trpc/cards.get?${trpcInput({ id: cardA() })}`],
      goal: OF_BASELINE,
    }),
    // Scale (judged by SCALE, beside their baselines for where a slope would come from).
    ...reads({ baseline: "balance 100", key: small.key, path: "/v1/balance", v1: "GET /v1/balance (100)" }),
    ...reads({ baseline: "balance 100k", key: big.key, path: "/v1/balance", v1: "GET /v1/balance (100k)" }),
    ...reads({ baseline: "events 20", key: quiet.key, path: "/v1/events?limit=20", v1: "GET /v1/events?limit=20 (20)" }),
    ...reads({ baseline: "events 1M", key: busy.key, path: "/v1/events?limit=20", v1: "GET /v1/events?limit=20 (1M)" }),
    creates,
    ...decisionCases(big, creates),
  ];
}

/** The cases BENCH_ONLY names (all without it), and the baselines they are compared to. */
function chosen(all: Case[]): Case[] {
  const named = (c: Case) => !ONLY || c.name.includes(ONLY);
  const baselines = new Set(all.filter(named).map((c) => c.baseline));
  return all.filter((c) => named(c) || baselines.has(c.name));
}

/**
 * The chosen cases in groups measured in rounds together: a baseline with the cases compared to it,
 * and the two sides of a scale comparison (with their baselines); any other case alone.
 */
function comparedGroups(chosenCases: Case[]): Case[][] {
  const key = (c: Case) => {
    const served = c.target === "baseline" ? chosenCases.filter((x) => x.baseline === c.name).map((x) => x.name) : [c.name];
    return SCALE.find(([, small, big]) => served.includes(small) || served.includes(big))?.[0] ?? c.baseline ?? c.name;
  };
  const groups = new Map<string, Case[]>();
  for (const c of chosenCases) {
    const k = key(c);
    groups.set(k, [...(groups.get(k) ?? []), c]);
  }
  return [...groups.values()];
}

/** GET /v1/balance at each depth of the stack (bench/layers-server.ts), beside its baseline. */
function layerCases(a: Seeded): Case[] {
  const layer = (name: string, path: string): Case => ({ name, target: "server", baseline: "baseline balance", key: a.key, path });
  return [
    { name: "baseline balance", target: "baseline", key: a.key, path: "/v1/balance" },
    layer("pipeline, constant body", "/v1/_layers/pipeline"),
    layer("+ domain (balance reads)", "/v1/_layers/domain/balance"),
    layer("+ tRPC procedure (answered as the routes answer)", "/v1/_layers/procedure/balance"),
    layer("+ REST route: GET /v1/balance", "/v1/balance"),
    layer("the procedure by a server-side caller instead", "/v1/_layers/trpc/balance"),
  ];
}

/**
 * Each read on the server's own transports (the REST routes compiled from trpc-to-openapi's route
 * table, and /trpc straight from its Fastify route) and on the adapters they stand in for
 * (trpc-to-openapi's fastifyTRPCOpenApiPlugin, tRPC's fastifyTRPCPlugin), beside its baseline:
 * what each custom piece buys (issue 19).
 */
function transportCases(a: Seeded): Case[] {
  const cardA = pick(a.cardIds);
  const read = (name: string, rest: (at: string) => Case["path"], trpc: (at: string) => Case["path"]): Case[] => {
    const baseline = `baseline ${name}`;
    const server = (label: string, path: Case["path"]): Case => ({ name: `${name}: ${label}`, target: "server", baseline, key: a.key, path });
    return [
      { name: baseline, target: "baseline", key: a.key, path: rest("/v1") },
      server("/v1, compiled routes", rest("/v1")),
      server("trpc-to-openapi's plugin", rest("/v1/_adapters/rest")),
      server("/trpc, own route", trpc("/trpc")),
      server("tRPC's Fastify adapter", trpc("/v1/_adapters/trpc")),
    ];
  };
  return [
    ...read("balance", (at) => `${at}/balance`, (at) => `${at}/balance.retrieve`),
    ...read("list 10k", (at) => `${at}/cards?limit=20`, (at) => `${at}/cards.list?${trpcInput({ limit: 20 })}`),
    ...read(
      "get",
      (at) => () => `${at}/cards/${cardA()}`,
      (at) => () => `${at}/cards.get?${trpcInput({ id: cardA() })}`,
    ),
  ];
}

const MERCHANT = { name: "Bench shop", category: "book_stores", country: "US" };
const amountCents = () => 100 + Math.floor(Math.random() * 400);

/** Each of `cards` in turn, round and round. */
function cycle<T>(cards: T[]): () => T {
  let n = 0;
  return () => cards[n++ % cards.length]!;
}

/**
 * Stripe's synchronous issuing_authorization.request webhook, signed as Stripe signs it, on
 * `cards` in turn: every decision reads the card and records the authorization.
 */
function stripeDecisions(name: string, cards: Seeded["open"]): Case {
  const next = cycle(cards);
  return {
    name,
    target: "server",
    key: "none", // the webhook is authenticated by its signature
    method: "POST",
    path: "/v1/webhooks/stripe",
    body: () =>
      JSON.stringify({
        id: `evt_${randomToken(24)}`,
        object: "event",
        api_version: Stripe.API_VERSION,
        created: Math.floor(Date.now() / 1000),
        livemode: false,
        type: "issuing_authorization.request",
        data: {
          object: {
            id: `iauth_${randomToken(24)}`,
            object: "issuing.authorization",
            amount: 0,
            approved: false,
            status: "pending",
            pending_request: { amount: amountCents(), currency: "usd" },
            merchant_data: MERCHANT,
            card: next().processorCardId,
          },
        },
      }),
    headers: (body) => ({ "stripe-signature": Stripe.webhooks.generateTestHeaderString({ payload: body, secret: WEBHOOK_SECRET }) }),
  };
}

/** The simulated processor's test helper for the same decision, on `cards` in turn with the account's test key. */
function helperDecisions(name: string, key: string, cards: Seeded["open"]): Case {
  const next = cycle(cards);
  return {
    name,
    target: "server",
    key,
    method: "POST",
    path: () => `/v1/test_helpers/cards/${next().id}/authorizations`,
    body: () => JSON.stringify({ amount_cents: amountCents(), merchant: MERCHANT }),
  };
}

/**
 * Real-time authorization decisions (issue 19, item 3): Stripe's webhook while cards are created at
 * full speed beside it, then alone, then the test helper alone. Each case has its own third of the
 * account's OPEN cards, so each runs the same way: the first decision on a card approves it (the
 * card becomes USED), the rest decline.
 */
function decisionCases(s: Seeded, creates: Case): Case[] {
  const third = Math.floor(s.open.length / 3);
  const [beside, alone, helper] = [0, 1, 2].map((i) => s.open.slice(i * third, (i + 1) * third));
  return [
    { ...stripeDecisions(AUTHORIZATION_CASE, beside!), beside: creates, goal: p99Below(50) },
    { ...stripeDecisions(AUTHORIZATION_ALONE, alone!), goal: perSecond(1000) },
    { ...helperDecisions(HELPER_ALONE, s.key, helper!), goal: perSecond(1000) },
  ];
}

/**
 * Card creation on an account without webhook endpoints, then on one with three (two receivers
 * that answer at once, one that never answers): every card's event is delivered three times by the
 * server's worker meanwhile, and the hanging receiver holds its share of the worker's slots. With
 * WEBHOOK_SPLIT, also on an account with the two answering endpoints alone and one with the hanging
 * endpoint alone (receiver paths of their own), each compared to none like the three.
 */
async function webhookCases(kind: "sqlite" | "mysql", server: Proc): Promise<Result[]> {
  const receiver = await startProcess("bench/webhook-receiver.ts", {}, /receiver listening on (\S+)/);
  receiverPid = receiver.child.pid;
  try {
    const account = async (name: string, paths: string[]) => {
      const s = await seedAccount(server.url, null, `Bench webhooks ${name}`, 0);
      for (const path of paths) await api(server.url, "POST", "/v1/webhook_endpoints", s.key, { url: receiver.url + path, events: ["*"] });
      return { name, key: s.key };
    };
    const none = await account(WEBHOOKS_NONE, []);
    const three = await account(WEBHOOKS_THREE, ["/ok-1", "/ok-2", "/hang"]);
    const split = WEBHOOK_SPLIT ? [await account(WEBHOOKS_TWO, ["/ok-3", "/ok-4"]), await account(WEBHOOKS_HANGING, ["/hang-2"])] : [];
    // In the order none, three, three, none (with the split: none, three, two, hanging, hanging,
    // two, three, none), half the duration each, WEBHOOK_ROUNDS times: the database grows during
    // the run and each create costs a little more, which a plain "none, then three" charged to
    // three; the host's noise drifts over minutes, which one round leaves in.
    const sides = [three, ...split];
    const order = [none, ...sides, ...[...sides].reverse(), none];
    // Whether the worker keeps up: deliveries to /ok-1 while the creates with three endpoints run,
    // against all it gets for them. Each run of "three" halves is followed by a wait until the
    // deliveries stop (a backlog sent during the next halves would flatter their ratio).
    const okCount = async () => ((await (await fetch(`${receiver.url}/count`)).json()) as Record<string, number>)["/ok-1"] ?? 0;
    let [during, all, drainMs, before] = [0, 0, 0, 0];
    const halves = new Map<string, Result[]>(order.map((side) => [side.name, []]));
    for (let round = 0; round < WEBHOOK_ROUNDS; round++)
      for (const [i, side] of order.entries()) {
        if (side === three && order[i - 1] !== three) before = await okCount();
        halves.get(side.name)!.push(await measure(kind, createCase(side.name, side.key), server.url, server.child.pid!, DURATION / 2));
        if (side !== three || order[i + 1] === three) continue;
        const [end, atEnd] = [Date.now(), await okCount()];
        const drained = await settled(okCount, atEnd);
        during += atEnd - before;
        all += drained.value - before;
        drainMs = Math.max(drainMs, drained.at - end);
      }
    const [without, ...withSides] = [...halves.values()].map(combine);
    for (const r of withSides) r.ratio = Math.round((r.reqPerSec / without!.reqPerSec) * 100) / 100;
    const withThree = withSides[0]!;
    withThree.sentDuringLoad = Math.round((during / Math.max(1, all)) * 100) / 100;
    withThree.drainSeconds = Math.round(drainMs / 100) / 10;
    process.stdout.write(`  ${kind.padEnd(7)} /ok-1 got ${pct(withThree.sentDuringLoad)} of its ${all} deliveries during the creates, the last ${withThree.drainSeconds} s after\n`);
    return [without!, ...withSides];
  } finally {
    receiverPid = undefined;
    await receiver.stop();
  }
}

/**
 * Polls `count` (which was `value` just now) until it stops changing for a second, at most two
 * minutes: its last value, and when it last changed.
 */
async function settled(count: () => Promise<number>, value: number): Promise<{ value: number; at: number }> {
  const start = Date.now();
  let at = start;
  while (Date.now() - at < 1000 && Date.now() - start < 120_000) {
    await new Promise((r) => setTimeout(r, 100));
    const now = await count();
    if (now !== value) [value, at] = [now, Date.now()];
  }
  return { value, at };
}

// ---------------------------------------------------------------- one database

interface DbRun {
  results: Result[];
  /** One line per target of issue 19 measured on this database. */
  verdicts: string[];
  memory?: { requests: number; non2xx: number; rssStartMb: number; rssEndMb: number; rssPeakMb: number };
}

const elapsed = (t0: number) => `${((Date.now() - t0) / 1000).toFixed(1)} s`;

/** The five accounts of Accounts: cards and events by direct SQL into the server's database, then ANALYZE (SQLite: without STAT4 samples). */
async function seedAll(kind: "sqlite" | "mysql", base: string, dbUrl: string): Promise<Accounts> {
  const sql = await sqlClient(dbUrl);
  try {
    const t0 = Date.now();
    const a = await seedAccount(base, sql, "Bench 10k", 10_000);
    const small = await seedAccount(base, sql, "Bench 100", 100);
    const big = await seedAccount(base, sql, "Bench 100k", 100_000);
    process.stdout.write(`[${kind}] seeded 110,100 cards in ${elapsed(t0)}\n`);
    const t1 = Date.now();
    const quiet = await seedAccount(base, null, "Bench 20 events", 0);
    const busy = await seedAccount(base, null, "Bench 1M events", 0);
    const counts = [await seedEvents(sql, quiet, 20), await seedEvents(sql, busy, 1_000_000)];
    process.stdout.write(`[${kind}] seeded accounts with ${counts.map(thousands).join(" and ")} events in ${elapsed(t1)}\n`);
    if (kind === "sqlite") {
      // The statistics an analyzed file keeps under the server: its row counts, not its STAT4
      // samples, which the server drops when it opens the file (packages/api/src/db/sqlite-statistics.ts).
      // In one transaction, so that the running server never plans with the samples.
      for (const step of ["BEGIN IMMEDIATE", "ANALYZE", "DELETE FROM sqlite_stat4", "COMMIT"]) await sql.exec(step);
    } else {
      await sql.exec("ANALYZE TABLE cards, events");
      const t2 = Date.now();
      await settleInnoDb(sql);
      process.stdout.write(`[${kind}] InnoDB wrote the seeded rows back in ${elapsed(t2)}\n`);
    }
    return { a, small, big, quiet, busy };
  } finally {
    await sql.close();
  }
}

/** The dashboard's page and the built assets it loads (parsed from its HTML), for the memory mix. */
async function dashboardFiles(base: string): Promise<string[]> {
  const res = await fetch(`${base}/`);
  const assets = [...(await res.text()).matchAll(/(?:src|href)="(\/assets\/[^"]+)"/g)].map((m) => m[1]!);
  if (!res.ok || assets.length === 0) throw new Error(`GET / answered ${res.status} with ${assets.length} assets: the dashboard was not built (its build runs before the bench: see the turbo output above)`);
  return ["/", ...assets];
}

/**
 * Tops the server up to MEMORY_REQUESTS requests with a mix of reads on both transports and the
 * dashboard's static files, then reads its RSS. The mix is at least a tenth of MEMORY_REQUESTS:
 * long cases alone can make more than the whole, and the static files must be among them.
 */
async function memoryMix(kind: string, server: Proc, a: Seeded, files: string[], rssStartMb: number, peak: () => number): Promise<DbRun["memory"]> {
  const rest = Math.max(MEMORY_REQUESTS - requestsToServer, Math.round(MEMORY_REQUESTS / 10));
  const cardA = pick(a.cardIds);
  const paths: (() => string)[] = [
    () => "/v1/balance",
    () => "/v1/cards?limit=20",
    () => `/v1/cards/${cardA()}`,
    () => "/v1/events?limit=20",
    () => "/trpc/balance.retrieve",
    () => `/trpc/cards.list?${trpcInput({ limit: 20 })}`,
    () => `/trpc/cards.get?${trpcInput({ id: cardA() })}`,
    ...files.map((f) => () => f),
  ];
  process.stdout.write(`[${kind}] memory: ${requestsToServer} requests so far; ${rest} more (/v1 and /trpc reads, ${files.join(" ")})…\n`);
  let i = 0;
  const { non2xx } = await load({ name: "memory", target: "server", key: a.key, path: () => paths[i++ % paths.length]!() }, server.url, { amount: rest });
  await new Promise((r) => setTimeout(r, 1000));
  const end = rssMb(server.child.pid!);
  const memory = { requests: requestsToServer, non2xx, rssStartMb, rssEndMb: end, rssPeakMb: Math.max(peak(), end) };
  process.stdout.write(`[${kind}] RSS after ${memory.requests} requests: ${memory.rssEndMb} MB (peak ${memory.rssPeakMb} MB)${non2xx ? `, non-2xx ${non2xx}` : ""}\n`);
  return memory;
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
      LAYERS ? "bench/layers-server.ts" : "apps/server/dist/main.js",
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
      [...START_FLAGS, ...(CPU_PROF ? ["--cpu-prof", `--cpu-prof-dir=${resolve(CPU_PROF)}`] : [])],
    );
    const pid = server.child.pid!;
    sampler = setInterval(() => (peak = Math.max(peak, rssMb(pid))), 500);
    const rssStartMb = rssMb(pid);
    process.stdout.write(`\n[${kind}] server ${server.url} (pid ${pid}, RSS ${rssStartMb} MB); seeding…\n`);
    // Asked before seeding, so that an unbuilt dashboard stops the run at once.
    const withMix = withMemory && MEMORY_REQUESTS > 0 && !LAYERS;
    const files = withMix ? await dashboardFiles(server.url) : [];
    const accounts = await seedAll(kind, server.url, db.url);
    baseline = await startProcess("bench/baseline.ts", { DATABASE_URL: db.url }, /baseline listening on (\S+)/);

    const results: Result[] = [];
    const all = TRANSPORTS ? transportCases(accounts.a) : LAYERS ? layerCases(accounts.a) : cases(kind, accounts);
    for (const group of comparedGroups(chosen(all))) {
      const runs = new Map<Case, Result[]>(group.map((c) => [c, []]));
      const rounds = group.length > 1 ? ROUNDS : 1;
      for (let round = 0; round < rounds; round++)
        for (const c of round % 2 ? [...group].reverse() : group) {
          const target = c.target === "server" ? server : baseline;
          const duration = DURATION / rounds;
          const beside = c.beside && load(c.beside, server.url, { duration: WARMUP + duration });
          runs.get(c)!.push(await measure(kind, c, target.url, target.child.pid!, duration, round === 0));
          await beside;
        }
      results.push(...group.map((c) => combine(runs.get(c)!)));
    }
    const webhooksNamed = [WEBHOOKS_NONE, WEBHOOKS_THREE, ...(WEBHOOK_SPLIT ? [WEBHOOKS_TWO, WEBHOOKS_HANGING] : [])].some((name) => name.includes(ONLY ?? ""));
    if (!LAYERS && webhooksNamed) results.push(...(await webhookCases(kind, server)));
    for (const c of all) {
      const r = results.find((x) => x.name === c.name);
      const b = c.baseline && results.find((x) => x.name === c.baseline);
      if (r && b) r.ratio = Math.round((r.reqPerSec / b.reqPerSec) * 100) / 100;
    }
    const memory = withMix ? await memoryMix(kind, server, accounts.a, files, rssStartMb, () => peak) : undefined;
    return { results, memory, verdicts: LAYERS ? [] : verdicts(kind, results, all, memory) };
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

const verdict = (subject: string, rule: string, value: string, met: boolean) => `${subject} ${rule}: ${value}, ${met ? "met" : "NOT met"}`;
const clean = (r: Result) => !r.non2xx && !r.errors;
const failures = (r: Result) => (clean(r) ? "" : ` (non-2xx ${r.non2xx}, errors ${r.errors})`);

/**
 * The targets of issue 19 on one database: each case's goal (and the webhooks'), the scale
 * comparisons (with their baselines' for reference), and memory. A case with failed requests never
 * meets its target.
 */
function verdicts(db: string, results: Result[], all: Case[], memory: DbRun["memory"]): string[] {
  const out: string[] = [];
  const result = (name?: string) => results.find((r) => r.name === name);
  for (const r of results) {
    const goal = (r.name === WEBHOOKS_THREE ? WEBHOOKS_GOAL : all.find((c) => c.name === r.name)?.goal)?.(r);
    if (goal) out.push(verdict(`${db} ${r.name}`, goal.rule, goal.value + failures(r), goal.met && clean(r)));
  }
  for (const [label, smallName, bigName] of SCALE) {
    const [small, big] = [result(smallName), result(bigName)];
    if (!small || !big) continue;
    const [smallBase, bigBase] = [smallName, bigName].map((name) => result(all.find((c) => c.name === name)?.baseline));
    const baselines = smallBase && bigBase ? `; baselines ${pct(bigBase.reqPerSec / smallBase.reqPerSec)}` : "";
    out.push(
      verdict(
        `${db} ${label}`,
        `≥ ${pct(SCALE_FLOOR)}`,
        `${big.reqPerSec} vs ${small.reqPerSec} req/s (${pct(big.reqPerSec / small.reqPerSec)}${baselines})${failures(big)}${failures(small)}`,
        big.reqPerSec >= SCALE_FLOOR * small.reqPerSec && clean(big) && clean(small),
      ),
    );
  }
  if (memory)
    out.push(
      verdict(
        `${db} server RSS through ${memory.requests} requests (cases, then mixed reads and the dashboard's files)`,
        "< 250 MB",
        `${memory.rssEndMb} MB at the end, peak ${memory.rssPeakMb} MB${memory.non2xx ? ` (non-2xx ${memory.non2xx})` : ""}`,
        memory.rssPeakMb < 250 && !memory.non2xx,
      ),
    );
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
// The server measured is the one `npm start` runs: built JavaScript (and its webhook thread's).
if (!LAYERS) {
  process.stdout.write("building the server (turbo run build --filter=@cardctl/server...)…\n");
  execFileSync("npx", ["turbo", "run", "build", "--filter=@cardctl/server...", "--output-logs=errors-only"], { cwd: ROOT, stdio: "inherit" });
}
const m = machine();
process.stdout.write(`cardctl bench: ${m.nproc} × ${m.cpu}, ${m.ramGb} GB, node ${m.node}; ${DURATION} s per case, ${CONNECTIONS} connections\n`);

const all: Result[] = [];
const verdictLines: string[] = [];
let memory: DbRun["memory"];
for (const [i, kind] of kinds.entries()) {
  const run = await runDatabase(kind, stamp, i === 0);
  all.push(...run.results);
  verdictLines.push(...run.verdicts);
  memory ??= run.memory;
}

if (LAYERS) {
  process.stdout.write(`\n${TRANSPORTS ? table(all) : layersTable(all)}\n`);
  process.exit(0);
}

const md = table(all);
process.stdout.write(`\n${md}\n\n${verdictLines.map((v) => `- ${v}`).join("\n")}\n`);

if (!process.env.BENCH_NO_WRITE && !NO_IDEM) {
  mkdirSync(join(ROOT, "bench/results"), { recursive: true });
  const json = join(ROOT, "bench/results", `${stamp}.json`);
  writeFileSync(json, JSON.stringify({ machine: m, durationSeconds: DURATION, connections: CONNECTIONS, results: all, memory, targets: verdictLines }, null, 2));
  const head = `Latest run: ${m.date}, ${m.nproc} × ${m.cpu}, ${m.ramGb} GB RAM, node ${m.node}; ${DURATION} s per case after a ${WARMUP} s warm-up (a read and its baseline in ${ROUNDS} alternating rounds of ${Math.round((DURATION / ROUNDS) * 10) / 10} s), ${CONNECTIONS} connections (\`npm run bench\`, raw numbers in bench/results/).`;
  const mem = memory ? `\n\nMemory: server RSS ${memory.rssStartMb} MB at start, ${memory.rssEndMb} MB after ${memory.requests} requests (peak ${memory.rssPeakMb} MB).` : "";
  updateBenchmarksMd(`${head}\n\n${md}${mem}\n\nTargets (issue 19):\n\n${verdictLines.map((v) => `- ${v}`).join("\n")}`);
  process.stdout.write(`\nwrote ${json} and BENCHMARKS.md\n`);
}
