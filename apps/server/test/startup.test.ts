/**
 * Production start and start-up output (issue 14, points 5-7): the server built to JavaScript
 * (`npm run build`, tsup) runs with plain node; start-up failures print one line on stderr with
 * credentials masked and exit non-zero; LOG_FORMAT=json prints JSON lines only, LOG_FORMAT=pretty
 * (the terminal's default) a banner and no per-request lines.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import mysql from "mysql2/promise";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../src/config.js";
import { ADMIN_TOKEN, dbKind } from "./harness.js";

const SERVER_DIR = join(dirname(fileURLToPath(import.meta.url)), "..");
const MAIN = join(SERVER_DIR, "dist", "main.js");
const PASSWORD = "s3cret-Pa55";

interface Run {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  exited: Promise<number | null>;
  waitFor(re: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  stop(): Promise<void>;
}

/** `node dist/main.js`, as `npm start` runs it, with only the given settings beside the test's defaults. */
function start(env: Record<string, string>): Run {
  const child = spawn(process.execPath, [MAIN], {
    cwd: SERVER_DIR,
    env: { PATH: process.env.PATH, ADMIN_TOKEN, PORT: "0", MAINTENANCE_INTERVAL_MS: "0", LOG_FORMAT: "json", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const waitFor = async (re: RegExp, timeoutMs = 90_000) => {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const m = out.match(re);
      if (m) return m;
      if (child.exitCode !== null) throw new Error(`exited ${child.exitCode} before ${re}; stdout:\n${out}\nstderr:\n${err}`);
      if (Date.now() > until) throw new Error(`timed out waiting for ${re}; stdout:\n${out}\nstderr:\n${err}`);
      await new Promise((r) => setTimeout(r, 25));
    }
  };
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    await exited;
  };
  return { child, stdout: () => out, stderr: () => err, exited, waitFor, stop };
}

const listening = /cardctl listening on (http:\/\/[^\s"]+)/;

/** A start that must fail: exit code non-zero, exactly one line on stderr, no stack, no password. */
async function expectOneLineFailure(env: Record<string, string>): Promise<string> {
  const run = start(env);
  const code = await Promise.race([run.exited, new Promise((r) => setTimeout(() => r("timeout"), 90_000))]);
  if (code === "timeout") await run.stop();
  expect(code, `stdout:\n${run.stdout()}\nstderr:\n${run.stderr()}`).not.toBe("timeout");
  expect(code).not.toBe(0);
  const err = run.stderr();
  expect(err.endsWith("\n")).toBe(true);
  const lines = err.trimEnd().split("\n");
  expect(lines, err).toHaveLength(1);
  expect(lines[0]).toMatch(/^cardctl: cannot start: /);
  expect(err).not.toMatch(/\n\s+at /);
  expect(err + run.stdout()).not.toContain(PASSWORD);
  return lines[0]!;
}

let dir: string;
const sqliteUrl = (name: string) => `sqlite:${join(dir, name)}`;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "cardctl-start-"));
  // What `npm start` does first (through turbo): build the server to dist/.
  execFileSync("npm", ["run", "build", "--silent"], { cwd: SERVER_DIR, stdio: "pipe" });
  expect(existsSync(MAIN)).toBe(true);
}, 120_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// Starting processes on a busy two-core machine can take a while: generous timeouts.
describe("the built server (node dist/main.js)", { timeout: 180_000 }, () => {
  it("starts on SQLite, migrates, answers /v1/openapi.json and /health, and prints JSON lines only with LOG_FORMAT=json", async () => {
    const run = start({ DATABASE_URL: sqliteUrl("built.sqlite"), LOG_FORMAT: "json", LOG_LEVEL: "info" });
    try {
      const url = (await run.waitFor(listening))[1]!;
      const doc = await fetch(`${url}/v1/openapi.json`);
      expect(doc.status).toBe(200);
      expect(((await doc.json()) as { openapi: string }).openapi).toMatch(/^3\./);
      expect(await (await fetch(`${url}/health`)).json()).toEqual({ ok: true });
      // Migrated: an API call that reads and writes the database works.
      const key = run.stdout().match(/sk_test_[A-Za-z0-9]+/)?.[0];
      expect(key).toBeDefined();
      const balance = await fetch(`${url}/v1/balance`, { headers: { authorization: `Bearer ${key}` } });
      expect(balance.status).toBe(200);
      await run.waitFor(/("msg":"request completed"[^\n]*\n[^]*){3}/);

      const lines = run.stdout().trimEnd().split("\n");
      const parsed = lines.map((l) => JSON.parse(l) as { level: number; msg: string; url?: string; docs?: string; database?: string });
      const ready = parsed.find((l) => l.msg.startsWith("cardctl listening on "))!;
      expect(ready).toMatchObject({ url, docs: `${url}/docs`, database: sqliteUrl("built.sqlite"), processor: "simulated" });
      expect(parsed.filter((l) => l.msg === "request completed").length).toBeGreaterThanOrEqual(3);
      expect(run.stderr()).toBe("");
    } finally {
      await run.stop();
    }
  });

  it("LOG_FORMAT=pretty: a ready banner, readable log lines, and no line per request at the default level", async () => {
    const run = start({ DATABASE_URL: sqliteUrl("pretty.sqlite"), LOG_FORMAT: "pretty" });
    try {
      const url = (await run.waitFor(listening))[1]!;
      await run.waitFor(/Processor {3}simulated/);
      const out = run.stdout();
      expect(out).toContain(`cardctl listening on ${url}\n`);
      expect(out).toContain(`  API docs    ${url}/docs\n`);
      expect(out).toContain(`  Database    ${sqliteUrl("pretty.sqlite")}\n`);
      expect(out).toContain("Test API key (demo account):");
      expect(out).toMatch(/Dashboard sign-in \(demo owner, one-time link, 24 h\): http:\/\/\S+\/invite#inv_\w{40}\n/);
      expect(out).toMatch(/INFO: Server listening at/);
      const before = out.length;
      for (const path of ["/health", "/v1/openapi.json", "/nope"]) await fetch(url + path);
      await new Promise((r) => setTimeout(r, 300));
      const after = run.stdout().slice(before);
      expect(after).not.toMatch(/request completed|incoming request/);
      for (const line of run.stdout().split("\n").filter(Boolean)) expect(() => JSON.parse(line), line).toThrow();
    } finally {
      await run.stop();
    }
  });

  it("LOG_FORMAT=pretty with LOG_LEVEL=debug shows requests again", async () => {
    const run = start({ DATABASE_URL: sqliteUrl("pretty.sqlite"), LOG_FORMAT: "pretty", LOG_LEVEL: "debug" });
    try {
      const url = (await run.waitFor(listening))[1]!;
      await fetch(`${url}/health`);
      await run.waitFor(/INFO.*request completed/);
    } finally {
      await run.stop();
    }
  });

  it("a Redis that does not answer: one warning line, then rate limits per instance (the server runs)", async () => {
    const run = start({ DATABASE_URL: sqliteUrl("rl.sqlite"), REDIS_URL: `redis://:${PASSWORD}@127.0.0.1:6390`, LOG_FORMAT: "pretty" });
    try {
      const url = (await run.waitFor(listening))[1]!;
      expect((await fetch(`${url}/health`)).status).toBe(200);
      const warnings = run.stdout().split("\n").filter((l) => /redis/i.test(l));
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(/WARN: Redis unavailable \(.*ECONNREFUSED.*\): rate limits are counted per instance/);
      expect(run.stdout() + run.stderr()).not.toContain(PASSWORD);
      expect(run.stderr()).toBe("");
    } finally {
      await run.stop();
    }
  });

  it("HOST=::1: listens on the IPv6 loopback, links bracket the address", async () => {
    const run = start({ DATABASE_URL: sqliteUrl("ipv6.sqlite"), HOST: "::1" });
    try {
      const url = (await run.waitFor(listening))[1]!;
      expect(url).toMatch(/^http:\/\/\[::1\]:\d+$/);
      expect(await (await fetch(`${url}/health`)).json()).toEqual({ ok: true });
      // The default PUBLIC_URL (http://[::1]:PORT) is the base of the demo owner's sign-in link.
      expect(run.stdout()).toMatch(/"demo_owner_sign_in_url":"http:\/\/\[::1\]:\d+\/invite#inv_\w+"/);
      expect(run.stderr()).toBe("");
    } finally {
      await run.stop();
    }
  });
});

describe("start-up failures: one line on stderr, what is wrong and what to do, credentials masked, exit 1", { timeout: 180_000 }, () => {
  it("an unsupported DATABASE_URL", async () => {
    const line = await expectOneLineFailure({ DATABASE_URL: `postgres://app:${PASSWORD}@db.example/cardctl` });
    expect(line).toContain("DATABASE_URL 'postgres://app:***@db.example/cardctl' is not supported: use sqlite:<path>");
  });

  it.each([
    [{ PORT: "http" }, "PORT must be an integer from 0 to 65535, got 'http'"],
    [{ LOG_FORMAT: "xml" }, "LOG_FORMAT must be 'pretty' or 'json', got 'xml'"],
    [{ PORT: " " }, "PORT is blank: set it to an integer from 0 to 65535, or unset it for the default (4000)"],
    [{ STRIPE_TEST_SECRET_KEY: "sk_live_0123456789abcdef" }, "STRIPE_TEST_SECRET_KEY must be a test-mode Stripe secret key, starting with sk_test_ or rk_test_ (Stripe Dashboard → Developers → API keys, in test mode), got 'sk_live_…'"],
    [{ ADMIN_TOKEN: "adm_0123456789abcdef " }, "ADMIN_TOKEN must be printable ASCII with no whitespace: a client sends it as 'Authorization: Bearer <ADMIN_TOKEN>', which could not carry it; fix it, or unset it to have one generated"],
  ])("an invalid setting %o", async (env, message) => {
    expect(await expectOneLineFailure({ DATABASE_URL: sqliteUrl("config.sqlite"), ...env })).toBe(`cardctl: cannot start: ${message}`);
  });

  // The same path (loadConfig throws a ConfigError, main prints its message), checked in-process.
  it.each([
    [{ PORT: "70000" }, "PORT must be an integer from 0 to 65535, got '70000'"],
    [{ LOG_LEVEL: "loud" }, "LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent, got 'loud'"],
    [{ PROCESSOR: "adyen" }, "PROCESSOR must be 'simulated' or 'stripe', got 'adyen'"],
    [{ PROCESSOR: "stripe" }, "PROCESSOR=stripe needs STRIPE_TEST_SECRET_KEY or STRIPE_LIVE_SECRET_KEY"],
    [{ CARD_TTL_SECONDS: "999999" }, "CARD_TTL_SECONDS must be an integer from 1 to 345600, got '999999'"],
    [{ PUBLIC_URL: "cardctl.example" }, "PUBLIC_URL must be an http:// or https:// URL"],
    [{ DATABASE_URL: `mysql://root:${PASSWORD}@127.0.0.1:3306/` }, "DATABASE_URL 'mysql://root:***@127.0.0.1:3306/' names no database: add it"],
    [{ DATABASE_URL: `mysql://root:${PASSWORD}@[bad/cardctl` }, "DATABASE_URL 'mysql://root:***@[bad/cardctl' is not a valid URL"],
    [{ DATABASE_URL: "sqlite:" }, "DATABASE_URL 'sqlite:' names no file"],
    [{ TRUST_PROXY: "true" }, "TRUST_PROXY must be the addresses or CIDR ranges of your proxies (e.g. 127.0.0.1,10.0.0.0/8) or how many hops sit in front of the server (1 to 10), got 'true'"],
    [{ TRUST_PROXY: "10.0.0.0/33,::1,lb.internal" }, "got '10.0.0.0/33,lb.internal'"],
    [{ TRUST_PROXY: "0" }, "got '0'"],
  ])("loadConfig refuses %o", (env, message) => {
    let error: unknown;
    try {
      loadConfig(env as NodeJS.ProcessEnv);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toContain(message);
    expect((error as Error).message).not.toContain(PASSWORD);
  });

  it("loadConfig: TRUST_PROXY takes addresses and ranges, or a hop count; unset trusts no header", () => {
    expect(loadConfig({}).trustProxy).toBeUndefined();
    expect(loadConfig({ TRUST_PROXY: "127.0.0.1, 10.0.0.0/8,fd00::/8" }).trustProxy).toEqual(["127.0.0.1", "10.0.0.0/8", "fd00::/8"]);
    expect(loadConfig({ TRUST_PROXY: "2" }).trustProxy).toBe(2);
  });

  it("loadConfig: LOG_FORMAT defaults to pretty on a terminal, json otherwise", () => {
    expect(loadConfig({}, true).logFormat).toBe("pretty");
    expect(loadConfig({}, false).logFormat).toBe("json");
    expect(loadConfig({ LOG_FORMAT: "json" }, true).logFormat).toBe("json");
    expect(loadConfig({ LOG_FORMAT: "pretty" }, false).logFormat).toBe("pretty");
  });

  it("a port in use", async () => {
    const blocker: Server = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, "127.0.0.1", resolve));
    const port = (blocker.address() as { port: number }).port;
    try {
      const line = await expectOneLineFailure({ DATABASE_URL: sqliteUrl("port.sqlite"), PORT: String(port), LOG_FORMAT: "pretty" });
      expect(line).toBe(
        `cardctl: cannot start: port ${port} on 127.0.0.1 is already in use (another cardctl?): stop the program using it, or set PORT to a free port`,
      );
    } finally {
      blocker.close();
    }
  });

  // The URL parser masks the password; when the URL does not parse, all between :// and the last @ is masked.
  it.each([
    [`mysql://app:p@${PASSWORD}@127.0.0.1:1/cardctl`, "cannot reach MySQL at 127.0.0.1:1 (connection refused): start the server, or fix the host and port in DATABASE_URL mysql://app:***@127.0.0.1:1/cardctl"],
    [`mysql://app:pa/${PASSWORD}@127.0.0.1:1/cardctl`, "DATABASE_URL 'mysql://app:***@127.0.0.1:1/cardctl' is not a valid URL"],
    [`mysql://app:12/${PASSWORD}@127.0.0.1:1/cardctl`, "DATABASE_URL 'mysql://app:***@127.0.0.1:1/cardctl' is not a valid URL"],
  ])("a DATABASE_URL password with @ or /, masked whole: %s", async (url, message) => {
    expect(await expectOneLineFailure({ DATABASE_URL: url })).toContain(message);
  });

  it("a MySQL server that does not answer", async () => {
    const line = await expectOneLineFailure({ DATABASE_URL: `mysql://root:${PASSWORD}@127.0.0.1:1/cardctl` });
    expect(line).toContain("cannot reach MySQL at 127.0.0.1:1 (connection refused)");
    expect(line).toContain("mysql://root:***@127.0.0.1:1/cardctl");
  });

  it("an SQLite file that is not a database", async () => {
    const file = join(dir, "notes.txt");
    writeFileSync(file, "not a database\n".repeat(100));
    const line = await expectOneLineFailure({ DATABASE_URL: `sqlite:${file}` });
    expect(line).toContain("is not an SQLite database");
  });
});

// MySQL: on the MariaDB of TEST_DATABASE_URL (npm run test:mysql).
describe.runIf(dbKind === "mysql")("MySQL: a database that does not exist, user rights", { timeout: 180_000 }, () => {
  const root = (process.env.TEST_DATABASE_URL ?? "mysql://root@127.0.0.1:3306/").replace(/\/[^/]*$/, "/");
  const host = `${new URL(root).hostname}:${new URL(root).port || 3306}`;
  const suffix = Math.random().toString(36).slice(2, 10);
  const dbName = `cardctl_start_${suffix}`;
  const user = `cardctl_u_${suffix}`;
  let admin: mysql.Connection;

  beforeAll(async () => {
    admin = await mysql.createConnection(root);
    await admin.query(`CREATE USER '${user}'@'%' IDENTIFIED BY '${PASSWORD}'`);
  });
  afterAll(async () => {
    await admin.query(`DROP DATABASE IF EXISTS \`${dbName}\``);
    await admin.query(`DROP USER IF EXISTS '${user}'@'%'`);
    await admin.end();
  });

  it("a user who may not create it gets the statement to run", async () => {
    const line = await expectOneLineFailure({ DATABASE_URL: `mysql://${user}:${PASSWORD}@${host}/${dbName}` });
    expect(line).toBe(
      `cardctl: cannot start: MySQL database '${dbName}' does not exist on ${host} and user '${user}' may not create it: create it first: CREATE DATABASE \`${dbName}\` CHARACTER SET utf8mb4; GRANT ALL ON \`${dbName}\`.* TO '${user}'@'%'; then start again`,
    );
  });

  it("a wrong password", async () => {
    const line = await expectOneLineFailure({ DATABASE_URL: `mysql://${user}:wrong-${PASSWORD}@${host}/${dbName}` });
    expect(line).toContain(`refused user '${user}'`);
    expect(line).toContain(`mysql://${user}:***@${host}/${dbName}`);
  });

  it("a password with @: the server starts, its ready line and banner mask it whole", async () => {
    const atUser = `cardctl_at_${suffix}`;
    const atDb = `${dbName}_at`;
    const atPassword = `p@${PASSWORD}`;
    await admin.query(`CREATE USER '${atUser}'@'%' IDENTIFIED BY '${atPassword}'`);
    await admin.query(`GRANT ALL ON \`${atDb}\`.* TO '${atUser}'@'%'`);
    const env = { DATABASE_URL: `mysql://${atUser}:${atPassword}@${host}/${atDb}`, LOG_LEVEL: "info" };
    try {
      for (const format of ["json", "pretty"]) {
        const run = start({ ...env, LOG_FORMAT: format });
        try {
          await run.waitFor(format === "json" ? /"database":"[^"]*"/ : /Processor {3}simulated/);
          const masked = `mysql://${atUser}:***@${host}/${atDb}`;
          expect(run.stdout()).toContain(format === "json" ? `"database":"${masked}"` : `  Database    ${masked}\n`);
          expect(run.stdout() + run.stderr()).not.toContain(PASSWORD);
        } finally {
          await run.stop();
        }
      }
    } finally {
      await admin.query(`DROP DATABASE IF EXISTS \`${atDb}\``);
      await admin.query(`DROP USER IF EXISTS '${atUser}'@'%'`);
    }
  });

  it("a user who may create it: the server creates it, migrates and starts", async () => {
    const run = start({ DATABASE_URL: `${root}${dbName}`, LOG_LEVEL: "info" });
    try {
      const url = (await run.waitFor(listening))[1]!;
      expect((await fetch(`${url}/health`)).status).toBe(200);
      expect(run.stdout()).toContain(`created the MySQL database '${dbName}'`);
      const [rows] = await admin.query(`SELECT COUNT(*) AS n FROM \`${dbName}\`.migrations`);
      expect((rows as Array<{ n: number }>)[0]!.n).toBeGreaterThan(0);
    } finally {
      await run.stop();
    }
    // The next start finds it and says nothing about it.
    const again = start({ DATABASE_URL: `${root}${dbName}`, LOG_LEVEL: "info" });
    try {
      await again.waitFor(listening);
      expect(again.stdout()).not.toContain("created the MySQL database");
    } finally {
      await again.stop();
    }
  });
});
