import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServer, type TestServer } from "../../../apps/server/test/harness.js";
import { run, tempConfigDir } from "./helpers.js";

let s: TestServer;
beforeAll(async () => {
  s = await startServer();
});
afterAll(async () => {
  await s?.close();
});

describe("npm pack + npm install -g", () => {
  it("gives a working cardctl whose only dependency is commander", async () => {
    const work = mkdtempSync(join(tmpdir(), "cardctl-pack-"));
    const npm = (args: string[], cwd: string) =>
      execFileSync("npm", args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, npm_config_loglevel: "error" } });
    // `npm test` has just built dist/; --ignore-scripts keeps prepack from rebuilding it (tsup
    // empties dist/ first) while the other test files run the CLI from it. That prepack builds a
    // clone's tarball is apps/server/test/packages.test.ts's part.
    npm(["pack", "--ignore-scripts", "--pack-destination", work], resolve(import.meta.dirname, ".."));
    const tgz = readdirSync(work).find((f) => f.endsWith(".tgz"))!;
    const prefix = join(work, "prefix");
    npm(["install", "-g", "--prefix", prefix, "--prefer-offline", "--no-audit", "--no-fund", join(work, tgz)], work);

    const installed = join(prefix, "lib", "node_modules", "@cardctl", "cli");
    const pkg = JSON.parse(readFileSync(join(installed, "package.json"), "utf8"));
    expect(Object.keys(pkg.dependencies)).toEqual(["commander"]);
    expect(readdirSync(join(installed, "node_modules"))).toEqual(["commander"]);

    const bin = join(prefix, "bin", "cardctl");
    // asynchronously: the server runs in this process
    const r = await run(["balance", "--json"], {
      bin,
      env: { CARDCTL_API_KEY: s.apiKey, CARDCTL_BASE_URL: s.url, CARDCTL_CONFIG_DIR: tempConfigDir() },
    });
    expect(r.code, r.stderr).toBe(0);
    expect(r.json()).toMatchObject({ setup_complete: true });
  });
});
