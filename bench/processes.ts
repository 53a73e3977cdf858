/** The processes the bench scripts start and watch: the built server, the baseline, the webhook receivers. */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** The node flags `npm start` gives the server (the root package.json's start script): the bench runs it the same way. */
export const START_FLAGS = (() => {
  const start: string = JSON.parse(readFileSync(resolve(ROOT, "package.json"), "utf8")).scripts.start;
  const m = /\bnode ((?:--\S+ )*)apps\/server\/dist\/main\.js/.exec(start);
  if (!m) throw new Error(`The start script no longer runs node apps/server/dist/main.js: ${start}`);
  return m[1]!.split(" ").filter(Boolean);
})();

export interface Proc {
  child: ChildProcess;
  url: string;
  /** What it printed on stdout up to its banner (a first start's secrets, for one). */
  output: string;
  stop(): Promise<void>;
}

/** Spawns node (with tsx for a .ts script) and waits for "<banner> <url>" on stdout. */
export function startProcess(script: string, env: Record<string, string>, banner: RegExp, extraArgs: string[] = []): Promise<Proc> {
  const child = spawn(process.execPath, [...extraArgs, ...(script.endsWith(".ts") ? ["--import", "tsx"] : []), script], {
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
          output: out,
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

/**
 * CPU time (user + system) in ms of a process, or of one of its threads given `tid`, from
 * /proc/<pid>/stat or /proc/<pid>/task/<tid>/stat (clock ticks of 10 ms).
 */
export const cpuMs = (pid: number, tid?: number): number => {
  const fields = readFileSync(tid === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${tid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
};

export interface FreshServer extends Proc {
  /** The SQLite file it serves. */
  file: string;
  /** The demo account's test key, printed by its first start. */
  key: string;
}

/** A build's server (its dist folder) as `npm start` runs it, on a fresh SQLite file. */
export async function startFresh(dist: string): Promise<FreshServer> {
  const file = join(mkdtempSync(join(tmpdir(), "cardctl-fresh-")), "db.sqlite");
  const env = { PORT: "0", DATABASE_URL: `sqlite:${file}`, LOG_LEVEL: "warn", RATE_LIMIT_PER_HOUR: "1000000000", MAINTENANCE_INTERVAL_MS: "0" };
  const proc = await startProcess(join(resolve(dist), "main.js"), env, /cardctl listening on ([^\s"]+)/, START_FLAGS);
  return { ...proc, file, key: /sk_test_[A-Za-z0-9_-]+/.exec(proc.output)![0] };
}

/** An API request's headers: the key, and a JSON body. */
export const apiHeaders = (key: string) => ({ authorization: `Bearer ${key}`, "content-type": "application/json" });

/** The `n`th card creation as the bench sends them: with its own Idempotency-Key, for an agent. */
export const createCardRequest = (key: string, n: number) => ({
  method: "POST" as const,
  path: "/v1/cards",
  body: '{"amount_cents":100,"agent_id":"ab"}',
  headers: { ...apiHeaders(key), "idempotency-key": `ab-${Date.now()}-${n}` },
});
