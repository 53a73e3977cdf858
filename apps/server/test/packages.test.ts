import { execFile } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServer, type TestServer } from "./harness.js";

/**
 * The publishable packages (@cardctl/sdk, @cardctl/cli, @cardctl/mcp) install as their READMEs say, from a
 * fresh clone: `npm pack` (whose `prepack` builds dist/, which a clone does not have) gives
 * tarballs that install into an empty project with nothing but their declared dependencies; the
 * CLI runs; the SDK talks to a real server; and the READMEs' SDK examples run as written against
 * the packed SDK.
 */
const run = promisify(execFile);
const root = resolve(import.meta.dirname, "../../..");

/** The ```ts block that follows a heading (the first one after it) in a Markdown file. */
function codeBlockAfter(file: string, heading: string, nth = 0): string {
  const md = readFileSync(join(root, file), "utf8");
  const at = md.indexOf(`\n${heading}\n`);
  if (at < 0) throw new Error(`no heading "${heading}" in ${file}`);
  const blocks = [...md.slice(at).matchAll(/^```ts\n([\s\S]*?)^```$/gm)];
  return blocks[nth]![1]!;
}

/** TypeScript to an ES module that Node runs. */
const toJs = (source: string) =>
  ts.transpileModule(source, { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } }).outputText;

const npmEnv = { ...process.env, npm_config_loglevel: "warn", npm_config_update_notifier: "false" };

interface Packed {
  filename: string;
  files: string[];
  /** package.json as it is inside the tarball. */
  manifest: Record<string, any>;
}

describe("npm pack from a fresh clone, installed into an empty project", () => {
  let clone: string;
  let packDir: string;
  let project: string;
  const packed: Record<"sdk" | "cli" | "mcp", Packed> = {} as never;
  let installLog = "";
  let s: TestServer;

  beforeAll(async () => {
    // A clone: sources only, no dist/ (node_modules shared with this checkout: dependencies as
    // `npm install` would have put them).
    clone = mkdtempSync(join(tmpdir(), "cardctl-clone-"));
    const skip = /(^|\/)(node_modules|dist|\.turbo|test)(\/|$)/;
    cpSync(join(root, "package.json"), join(clone, "package.json"));
    cpSync(join(root, "tooling"), join(clone, "tooling"), { recursive: true, filter: (src) => !skip.test(src.slice(root.length)) });
    for (const p of ["contract", "sdk", "cli", "mcp"])
      cpSync(join(root, "packages", p), join(clone, "packages", p), { recursive: true, filter: (src) => !skip.test(src.slice(root.length)) });
    symlinkSync(join(root, "node_modules"), join(clone, "node_modules"), "dir");
    expect(existsSync(join(clone, "packages/sdk/dist"))).toBe(false);
    expect(existsSync(join(clone, "packages/cli/dist"))).toBe(false);

    packDir = mkdtempSync(join(tmpdir(), "cardctl-tarballs-"));
    // One after the other: two cores.
    for (const p of ["sdk", "cli", "mcp"] as const) {
      const { stdout } = await run("npm", ["pack", "--json", "--pack-destination", packDir], { cwd: join(clone, "packages", p), env: npmEnv });
      const info = JSON.parse(stdout.slice(stdout.search(/^\[$/m)))[0];
      const unpacked = join(packDir, p);
      mkdirSync(unpacked);
      await run("tar", ["-xzf", join(packDir, info.filename), "-C", unpacked, "package/package.json"]);
      packed[p] = {
        filename: join(packDir, info.filename),
        files: info.files.map((f: { path: string }) => f.path),
        manifest: JSON.parse(readFileSync(join(unpacked, "package/package.json"), "utf8")),
      };
    }

    project = mkdtempSync(join(tmpdir(), "cardctl-consumer-"));
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: "consumer", version: "1.0.0", private: true }));
    const args = ["install", packed.sdk.filename, packed.cli.filename, "--no-audit", "--no-fund", "--no-package-lock"];
    const install = async (mode: string) => {
      const r = await run("npm", [...args, mode], { cwd: project, env: npmEnv });
      installLog = r.stdout + r.stderr;
    };
    // zod and commander come from the npm cache when they are in it, else from the registry.
    await install("--offline").catch(() => install("--prefer-offline"));

    s = await startServer();
  }, 300_000);

  afterAll(async () => {
    await s?.close();
    for (const d of [clone, packDir, project]) if (d) rmSync(d, { recursive: true, force: true });
  });

  it("packs dist/ built by prepack: a clone has none", () => {
    expect(packed.sdk.files).toEqual(expect.arrayContaining(["package.json", "README.md", "dist/index.js", "dist/index.cjs", "dist/index.d.ts", "dist/index.d.cts"]));
    expect(packed.cli.files).toEqual(expect.arrayContaining(["package.json", "README.md", "bin/cardctl.js", "dist/cli.js"]));
    for (const p of [packed.sdk, packed.cli]) expect(p.manifest.scripts.prepack).toBeDefined();
  });

  it("ships no install-time scripts (no prepare: npm warns about it on a global install), and no workspace dependency", () => {
    for (const p of [packed.sdk, packed.cli]) {
      for (const script of ["prepare", "preinstall", "install", "postinstall"]) expect(p.manifest.scripts).not.toHaveProperty(script);
      expect(p.manifest.private).toBeUndefined();
    }
    expect(Object.keys(packed.sdk.manifest.dependencies)).toEqual(["zod"]);
    expect(Object.keys(packed.cli.manifest.dependencies)).toEqual(["commander"]);
    expect(installLog).not.toMatch(/install-scripts|prepare/);
    const installed = readdirNames(join(project, "node_modules"));
    expect(installed).toEqual(["@cardctl/cli", "@cardctl/sdk", "commander", "zod"]);
  });

  it("runs the CLI: cardctl --version, --help, and a call to the server", async () => {
    const bin = join(project, "node_modules/.bin/cardctl");
    const version = await run(bin, ["--version"], { cwd: project });
    expect(version.stdout.trim()).toBe(packed.cli.manifest.version);
    const help = await run(bin, ["--help"], { cwd: project });
    expect(help.stdout).toMatch(/^Usage: cardctl/);
    for (const c of ["cards", "approvals", "policy", "balance", "accounts", "keys"]) expect(help.stdout).toMatch(new RegExp(`^  ${c}\\b`, "m"));
    const configDir = mkdtempSync(join(tmpdir(), "cardctl-config-"));
    try {
      const balance = await run(bin, ["balance", "--json"], {
        cwd: project,
        env: { ...process.env, CARDCTL_API_KEY: s.apiKey, CARDCTL_BASE_URL: s.url, CARDCTL_CONFIG_DIR: configDir },
      });
      expect(JSON.parse(balance.stdout)).toMatchObject({ setup_complete: true });
    } finally {
      rmSync(configDir, { recursive: true, force: true });
    }
  });

  /** Runs an ES module in the consumer project, with the server's URL and an API key. */
  async function node(file: string, source: string, env: Record<string, string>) {
    writeFileSync(join(project, file), source);
    const r = await run(process.execPath, [file], { cwd: project, env: { ...process.env, CARDCTL_BASE_URL: s.url, ...env } });
    return r.stdout.trim();
  }

  it("imports the SDK from an ES module and calls the server", async () => {
    const out = await node(
      "sdk-call.mjs",
      `import { Cardctl, NotFoundError } from "@cardctl/sdk";
       const c = new Cardctl();
       const card = await c.cards.create({ amount_cents: 700, agent_id: "packed" });
       const balance = await c.balance.retrieve();
       const closed = await c.cards.close(card.id);
       const missing = await c.cards.get("card_nope").catch((e) => e instanceof NotFoundError);
       console.log(JSON.stringify({ status: card.status, open: balance.open_cards, closed: closed.status, missing }));`,
      { CARDCTL_API_KEY: s.apiKey },
    );
    expect(JSON.parse(out)).toMatchObject({ status: "OPEN", closed: "CLOSED", missing: true });
  });

  describe("the SDK README's headline example, as written", () => {
    const example = codeBlockAfter("packages/sdk/README.md", "## An agent buying something");
    const remote = '"https://cards.example.com"';

    /**
     * The README's code, run with a stand-in for the browser checkout (it makes the purchase with
     * the test helper, or fails when told to), and its result or error printed.
     */
    async function buyDomain(scenario: "purchase" | "checkout-fails", key: string) {
      expect(example).toContain(remote);
      const source = `
        let cardId = null;
        async function checkoutWithIssuingElements(processorCardId, ephemeralKeySecret) {
          if (!processorCardId || !String(ephemeralKeySecret).startsWith("ek_")) throw new Error("nothing to reveal the card with");
          cardId = (await cardctl.cards.list({ agent_id: "research-agent", limit: 1 })).data[0].id;
          if (process.env.SCENARIO === "checkout-fails") throw new Error("the merchant's checkout failed");
          const r = await cardctl.testHelpers.purchase(cardId, { amount_cents: 1299, merchant: "Registrar Inc." });
          if (!r.approved) throw new Error("declined: " + r.decline_reason);
        }
        ${toJs(example.replace(remote, "process.env.CARDCTL_BASE_URL"))}
        let out;
        try { out = { result: await buyDomain() }; } catch (e) { out = { error: String(e.message), type: e.constructor.name }; }
        console.log(JSON.stringify({ ...out, cardId }));`;
      return JSON.parse(await node(`readme-${scenario}.mjs`, source, { CARDCTL_API_KEY: key, SCENARIO: scenario }));
    }

    it("buys: the card ends USED and is not closed (closing a USED card is 409 card_not_open)", async () => {
      const account = await s.newAccount({ name: "README purchase" });
      const key = await account.key();
      const out = await buyDomain("purchase", key);
      expect(out.error).toBeUndefined();
      expect(out.result).toMatch(/^Bought with card ending \d{4}$/);
      const card = await s.request("GET", `/v1/cards/${out.cardId}`, { key });
      expect(card.body.status).toBe("USED");
      const close = await s.request("POST", `/v1/cards/${out.cardId}/close`, { key });
      expect([close.status, close.body.error?.code]).toEqual([409, "card_not_open"]);
    });

    it("closes the card when the checkout fails, and passes the error on", async () => {
      const account = await s.newAccount({ name: "README checkout fails" });
      const key = await account.key();
      const out = await buyDomain("checkout-fails", key);
      expect(out).toMatchObject({ error: "the merchant's checkout failed", type: "Error" });
      const card = await s.request("GET", `/v1/cards/${out.cardId}`, { key });
      expect(card.body.status).toBe("CLOSED");
      const balance = await s.request("GET", "/v1/balance", { key });
      expect(balance.body).toMatchObject({ held_cents: 0, open_cards: 0 });
    });

    it("answers a policy violation with the policy maximum", async () => {
      const account = await s.newAccount({ name: "README policy" });
      const key = await account.key();
      await s.request("PUT", "/v1/policies/default", { key, body: { max_amount_cents: 1000 } });
      const out = await buyDomain("purchase", key);
      expect(out).toMatchObject({ result: "Too expensive: the limit is 1000 cents", cardId: null });
    });
  });

  it("runs the SDK README's step-by-step example", async () => {
    const block = codeBlockAfter("packages/sdk/README.md", "## An agent buying something", 1);
    const source = `import { Cardctl } from "@cardctl/sdk";
      const cardctl = new Cardctl();
      ${toJs(block)}
      console.log(JSON.stringify({ status: created.status }));`;
    expect(JSON.parse(await node("readme-steps.mjs", source, { CARDCTL_API_KEY: s.apiKey }))).toEqual({ status: "OPEN" });
  });

  it("runs the root README's SDK example", async () => {
    const block = codeBlockAfter("README.md", "## TypeScript SDK for agents");
    const local = '"http://127.0.0.1:4000"';
    expect(block).toContain(local);
    const account = await s.newAccount({ name: "root README" });
    const key = await account.key();
    const out = await node("readme-root.mjs", toJs(block.replace(local, "process.env.CARDCTL_BASE_URL")), { CARDCTL_API_KEY: key });
    // The example closes the card it got, so no OPEN card is left to list.
    expect(out).toBe("");
    const cards = await s.request("GET", "/v1/cards", { key });
    expect(cards.body.data.map((c: { status: string }) => c.status)).toEqual(["CLOSED"]);
  });

  describe("@cardctl/mcp, installed alone into an empty project", () => {
    let mcpProject: string;

    beforeAll(async () => {
      mcpProject = mkdtempSync(join(tmpdir(), "cardctl-mcp-consumer-"));
      writeFileSync(join(mcpProject, "package.json"), JSON.stringify({ name: "agent-host", version: "1.0.0", private: true }));
      const args = ["install", packed.mcp.filename, "--no-audit", "--no-fund", "--no-package-lock"];
      const install = (mode: string) => run("npm", [...args, mode], { cwd: mcpProject, env: npmEnv });
      // The MCP SDK and zod from the npm cache when they are in it, else from the registry.
      await install("--offline").catch(() => install("--prefer-offline"));
    }, 300_000);
    afterAll(() => mcpProject && rmSync(mcpProject, { recursive: true, force: true }));

    it("packs the bundle with the MCP SDK and zod as its only dependencies", () => {
      expect(packed.mcp.files).toEqual(expect.arrayContaining(["package.json", "bin/cardctl-mcp.js", "dist/main.js", "dist/index.js", "dist/index.d.ts"]));
      expect(Object.keys(packed.mcp.manifest.dependencies).sort()).toEqual(["@modelcontextprotocol/sdk", "zod"]);
      expect(packed.mcp.manifest.bin).toEqual({ "cardctl-mcp": "./bin/cardctl-mcp.js" });
      for (const script of ["prepare", "preinstall", "install", "postinstall"]) expect(packed.mcp.manifest.scripts).not.toHaveProperty(script);
    });

    it("starts with npx cardctl-mcp", async () => {
      const version = await run("npx", ["--no-install", "cardctl-mcp", "--version"], { cwd: mcpProject, env: npmEnv });
      expect(version.stdout.trim()).toBe(packed.mcp.manifest.version);
      const noKey = await run("npx", ["--no-install", "cardctl-mcp"], { cwd: mcpProject, env: { ...npmEnv, CARDCTL_API_KEY: "" } }).catch((e) => e);
      expect(noKey.code).toBe(2);
      expect(noKey.stderr).toContain("CARDCTL_API_KEY is not set");
    });

    it("serves the tools to an MCP client as the README's Claude Desktop / Cursor snippet starts it", async () => {
      const { Client } = await import("@modelcontextprotocol/sdk/client/index.js");
      const { StdioClientTransport } = await import("@modelcontextprotocol/sdk/client/stdio.js");
      const md = readFileSync(join(root, "README.md"), "utf8");
      const snippet = JSON.parse(/\*\*Claude Desktop\*\*[\s\S]*?```json\n([\s\S]*?)```/.exec(md)![1]!).mcpServers.cardctl;
      expect(snippet.env).toMatchObject({ CARDCTL_API_KEY: expect.stringMatching(/^sk_test_/), CARDCTL_BASE_URL: "http://127.0.0.1:4000" });
      const account = await s.newAccount({ name: "MCP package" });
      const client = new Client({ name: "package-test", version: "1.0.0" });
      await client.connect(
        new StdioClientTransport({
          command: snippet.command,
          args: snippet.args,
          env: { ...snippet.env, CARDCTL_API_KEY: await account.key("test", "agent"), CARDCTL_BASE_URL: s.url, PATH: `${join(mcpProject, "node_modules/.bin")}:${process.env.PATH}` },
          stderr: "pipe",
        }),
      );
      try {
        const tools = (await client.listTools()).tools.map((t) => t.name);
        expect(tools).toContain("request_card");
        expect(tools).not.toContain("approve_request");
        const r = (await client.callTool({ name: "request_card", arguments: { amount_cents: 300, idempotency_key: "package-test-1" } })) as unknown as { structuredContent: { outcome: string } };
        expect(r.structuredContent.outcome).toBe("issued");
      } finally {
        await client.close();
      }
    });
  });
});

/** Package names directly under node_modules (scoped ones as @scope/name). */
function readdirNames(nodeModules: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(nodeModules, { withFileTypes: true })) {
    if (e.name.startsWith(".")) continue;
    if (e.name.startsWith("@")) for (const sub of readdirSync(join(nodeModules, e.name))) out.push(`${e.name}/${sub}`);
    else out.push(e.name);
  }
  return out.sort();
}
