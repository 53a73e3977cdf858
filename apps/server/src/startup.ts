import { hostname } from "node:os";
import { ConfigError, maskSecrets, maskUrl, type Config } from "./config.js";

/**
 * Start-up failures are printed as ONE line on stderr, saying what is wrong and what to do, with
 * credentials masked; never a stack (LOG_LEVEL=debug or trace adds it). The process exits 1.
 */
export class StartupError extends Error {}

type Phase = "config" | "database" | "listen";

interface ErrorLike {
  code?: string;
  errno?: number;
  message?: string;
  sqlMessage?: string;
  driverError?: ErrorLike;
  stack?: string;
  cause?: unknown;
}

/**
 * The text to print for an error that stopped the start in `phase`, and whether it is a known case
 * (an unknown one gets a hint that LOG_LEVEL=debug shows its stack). Credentials are masked.
 */
export function describeStartupError(err: unknown, phase: Phase, config?: Config): { text: string; known: boolean } {
  const text = describe(err, phase, config);
  // Known texts are masked too: a ConfigError or StartupError may quote a URL.
  return text === undefined ? { text: unknownError(err, phase, config), known: false } : { text: maskSecrets(text), known: true };
}

function unknownError(err: unknown, phase: Phase, config?: Config): string {
  const message = errorMessage(err);
  if (phase === "listen" && config) return `cannot listen on ${config.host}:${config.port}: ${message}`;
  // (the "database" phase also builds the HTTP pipeline: only a driver's or a socket's error names the database)
  const code = (err as ErrorLike)?.code ?? (err as ErrorLike)?.driverError?.code ?? "";
  if (phase === "database" && config && /^(SQLITE_|ER_|E[A-Z]+$)/.test(code)) {
    if (config.databaseUrl.startsWith("sqlite:")) return `SQLite database ${config.databaseUrl.slice("sqlite:".length)}: ${message}`;
    return `database ${maskUrl(config.databaseUrl)}: ${message}`;
  }
  return message;
}

function errorMessage(err: unknown): string {
  const e = (err ?? {}) as ErrorLike;
  return oneLine(e.sqlMessage ?? e.driverError?.sqlMessage ?? e.driverError?.message ?? e.message ?? String(err));
}

function describe(err: unknown, phase: Phase, config?: Config): string | undefined {
  if (err instanceof ConfigError || err instanceof StartupError) return err.message;
  const e = (err ?? {}) as ErrorLike;
  const code = e.code ?? e.driverError?.code;
  const message = errorMessage(err);
  if (phase === "listen" && config) {
    const where = `${config.host}:${config.port}`;
    if (code === "EADDRINUSE")
      return `port ${config.port} on ${config.host} is already in use (another cardctl?): stop the program using it, or set PORT to a free port`;
    if (code === "EACCES") return `not allowed to listen on ${where} (ports below 1024 need privileges): set PORT to 1024 or above`;
    if (code === "EADDRNOTAVAIL") return `HOST ${config.host} is not an address of this machine: set HOST to one of its addresses (0.0.0.0 for all)`;
    if (code === "ENOTFOUND" || code === "EAI_AGAIN") return `HOST ${config.host} does not resolve: set HOST to an address of this machine`;
    return undefined;
  }
  if (phase === "database" && config) {
    const db = maskUrl(config.databaseUrl);
    if (config.databaseUrl.startsWith("sqlite:")) {
      const path = config.databaseUrl.slice("sqlite:".length);
      if (code === "SQLITE_NOTADB") return `${path} is not an SQLite database (DATABASE_URL ${db}): point DATABASE_URL at another file`;
      if (code === "SQLITE_CANTOPEN" || code === "EEXIST" || code === "ENOENT" || code === "EACCES" || code === "EROFS" || code === "ENOTDIR" || code === "EPERM")
        return `cannot open the SQLite database ${path} (${code}): make its folder writable, or set DATABASE_URL=sqlite:<a writable path>`;
      return undefined;
    }
    const { host, user } = mysqlParts(config.databaseUrl);
    if (code === "ECONNREFUSED") return `cannot reach MySQL at ${host} (connection refused): start the server, or fix the host and port in DATABASE_URL ${db}`;
    if (code === "ENOTFOUND" || code === "EAI_AGAIN") return `MySQL host in DATABASE_URL ${db} does not resolve: fix the host`;
    if (code === "ETIMEDOUT") return `MySQL at ${host} did not answer in time: check that it runs and that a firewall lets this machine in (DATABASE_URL ${db})`;
    if (code === "ER_ACCESS_DENIED_ERROR" || code === "ER_NOT_SUPPORTED_AUTH_MODE")
      return `MySQL at ${host} refused user '${user}' (${message}): fix the user or password in DATABASE_URL ${db}`;
    if (code === "ER_BAD_DB_ERROR") return `MySQL database does not exist (${message}): create it first, or let this user create it (DATABASE_URL ${db})`;
    return undefined;
  }
  return undefined;
}

const oneLine = (text: string) => maskSecrets(text).replace(/\s*\n\s*/g, " ").trim();

/** Writes the one line and exits 1. */
export function fail(err: unknown, phase: Phase, config?: Config): never {
  const { text, known } = describeStartupError(err, phase, config);
  let line = `cardctl: cannot start: ${text.replace(/\s*\n\s*/g, " ")}`;
  const level = config?.logLevel ?? process.env.LOG_LEVEL;
  const stack = (err as { stack?: string })?.stack;
  if ((level === "debug" || level === "trace") && stack && !(err instanceof ConfigError)) line += `\n${maskSecrets(stack)}`;
  else if (!known) line += " (LOG_LEVEL=debug shows the stack)";
  process.stderr.write(line + "\n");
  process.exit(1);
}

function mysqlParts(url: string): { host: string; user: string; database: string; base: string } {
  const u = new URL(url.replace(/^mariadb:/, "mysql:"));
  const database = decodeURIComponent(u.pathname.replace(/^\//, ""));
  const host = `${u.hostname}:${u.port || 3306}`;
  const user = decodeURIComponent(u.username);
  u.pathname = "/";
  return { host, user, database, base: u.toString() };
}

/**
 * MySQL: connects without selecting the database, so a missing one is told apart from other
 * failures, and creates it when the URL's user may (`CREATE DATABASE … CHARACTER SET utf8mb4`;
 * the first migration sets its collation). Returns the database's name when it was created; a
 * user who may not create it gets a StartupError with the statement to run.
 */
export async function ensureMysqlDatabase(url: string): Promise<string | undefined> {
  const { base, database, user, host } = mysqlParts(url);
  const mysql = (await import("mysql2/promise")).default;
  const conn = await mysql.createConnection({ uri: base, connectTimeout: 10_000 });
  try {
    const [rows] = await conn.query("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", [database]);
    if ((rows as unknown[]).length > 0) return undefined;
    const quoted = "`" + database.replace(/`/g, "``") + "`";
    try {
      await conn.query(`CREATE DATABASE IF NOT EXISTS ${quoted} CHARACTER SET utf8mb4`);
    } catch (err) {
      const code = (err as ErrorLike).code;
      if (code === "ER_DBACCESS_DENIED_ERROR" || code === "ER_ACCESS_DENIED_ERROR" || code === "ER_SPECIFIC_ACCESS_DENIED_ERROR")
        throw new StartupError(
          `MySQL database '${database}' does not exist on ${host} and user '${user}' may not create it: create it first: CREATE DATABASE ${quoted} CHARACTER SET utf8mb4; GRANT ALL ON ${quoted}.* TO '${user}'@'%'; then start again`,
        );
      throw err;
    }
    return database;
  } finally {
    await conn.end().catch(() => undefined);
  }
}

export type Secrets = { adminToken?: string; demoAccountId?: string; demoApiKey?: string; demoOwnerInviteUrl?: string };

/**
 * The first start's secrets, shown once: on stdout, never through the logger (a JSON line in json
 * format). Printed with the ready banner, or before the error line when listening fails (they are
 * stored already, so the next start would not show them).
 */
export function printSecrets(config: Config, secrets: Secrets) {
  if (!secrets.adminToken && !secrets.demoApiKey) return;
  const msg = "cardctl: first start. These secrets are shown once; store them now.";
  if (config.logFormat === "json") {
    const line = {
      level: 30,
      time: Date.now(),
      pid: process.pid,
      hostname: hostname(),
      msg,
      ...(secrets.adminToken ? { admin_token: secrets.adminToken } : {}),
      ...(secrets.demoApiKey ? { demo_account_id: secrets.demoAccountId, test_api_key: secrets.demoApiKey } : {}),
      ...(secrets.demoOwnerInviteUrl ? { demo_owner_sign_in_url: secrets.demoOwnerInviteUrl } : {}),
    };
    process.stdout.write(JSON.stringify(line) + "\n");
    return;
  }
  const lines = ["", msg, ""];
  if (secrets.adminToken) lines.push(`  Admin token (operator API):   ${secrets.adminToken}`);
  if (secrets.demoApiKey) lines.push(`  Demo account:                 ${secrets.demoAccountId}`, `  Test API key (demo account):  ${secrets.demoApiKey}`);
  if (secrets.demoOwnerInviteUrl) lines.push(`  Dashboard sign-in (demo owner, one-time link, 24 h): ${secrets.demoOwnerInviteUrl}`);
  process.stdout.write(lines.join("\n") + "\n\n");
}

/** What the ready banner and the JSON ready line report. */
export interface Ready {
  url: string;
  publicUrl: string;
  database: string;
  processor: string;
}

/**
 * The ready output, written to stdout whatever LOG_LEVEL says (tests and scripts wait for
 * "cardctl listening on <url>"). Pretty: a short banner; json: one JSON line like pino's.
 */
export function printReady(config: Config, ready: Ready, secrets: Secrets) {
  const docs = `${ready.url}/docs`;
  printSecrets(config, secrets);
  if (config.logFormat === "json") {
    const base = { level: 30, time: Date.now(), pid: process.pid, hostname: hostname() };
    const lines: string[] = [];
    lines.push(
      JSON.stringify({
        ...base,
        msg: `cardctl listening on ${ready.url}`,
        url: ready.url,
        docs,
        ...(ready.publicUrl !== ready.url ? { public_url: ready.publicUrl } : {}),
        database: ready.database,
        processor: ready.processor,
      }),
    );
    process.stdout.write(lines.join("\n") + "\n");
    return;
  }
  const lines: string[] = [];
  lines.push(
    `cardctl listening on ${ready.url}`,
    `  API docs    ${docs}`,
    ...(ready.publicUrl !== ready.url ? [`  Public URL  ${ready.publicUrl}`] : []),
    `  Database    ${ready.database}`,
    `  Processor   ${ready.processor}`,
    "",
  );
  process.stdout.write(lines.join("\n"));
}
