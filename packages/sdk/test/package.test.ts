import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServer, type TestServer } from "./helpers.js";

const run = promisify(execFile);
const pkgDir = resolve(import.meta.dirname, "..");
const repoRoot = resolve(pkgDir, "../..");

/** Every installed package name in a node_modules tree (nested ones too). */
function installed(nodeModules: string): string[] {
  const out: string[] = [];
  if (!existsSync(nodeModules)) return out;
  for (const e of readdirSync(nodeModules, { withFileTypes: true })) {
    if (!e.isDirectory() || e.name.startsWith(".")) continue;
    if (e.name.startsWith("@")) {
      for (const s of readdirSync(join(nodeModules, e.name))) {
        out.push(`${e.name}/${s}`);
        out.push(...installed(join(nodeModules, e.name, s, "node_modules")));
      }
    } else {
      out.push(e.name);
      out.push(...installed(join(nodeModules, e.name, "node_modules")));
    }
  }
  return out;
}

const ESM = `
import { Cardctl, CardctlError, NotFoundError } from "@cardctl/sdk";
const c = new Cardctl({ apiKey: process.env.CARDCTL_API_KEY, baseUrl: process.env.CARDCTL_BASE_URL });
const card = await c.cards.create({ amount_cents: 250, agent_id: "esm" });
const detail = await c.cards.get(card.id);
const closed = await c.cards.close(card.id);
let notFound = false;
try { await c.cards.get("card_nope"); } catch (e) { notFound = e instanceof NotFoundError && e instanceof CardctlError && e.status === 404; }
const ids = [];
for await (const x of c.cards.list({ agent_id: "esm", limit: 1 })) ids.push(x.id);
console.log(JSON.stringify({ id: card.id, status: card.status, secret: typeof detail.ephemeral_key_secret, closed: closed.status, notFound, ids }));
`;

const CJS = `
const { Cardctl, CardctlError, NotFoundError } = require("@cardctl/sdk");
(async () => {
  const c = new Cardctl({ apiKey: process.env.CARDCTL_API_KEY, baseUrl: process.env.CARDCTL_BASE_URL });
  const card = await c.cards.create({ amount_cents: 350, agent_id: "cjs" });
  const detail = await c.cards.get(card.id);
  const closed = await c.cards.close(card.id);
  let notFound = false;
  try { await c.cards.get("card_nope"); } catch (e) { notFound = e instanceof NotFoundError && e instanceof CardctlError && e.status === 404; }
  const ids = [];
  for await (const x of c.cards.list({ agent_id: "cjs", limit: 1 })) ids.push(x.id);
  console.log(JSON.stringify({ id: card.id, status: card.status, secret: typeof detail.ephemeral_key_secret, closed: closed.status, notFound, ids }));
})().catch((e) => { console.error(e); process.exit(1); });
`;

/** A TypeScript consumer: the published .d.ts must stand on its own (no workspace packages). */
const TS = `
import { Cardctl, PolicyViolationError, type CardCreateResult, type CreateAndWaitResult } from "@cardctl/sdk";
const c = new Cardctl({ apiKey: "sk_test_x" });
export async function agent(): Promise<string | undefined> {
  const r: CardCreateResult = await c.cards.create({ amount_cents: 100, purpose: "x" });
  if (r.status === "PENDING_APPROVAL") return r.approval_id;
  const w: CreateAndWaitResult = await c.cards.createAndWait({ amount_cents: 1 });
  if (w.status === "APPROVED") return w.card.ephemeral_key_secret;
  // @ts-expect-error amount_cents must be a number
  await c.cards.create({ amount_cents: "1" });
  const e = new PolicyViolationError({ code: "policy_violation", message: "" });
  return String(e.maxAmountCents);
}
`;

describe("the packed tarball in a fresh project", () => {
  let s: TestServer;
  let project: string;
  let packDir: string;
  beforeAll(async () => {
    s = await startServer();
    // npm pack runs the package's prepack script, which builds dist/ (JS and declarations) first.
    packDir = mkdtempSync(join(tmpdir(), "cardctl-sdk-pack-"));
    project = mkdtempSync(join(tmpdir(), "cardctl-sdk-consumer-"));
    const { stdout } = await run("npm", ["pack", "--json", "--pack-destination", packDir], { cwd: pkgDir });
    const tarball = join(packDir, JSON.parse(stdout.slice(stdout.search(/^\[$/m)))[0].filename);
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: "consumer", version: "1.0.0", private: true }));
    const args = ["install", tarball, "--no-audit", "--no-fund", "--no-package-lock"];
    try {
      await run("npm", [...args, "--offline"], { cwd: project });
    } catch {
      await run("npm", [...args, "--prefer-offline"], { cwd: project });
    }
  }, 180_000);
  afterAll(async () => {
    await s?.close();
    for (const d of [project, packDir]) if (d) rmSync(d, { recursive: true, force: true });
  });

  it("installs with zod as its only dependency: no server, Fastify, TypeORM or workspace packages", () => {
    const names = installed(join(project, "node_modules"));
    expect(names).toContain("@cardctl/sdk");
    for (const banned of ["fastify", "typeorm", "@cardctl/server", "@cardctl/api", "@cardctl/contract", "@trpc/server", "better-sqlite3", "mysql2", "stripe"])
      expect(names).not.toContain(banned);
    expect(names.filter((n) => !n.startsWith("@cardctl/")).sort()).toEqual(["zod"]);
  });

  for (const [file, source, agent] of [
    ["agent.mjs", ESM, "esm"],
    ["agent.cjs", CJS, "cjs"],
  ] as const) {
    it(`works from plain JavaScript through ${agent === "esm" ? "import" : "require"} (${file})`, async () => {
      writeFileSync(join(project, file), source);
      const { stdout } = await run(process.execPath, [file], {
        cwd: project,
        env: { ...process.env, CARDCTL_API_KEY: s.apiKey, CARDCTL_BASE_URL: s.url },
      });
      const out = JSON.parse(stdout.trim());
      expect(out).toMatchObject({ status: "OPEN", secret: "string", closed: "CLOSED", notFound: true });
      expect(out.ids).toEqual([out.id]);
    });
  }

  it("type-checks a TypeScript consumer against the published declarations alone", async () => {
    writeFileSync(join(project, "agent.ts"), TS);
    const tsc = join(repoRoot, "node_modules", "typescript", "bin", "tsc");
    // The first run also checks the .d.ts files themselves (and zod's); the others only resolve
    // through them: the @ts-expect-error in agent.ts fails should the types ever degrade to any.
    for (const [module, moduleResolution, skipLibCheck] of [
      ["nodenext", "nodenext", false],
      ["commonjs", "node10", true],
      ["preserve", "bundler", true],
    ] as const) {
      const compilerOptions = { strict: true, noEmit: true, esModuleInterop: true, skipLibCheck, target: "es2022", lib: ["es2022", "dom"], types: [], module, moduleResolution };
      writeFileSync(join(project, "tsconfig.json"), JSON.stringify({ compilerOptions, files: ["agent.ts"] }));
      await run(process.execPath, [tsc, "-p", "tsconfig.json"], { cwd: project }).catch((e) => {
        throw new Error(`tsc (${module}/${moduleResolution}) failed:\n${e.stdout}\n${e.stderr}`);
      });
    }
  }, 180_000);
});
