import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { ADMIN_TOKEN, dbKind, freshDatabase } from "./harness.js";

const SERVER_DIR = join(dirname(fileURLToPath(import.meta.url)), "..");

export interface ServerProcess {
  url: string;
  /** Secrets printed on a first start. */
  apiKey?: string;
  child: ChildProcess;
  /** Everything printed so far. */
  output(): string;
  /** Resolves when the output contains `text`. */
  waitFor(text: string | RegExp, timeoutMs?: number): Promise<string>;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/** A database several server processes can share: a SQLite file in a temp folder, or a fresh MariaDB database. */
export async function processDatabase(): Promise<{ url: string; drop: () => Promise<void> }> {
  if (dbKind === "mysql") return freshDatabase();
  const dir = mkdtempSync(join(tmpdir(), "cardctl-proc-"));
  return { url: `sqlite:${join(dir, "db.sqlite")}`, drop: async () => rmSync(dir, { recursive: true, force: true }) };
}

/** Starts `src/main.ts` as its own process (as `npm start` does), on port 0, and waits until it listens. */
export async function spawnServer(env: Record<string, string>): Promise<ServerProcess> {
  return spawnStarting(env).ready();
}

/**
 * Starts the server process without waiting: the start-up recovery pass runs before it listens,
 * and a test may need to act while it runs. `ready()` waits until it listens.
 */
export function spawnStarting(env: Record<string, string>): Pick<ServerProcess, "output" | "waitFor" | "stop"> & { ready(): Promise<ServerProcess> } {
  const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
    cwd: SERVER_DIR,
    env: { ...process.env, PORT: "0", ADMIN_TOKEN, LOG_LEVEL: "warn", MAINTENANCE_INTERVAL_MS: "0", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  const listeners = new Set<() => void>();
  const onData = (d: Buffer) => {
    out += d.toString();
    for (const l of listeners) l();
  };
  child.stdout!.on("data", onData);
  child.stderr!.on("data", onData);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));

  const waitFor = (text: string | RegExp, timeoutMs = 30_000) =>
    new Promise<string>((resolve, reject) => {
      const check = () => {
        const m = typeof text === "string" ? (out.includes(text) ? text : null) : out.match(text)?.[0];
        if (m) {
          listeners.delete(check);
          clearTimeout(timer);
          resolve(m);
        }
      };
      const timer = setTimeout(() => {
        listeners.delete(check);
        reject(new Error(`timed out waiting for ${text}; output:\n${out}`));
      }, timeoutMs);
      listeners.add(check);
      child.once("exit", () => {
        if (listeners.delete(check)) {
          clearTimeout(timer);
          reject(new Error(`server exited before ${text}; output:\n${out}`));
        }
      });
      check();
    });

  const stop = async (signal: NodeJS.Signals = "SIGTERM") => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    await exited;
  };
  const output = () => out;
  return {
    output,
    waitFor,
    stop,
    async ready() {
      // (a plain line on a terminal, a JSON line's message otherwise: the URL ends at a quote)
      const listening = await waitFor(/cardctl listening on http:\/\/[^\s"]+/);
      return { url: listening.replace("cardctl listening on ", ""), apiKey: out.match(/sk_test_[A-Za-z0-9]+/)?.[0], child, output, waitFor, stop };
    },
  };
}
