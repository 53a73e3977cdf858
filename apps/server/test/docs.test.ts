import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { buildOpenApiDocument } from "@cardctl/api";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServer, type TestServer } from "./harness.js";

/**
 * The repository's Markdown is true to itself: every relative link of a README or of docs/ names
 * a file that exists (and a heading that exists, for `#anchor` links); nothing points outside the
 * clone (the old `../shared/…` and "DESIGN x.y" references); and docs/operator-api.md lists every
 * route of the operator API, no more.
 */
const root = resolve(import.meta.dirname, "../../..");

/** README*.md anywhere in the repository, BENCHMARKS.md and everything under docs/. */
function markdownFiles(dir = root): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (e.name === "node_modules" || e.name.startsWith(".") || e.name === "dist" || e.name === "data") continue;
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...markdownFiles(p));
    else if (e.name.endsWith(".md")) {
      const rel = relative(root, p);
      if (/^README/i.test(e.name) || rel.startsWith("docs/") || rel === "BENCHMARKS.md") out.push(p);
    }
  }
  return out.sort();
}

/** The text outside fenced code blocks and inline code spans. */
function prose(md: string): string {
  return md.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, "").replace(/`[^`\n]*`/g, "");
}

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, -1, -2 … for repeats. */
function anchors(md: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  const withoutCode = md.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, "");
  for (const m of withoutCode.matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const text = m[1]!.replace(/\[([^\]]*)\]\([^)]*\)/g, "$1").replace(/[`*_]/g, (c) => (c === "_" ? "_" : ""));
    const slug = text
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .replace(/\s/g, "-");
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    out.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return out;
}

interface Link {
  file: string;
  target: string;
}

function relativeLinks(file: string): Link[] {
  const text = prose(readFileSync(file, "utf8"));
  const links: Link[] = [];
  // [text](target "title") and ![alt](target); reference definitions: [id]: target
  for (const m of text.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) links.push({ file, target: m[1]! });
  for (const m of text.matchAll(/^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$/gm)) links.push({ file, target: m[1]! });
  return links.filter((l) => !/^[a-z][a-z0-9+.-]*:/i.test(l.target));
}

describe("Markdown links", () => {
  const files = markdownFiles();

  it("finds the READMEs and the docs", () => {
    const rel = files.map((f) => relative(root, f));
    for (const f of ["README.md", "packages/sdk/README.md", "packages/cli/README.md", "docs/interface-spec.md", "docs/operator-api.md"])
      expect(rel).toContain(f);
  });

  it("every relative link names an existing file, and an existing heading when it has an #anchor", () => {
    const broken: string[] = [];
    let checked = 0;
    for (const file of files) {
      for (const { target } of relativeLinks(file)) {
        checked++;
        const [pathPart, anchor] = target.split("#", 2) as [string, string | undefined];
        const dest = pathPart === "" ? file : resolve(dirname(file), decodeURIComponent(pathPart));
        const where = `${relative(root, file)}: (${target})`;
        if (!dest.startsWith(root + "/") && dest !== root) {
          broken.push(`${where} points outside the repository`);
          continue;
        }
        if (!existsSync(dest)) {
          broken.push(`${where}: no such file`);
          continue;
        }
        if (anchor && statSync(dest).isFile() && dest.endsWith(".md") && !anchors(readFileSync(dest, "utf8")).has(anchor.toLowerCase()))
          broken.push(`${where}: no heading #${anchor} in ${relative(root, dest)}`);
      }
    }
    expect(broken).toEqual([]);
    expect(checked).toBeGreaterThan(5);
  });

  it("nothing refers to files outside the clone (../shared, DESIGN sections)", () => {
    const found: string[] = [];
    for (const file of files) {
      readFileSync(file, "utf8")
        .split("\n")
        .forEach((line, i) => {
          if (/\.\.\/shared\b|\bDESIGN(\.md|\s+\d)/.test(line)) found.push(`${relative(root, file)}:${i + 1}: ${line.trim()}`);
        });
    }
    expect(found).toEqual([]);
  });

  it("docs/interface-spec.md is the interface contract (its sections, endpoints and error codes)", () => {
    const spec = readFileSync(join(root, "docs/interface-spec.md"), "utf8");
    for (const s of ["## 4. Endpoints", "## 5. Authentication", "## 7. Errors", "## 8. Limits"]) expect(spec).toContain(s);
    for (const e of ["POST /v1/cards", "GET /v1/cards/:id", "POST /v1/cards/:id/close", "GET /v1/balance", "PUT /v1/policies/default", "POST /v1/approvals/:id/reject"])
      expect(spec).toContain(e);
  });
});

describe("docs/operator-api.md", () => {
  const doc = readFileSync(join(root, "docs/operator-api.md"), "utf8");
  /** "METHOD /path" of every row of the Routes table, path parameters as {id}. */
  const documented = [...doc.matchAll(/^\| `(GET|POST|PUT|DELETE) \/admin\/v1(\/[^`]*)` \|/gm)].map((m) => `${m[1]} ${m[2]!.replace(/:(\w+)/g, "{$1}")}`).sort();

  it("documents every route of the operator router, and only those", () => {
    const openapi = buildOpenApiDocument("http://127.0.0.1:4000");
    const actual: string[] = [];
    for (const [path, item] of Object.entries(openapi.paths ?? {})) {
      if (!path.startsWith("/admin/v1/")) continue;
      for (const method of ["get", "post", "put", "delete", "patch"] as const)
        if ((item as Record<string, unknown>)[method]) actual.push(`${method.toUpperCase()} ${path.slice("/admin/v1".length)}`);
    }
    expect(actual.length).toBeGreaterThan(5);
    expect(documented).toEqual(actual.sort());
  });

  it("names, for each route, a cardctl command that exists (or says there is none)", () => {
    const rows = doc.split("\n").filter((l) => /^\| `(GET|POST) \/admin\/v1/.test(l));
    const commands = readFileSync(join(root, "packages/cli/src/commands/operator.ts"), "utf8");
    for (const row of rows) {
      const cli = row.split(" | ").at(-1)!;
      const m = /`cardctl (\w+) ([\w-]+)/.exec(cli);
      if (!m) {
        expect(cli).toMatch(/none/);
        continue;
      }
      const [, group, sub] = m;
      expect(commands).toContain(`command("${group}")`);
      expect(commands).toContain(`.command("${sub}")`);
    }
  });

  describe("against a running server", () => {
    let s: TestServer;
    beforeAll(async () => {
      s = await startServer();
    });
    afterAll(async () => {
      await s?.close();
    });

    it("behaves as the conventions and examples say", async () => {
      // 401 without or with a wrong token, and an API key is no admin token
      for (const authorization of [undefined, "Bearer adm_wrong", `Bearer ${s.apiKey}`]) {
        const r = await s.request("GET", `/admin/v1/accounts/${s.accountId}`, { key: null, headers: authorization ? { authorization } : {} });
        expect(r.status).toBe(401);
        expect(r.body.error.code).toBe("unauthorized");
      }
      const made = await s.admin("POST", "/accounts", { name: "Acme" });
      expect(made.status).toBe(201);
      expect(made.body).toMatchObject({ name: "Acme", kyb_verified: false, payment_method: null, cardholder: null });
      expect(made.body.id).toMatch(/^acct_/);
      const id = made.body.id;
      // strict bodies
      const unknownField = await s.admin("POST", "/accounts", { name: "x", extra: 1 });
      expect([unknownField.status, unknownField.body.error.code]).toEqual([400, "validation_error"]);
      expect((await s.admin("POST", `/accounts/${id}/kyb`, { verified: true })).body.kyb_verified).toBe(true);
      expect((await s.admin("POST", `/accounts/${id}/payment_method`, { payment_method: "pm_card_visa" })).body.payment_method).toBe("pm_card_visa");
      const key = await s.admin("POST", `/accounts/${id}/keys`, { mode: "test", role: "agent", name: "research agent" });
      expect(key.status).toBe(201);
      expect(key.body).toMatchObject({ mode: "test", role: "agent", name: "research agent" });
      expect(key.body.secret).toMatch(/^sk_test_/);
      // the admin token is no API key
      const asKey = await s.request("GET", "/v1/balance", { key: null, headers: { authorization: "Bearer adm_test_0123456789abcdefghijklmnopqrstuv" } });
      expect(asKey.status).toBe(401);
      const list = await s.admin("GET", `/accounts/${id}/keys`);
      expect(list.body.data[0]).toMatchObject({ id: key.body.id, prefix: "sk_test_", last4: key.body.secret.slice(-4), revoked_at: null });
      expect(list.body.data[0]).not.toHaveProperty("secret");
      const revoked = await s.admin("POST", `/keys/${key.body.id}/revoke`);
      expect(revoked.body).toMatchObject({ ok: true });
      expect((await s.admin("POST", `/keys/${key.body.id}/revoke`)).body.revoked_at).toBe(revoked.body.revoked_at);
      expect((await s.request("GET", "/v1/balance", { key: key.body.secret })).status).toBe(401);
      expect((await s.admin("GET", "/accounts/acct_nope/keys")).status).toBe(404);
      const payments = await s.admin("GET", "/payments?status=uncollected");
      expect(payments.status).toBe(200);
      expect(payments.body).toEqual({ data: [] });
      expect((await s.admin("GET", "/cards/attention")).body).toEqual({ data: [] });
      expect((await s.admin("POST", "/cards/card_nope/retry_recovery")).status).toBe(404);
      const owners = await s.admin("POST", `/accounts/${id}/owners`, { email: "a@b.example" });
      expect(owners.status).toBe(201);
      expect(owners.body).toMatchObject({ account_id: id, email: "a@b.example", invite_url: expect.stringContaining("/invite#inv_") });
    });
  });
});
