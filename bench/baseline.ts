/**
 * The baseline of `npm run bench`: a bare Fastify process on the same database as the server,
 * answering the same reads with the same SQL (the API key lookup by hash, then the endpoint's
 * queries), with no pipeline around it: no tRPC/OpenAPI adapter, no validation, no rate limit,
 * no logging. The bench compares the real server's req/s to this one's, in one run.
 *
 *   DATABASE_URL=sqlite:<path> | mysql://root@127.0.0.1:3306/<db>  node --import tsx bench/baseline.ts
 *
 * Prints "baseline listening on <url>" (port 0: any free port).
 */
import { createHash, randomBytes } from "node:crypto";
import Fastify from "fastify";

const url = process.env.DATABASE_URL ?? "";
type Row = Record<string, any>;
type Db = { all(sql: string, params: unknown[]): Promise<Row[]>; run(sql: string, params: unknown[]): Promise<void> };

async function open(): Promise<Db> {
  if (url.startsWith("sqlite:")) {
    const { default: Database } = await import("better-sqlite3");
    const db = new Database(url.slice("sqlite:".length));
    db.pragma("journal_mode = WAL");
    db.pragma("busy_timeout = 5000");
    db.pragma("synchronous = NORMAL");
    const cache = new Map<string, any>();
    const stmt = (sql: string) => {
      let s = cache.get(sql);
      if (!s) cache.set(sql, (s = db.prepare(sql)));
      return s;
    };
    return {
      all: async (sql, params) => stmt(sql).all(...params),
      run: async (sql, params) => void stmt(sql).run(...params),
    };
  }
  // As the server's statements run (packages/api/src/db/fast.ts runSql): prepared, on the pool.
  const mysql = await import("mysql2/promise");
  const pool = mysql.createPool({ uri: url, connectionLimit: 20, supportBigNumbers: true, bigNumberStrings: false, timezone: "Z", trace: false });
  return {
    all: async (sql, params) => (await pool.execute(sql, params))[0] as Row[],
    run: async (sql, params) => void (await pool.execute(sql, params)),
  };
}

const db = await open();
const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");
const iso = (ms: unknown) => new Date(Number(ms)).toISOString();
const VISIBLE = "('OPEN', 'USED', 'CLOSED')";

/** The server's auth step: sha256 of the bearer key, one lookup by hash. */
async function auth(header: string | undefined) {
  const m = /^Bearer\s+(sk_(test|live)_[A-Za-z0-9_-]{16,200})\s*$/.exec(header ?? "");
  if (!m) return null;
  const [key] = await db.all("SELECT * FROM api_keys WHERE secret_hash = ? LIMIT 1", [sha256(m[1]!)]);
  return key && key.revoked_at === null ? { accountId: key.account_id as string, mode: key.mode as string } : null;
}

const listView = (c: Row) => ({
  id: c.id,
  status: c.status,
  last_four: c.last_four ?? "",
  expiration: c.expiration ?? "",
  amount_cents: c.amount_cents,
  remaining_cents: c.remaining_cents,
  agent_id: c.agent_id,
  purpose: c.purpose,
  created_at: iso(c.created_at),
  expires_at: iso(c.expires_at),
  spent_cents: c.spent_cents,
});

const app = Fastify({ logger: false });

app.get("/v1/balance", async (req, reply) => {
  const p = await auth(req.headers.authorization);
  if (!p) return reply.code(401).send({ error: { code: "unauthorized" } });
  const [[money], [pending], [account]] = await Promise.all([
    db.all(
      `SELECT
         (SELECT COALESCE(SUM(held_cents), 0) FROM card_balances WHERE account_id = ? AND mode = ?) AS held,
         (SELECT COALESCE(SUM(open_cards), 0) FROM card_balances WHERE account_id = ? AND mode = ?) AS open,
         (SELECT COALESCE(SUM(CASE WHEN status = 'uncollected' THEN amount_cents ELSE -amount_cents END), 0) FROM payments
           WHERE account_id = ? AND mode = ? AND status IN ('uncollected', 'waived')) AS uncollected`,
      [p.accountId, p.mode, p.accountId, p.mode, p.accountId, p.mode],
    ),
    db.all(`SELECT COUNT(1) AS n FROM approvals ${url.startsWith("sqlite:") ? "INDEXED BY ix_approvals_list" : "FORCE INDEX (ix_approvals_list)"} WHERE account_id = ? AND mode = ? AND status = 'PENDING' AND expires_at > ?`, [
      p.accountId,
      p.mode,
      Date.now(),
    ]),
    db.all(
      "SELECT a.*, p.approval_required AS policy_approval_required, p.max_amount_cents AS policy_max_amount_cents FROM accounts a LEFT JOIN policies p ON p.account_id = a.id AND p.mode = ? WHERE a.id = ?",
      [p.mode, p.accountId],
    ),
  ]);
  return {
    held_cents: Number(money!.held),
    open_cards: Number(money!.open),
    pending_approvals: Number(pending!.n),
    max_per_card_cents: account!.policy_max_amount_cents,
    approval_required: !!account!.policy_approval_required,
    setup_complete: !!account!.kyb_verified && !!account!.payment_method,
    uncollected_cents: Number(money!.uncollected),
  };
});

app.get<{ Querystring: { limit?: string } }>("/v1/cards", async (req, reply) => {
  const p = await auth(req.headers.authorization);
  if (!p) return reply.code(401).send({ error: { code: "unauthorized" } });
  const limit = Number(req.query.limit ?? 20);
  // As the server: newest first on (account_id, mode, seq), index pinned, visible statuses kept in code.
  const rows = (
    await db.all(`SELECT * FROM cards ${url.startsWith("sqlite:") ? "INDEXED BY ix_cards_list" : "FORCE INDEX (ix_cards_list)"} WHERE account_id = ? AND mode = ? ORDER BY seq DESC LIMIT ${limit + 1}`, [p.accountId, p.mode])
  ).filter((c) => c.status === "OPEN" || c.status === "USED" || c.status === "CLOSED");
  return { data: rows.slice(0, limit).map(listView), has_more: rows.length > limit };
});

app.get<{ Params: { id: string } }>("/v1/cards/:id", async (req, reply) => {
  const p = await auth(req.headers.authorization);
  if (!p) return reply.code(401).send({ error: { code: "unauthorized" } });
  const [card] = await db.all(`SELECT * FROM cards WHERE id = ? AND account_id = ? AND mode = ? AND status IN ${VISIBLE} LIMIT 1`, [
    req.params.id,
    p.accountId,
    p.mode,
  ]);
  if (!card) return reply.code(404).send({ error: { code: "not_found" } });
  await db.all("SELECT * FROM accounts WHERE id = ? LIMIT 1", [p.accountId]);
  // The simulated processor's ephemeral key: one insert, as in the server.
  const secret = `ek_${p.mode}_${randomBytes(24).toString("base64url")}`;
  await db.run("INSERT INTO sim_ephemeral_keys (secret_hash, card_id, expires_at) VALUES (?, ?, ?)", [
    sha256(secret),
    card.processor_card_id,
    Date.now() + 15 * 60 * 1000,
  ]);
  return {
    ...listView(card),
    closed_at: card.closed_at === null ? null : iso(card.closed_at),
    processor_card_id: card.processor_card_id ?? "",
    ephemeral_key_secret: secret,
  };
});

app.get<{ Querystring: { limit?: string } }>("/v1/events", async (req, reply) => {
  const p = await auth(req.headers.authorization);
  if (!p) return reply.code(401).send({ error: { code: "unauthorized" } });
  const limit = Number(req.query.limit ?? 20);
  // As the server (EventService.list): newest first on (account_id, mode, seq), index pinned.
  const rows = await db.all(
    `SELECT * FROM events ${url.startsWith("sqlite:") ? "INDEXED BY ix_events_list" : "FORCE INDEX (ix_events_list)"} WHERE account_id = ? AND mode = ? ORDER BY seq DESC LIMIT ${limit + 1}`,
    [p.accountId, p.mode],
  );
  const view = (e: Row) => ({
    id: e.id,
    object: "event",
    type: e.type,
    created_at: iso(e.created_at),
    mode: e.mode,
    actor: { type: e.actor_type, id: e.actor_id },
    data: { object: JSON.parse(e.data) },
  });
  return { data: rows.slice(0, limit).map(view), has_more: rows.length > limit };
});

const address = await app.listen({ port: 0, host: "127.0.0.1" });
process.stdout.write(`baseline listening on ${address}\n`);
for (const signal of ["SIGINT", "SIGTERM"] as const)
  process.once(signal, async () => {
    await app.close();
    process.exit(0);
  });
