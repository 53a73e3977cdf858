import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { join, resolve } from "node:path";

const DASHBOARD = resolve(import.meta.dirname, "../../dashboard");

/** The newest modification time under a file or folder. */
function newest(path: string): number {
  const stat = statSync(path);
  return stat.isDirectory() ? Math.max(0, ...readdirSync(path).map((name) => newest(join(path, name)))) : stat.mtimeMs;
}

/**
 * The server serves the dashboard's build at /. turbo builds it before the tests; a direct
 * `npx vitest run` builds it here when it is missing or older than its sources.
 */
export default function setup() {
  const built = join(DASHBOARD, "dist/index.html");
  const sources = ["src", "index.html", "vite.config.ts"].map((p) => newest(join(DASHBOARD, p)));
  if (!existsSync(built) || Math.max(...sources) > statSync(built).mtimeMs)
    execFileSync("npm", ["run", "build", "--silent"], { cwd: DASHBOARD, stdio: "inherit" });
}
