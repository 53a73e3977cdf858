import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

export const BIN = resolve(import.meta.dirname, "../bin/cardctl.js");

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
  json: () => any;
}

export interface RunOptions {
  env?: Record<string, string | undefined>;
  /** Written to stdin, then stdin is closed. */
  input?: string;
  /** Called with the child's stdin instead of `input`, for conversations. */
  drive?: (child: ReturnType<typeof spawn>) => void | Promise<void>;
  timeoutMs?: number;
  /** The executable to run instead of `node bin/cardctl.js` (e.g. an installed cardctl). */
  bin?: string;
}

/** A fresh, empty config directory (CARDCTL_CONFIG_DIR). */
export function tempConfigDir(): string {
  return mkdtempSync(join(tmpdir(), "cardctl-cli-test-"));
}

/** Base environment: nothing inherited that would change the CLI's behaviour. */
function baseEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined || k.startsWith("CARDCTL_") || k === "NO_COLOR" || k === "FORCE_COLOR" || k === "COLUMNS" || k === "XDG_CONFIG_HOME") continue;
    env[k] = v;
  }
  return env;
}

/** Runs the BUILT binary (node bin/cardctl.js) asynchronously, so an in-process server can answer. */
export function run(args: string[], o: RunOptions = {}): Promise<RunResult> {
  return new Promise((done, fail) => {
    const env = { ...baseEnv() };
    for (const [k, v] of Object.entries(o.env ?? {})) {
      if (v === undefined) delete env[k];
      else env[k] = v;
    }
    const [cmd, pre] = o.bin ? [o.bin, []] : [process.execPath, [BIN]];
    const child = spawn(cmd, [...pre, ...args], { env, stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      fail(new Error(`cardctl ${args.join(" ")} timed out\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, o.timeoutMs ?? 30_000);
    child.on("error", fail);
    child.on("close", (code) => {
      clearTimeout(timer);
      done({
        code: code ?? -1,
        stdout,
        stderr,
        json: () => {
          try {
            return JSON.parse(stdout);
          } catch {
            throw new Error(`stdout is not JSON: ${stdout}\nstderr: ${stderr}`);
          }
        },
      });
    });
    if (o.drive) void Promise.resolve(o.drive(child)).catch(fail);
    else child.stdin.end(o.input ?? "");
  });
}
