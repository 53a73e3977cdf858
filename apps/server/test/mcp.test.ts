import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { luhnValid } from "./fake-stripe.js";
import { dbKind, expectError, processor, startServer, type TestServer } from "./harness.js";
import { PAN_LIKE, sleep } from "./helpers.js";

/**
 * Issue 15, point 4: the MCP server. The official MCP SDK client talks to cardctl-mcp over stdio
 * (the built package's bin, as Claude Desktop starts it) and to /mcp on the server over Streamable
 * HTTP, with the same tools; agent-role keys never see the humans' tools.
 */
const MCP_BIN = join(dirname(fileURLToPath(import.meta.url)), "../../../packages/mcp/bin/cardctl-mcp.js");
const AGENT_TOOLS = [
  "check_policy",
  "close_card",
  "get_balance",
  "get_card",
  "get_policy",
  "list_approvals",
  "list_cards",
  "request_card",
  "reveal_card",
  "wait_for_approval",
];
const HUMAN_TOOLS = ["approve_request", "reject_request", "update_policy"];

type Transport = "stdio" | "http";
type Structured = Record<string, any>;

describe(`MCP server (${processor}, ${dbKind})`, () => {
  let s: TestServer;
  const clients: Client[] = [];

  beforeAll(async () => {
    s = await startServer();
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await s.close();
  });

  async function connect(transport: Transport, key: string): Promise<Client> {
    const client = new Client({ name: "cardctl-test", version: "1.0.0" });
    const t =
      transport === "stdio"
        ? new StdioClientTransport({
            command: process.execPath,
            args: [MCP_BIN],
            env: { PATH: process.env.PATH ?? "", CARDCTL_API_KEY: key, CARDCTL_BASE_URL: s.url },
            stderr: "pipe",
          })
        : new StreamableHTTPClientTransport(new URL(`${s.url}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${key}` } } });
    await client.connect(t);
    clients.push(client);
    return client;
  }

  const call = async (c: Client, name: string, args: Record<string, unknown> = {}, onprogress?: (p: { progress: number; message?: string }) => void) =>
    (await c.callTool({ name, arguments: args }, undefined, onprogress ? { onprogress, resetTimeoutOnProgress: true } : undefined)) as CallToolResult & {
      structuredContent: Structured;
    };
  /** request_card under a key of its own (the tool requires one), unless the test gives it. */
  const requestCard = (c: Client, args: Record<string, unknown>, onprogress?: (p: { progress: number; message?: string }) => void) =>
    call(c, "request_card", { idempotency_key: randomUUID(), ...args }, onprogress);
  const text = (r: CallToolResult) => r.content.map((c) => (c.type === "text" ? c.text : "")).join("\n");
  /** An account of its own per test (set-up complete), with a full and an agent key. */
  const account = async (o: { approval?: boolean; paymentMethod?: string | null } = {}) => {
    const a = await s.newAccount({ paymentMethod: o.paymentMethod });
    const full = await a.key("test", "full");
    const agent = await a.key("test", "agent");
    if (o.approval) expect((await s.request("PUT", "/v1/policies/default", { key: full, body: { approval_required: true } })).status).toBe(200);
    return { ...a, full, agent };
  };

  describe.each<Transport>(["stdio", "http"])("over %s", (transport) => {
    it("lists the agent tools for an agent key and the humans' tools too for a full key, with JSON schemas", async () => {
      const a = await account();
      const agentTools = (await (await connect(transport, a.agent)).listTools()).tools;
      expect(agentTools.map((t) => t.name).sort()).toEqual(AGENT_TOOLS);
      const fullTools = (await (await connect(transport, a.full)).listTools()).tools;
      expect(fullTools.map((t) => t.name).sort()).toEqual([...AGENT_TOOLS, ...HUMAN_TOOLS].sort());
      const request = fullTools.find((t) => t.name === "request_card")!;
      expect(request.inputSchema.required).toEqual(["amount_cents", "idempotency_key"]);
      expect(request.inputSchema.properties).toMatchObject({
        amount_cents: { type: "integer", minimum: 1, maximum: 50000 },
        wait_seconds: { type: "integer", minimum: 0, maximum: 300 },
      });
      expect(request.inputSchema.additionalProperties).toBe(false);
    });

    it("refuses the humans' tools to an agent key", async () => {
      const a = await account({ approval: true });
      const agent = await connect(transport, a.agent);
      const pending = await requestCard(agent, { amount_cents: 900 });
      const r = await call(agent, "approve_request", { id: pending.structuredContent.approval.id });
      expect(r.isError).toBe(true);
      expect(text(r)).toMatch(/approve_request/);
      const approvals = await s.request("GET", "/v1/approvals", { key: a.full });
      expect(approvals.body.data[0]).toMatchObject({ id: pending.structuredContent.approval.id, status: "PENDING" });
    });

    it("requests a card that is issued at once (201 path), reads, lists and closes it", async () => {
      const a = await account();
      const agent = await connect(transport, a.agent);
      const r = await requestCard(agent, { amount_cents: 1250, purpose: "API credits", agent_id: "mcp-agent" });
      expect(r.isError).toBeFalsy();
      expect(r.structuredContent).toMatchObject({ outcome: "issued", approval: null, card: { status: "OPEN", amount_cents: 1250, agent_id: "mcp-agent" } });
      const id = r.structuredContent.card.id as string;
      // The card as get_card and list_cards show it (and wait_for_approval's issued card).
      expect(r.structuredContent.card).toEqual((await s.request("GET", "/v1/cards", { key: a.full })).body.data[0]);
      expect(text(r)).toContain(id);
      expect(JSON.stringify(r)).not.toMatch(/ephemeral|ek_/);

      const got = await call(agent, "get_card", { id });
      expect(got.structuredContent.card).toMatchObject({ id, status: "OPEN", amount_cents: 1250, closed_at: null });
      expect(got.structuredContent.card.ephemeral_key_secret).toBeUndefined();
      const list = await call(agent, "list_cards", { status: "OPEN" });
      expect(list.structuredContent.data.map((c: { id: string }) => c.id)).toContain(id);

      const closed = await call(agent, "close_card", { id });
      expect(closed.structuredContent).toMatchObject({ card_id: id, ok: true, status: "CLOSED" });
      expect((await s.request("GET", `/v1/cards/${id}`, { key: a.full })).body.status).toBe("CLOSED");
      expect((await call(agent, "get_card", { id })).structuredContent.card).toMatchObject({ status: "CLOSED", closed_at: expect.any(String) });
    });

    it("request_card needs an idempotency_key; a retry under the same key answers with the first card, never a second", async () => {
      const a = await account();
      const agent = await connect(transport, a.agent);
      const bare = await call(agent, "request_card", { amount_cents: 400 });
      expect(bare.isError).toBe(true);
      expect(text(bare)).toMatch(/idempotency_key/);

      // The tool call retried after the client gave up on it (a timeout, a dropped connection).
      const key = `order-${randomUUID()}`;
      const [first, second] = await Promise.all([requestCard(agent, { amount_cents: 400, idempotency_key: key }), requestCard(agent, { amount_cents: 400, idempotency_key: key })].map((p) => p.catch(() => undefined)));
      const answered = [first, second].filter((r) => r && !r.isError);
      expect(answered.length).toBeGreaterThanOrEqual(1);
      const retried = await requestCard(agent, { amount_cents: 400, idempotency_key: key });
      expect(retried.structuredContent).toMatchObject({ outcome: "issued", card: { id: answered[0]!.structuredContent.card.id } });
      const cards = await s.request("GET", "/v1/cards", { key: a.full });
      expect(cards.body.data).toHaveLength(1);

      const reused = await requestCard(agent, { amount_cents: 401, idempotency_key: key });
      expect(reused.isError).toBe(true);
      expect(reused.structuredContent.error).toMatchObject({ code: "idempotency_key_reused", status: 422 });
    });

    it("answers a request that needs a human with the pending approval (202 path); the human approves over MCP", async () => {
      const a = await account({ approval: true });
      const agent = await connect(transport, a.agent);
      const r = await requestCard(agent, { amount_cents: 700 });
      expect(r.structuredContent).toMatchObject({ outcome: "pending_approval", card: null, approval: { status: "PENDING" } });
      const approvalId = r.structuredContent.approval.id as string;
      expect(text(r)).toContain("wait_for_approval");
      const listed = await call(agent, "list_approvals", {});
      expect(listed.structuredContent.data[0]).toMatchObject({ id: approvalId, amount_cents: 700 });

      const human = await connect(transport, a.full);
      const approved = await call(human, "approve_request", { id: approvalId });
      expect(approved.structuredContent).toMatchObject({ approval_id: approvalId, card: { status: "OPEN", spending_limit_cents: 700 } });
      const waited = await call(agent, "wait_for_approval", { id: approvalId, wait_seconds: 5 });
      expect(waited.structuredContent).toMatchObject({ outcome: "issued", card: { id: approved.structuredContent.card.id }, approval: { status: "APPROVED" } });
    });

    it("waits for an approval made by another client, reporting progress while it waits", async () => {
      const a = await account({ approval: true });
      const agent = await connect(transport, a.agent);
      const pending = await requestCard(agent, { amount_cents: 800 });
      const approvalId = pending.structuredContent.approval.id as string;
      const progress: { progress: number; message?: string }[] = [];
      const waiting = call(agent, "wait_for_approval", { id: approvalId, wait_seconds: 60 }, (p) => progress.push(p));
      // The human decides through the REST API once the agent has reported waiting.
      await expect.poll(() => progress.length, { timeout: 20_000 }).toBeGreaterThan(1);
      const approved = await s.request("POST", `/v1/approvals/${approvalId}/approve`, { key: a.full });
      expect(approved.status).toBe(201);
      const r = await waiting;
      expect(r.structuredContent).toMatchObject({ outcome: "issued", card: { id: approved.body.id, status: "OPEN" } });
      expect(progress[0]!.message).toContain(approvalId);
      for (let i = 1; i < progress.length; i++) expect(progress[i]!.progress).toBeGreaterThan(progress[i - 1]!.progress);
    });

    it("a cancelled wait stops waiting on the server: it polls no more", async () => {
      const a = await account({ approval: true });
      const agent = await connect(transport, a.agent);
      const approvalId = (await requestCard(agent, { amount_cents: 820 })).structuredContent.approval.id as string;
      const abort = new AbortController();
      const waiting = agent.callTool({ name: "wait_for_approval", arguments: { id: approvalId, wait_seconds: 60 } }, undefined, { signal: abort.signal });
      await sleep(1500);
      abort.abort();
      await expect(waiting).rejects.toThrow();
      await sleep(300);
      // The key's hourly budget shows every poll: none in the next 5 s (the wait polled every 1 to 3.4 s).
      const remaining = async () => Number((await s.request("GET", "/v1/balance", { key: a.agent })).headers.get("ratelimit-remaining"));
      const before = await remaining();
      await sleep(5000);
      expect(await remaining()).toBe(before - 1);
    });

    it("request_card retried under its key after a human decided answers with the decision, not the first answer's pending", async () => {
      const a = await account({ approval: true });
      const agent = await connect(transport, a.agent);
      const key = `order-${randomUUID()}`;
      const first = await requestCard(agent, { amount_cents: 830, idempotency_key: key });
      expect(first.structuredContent.outcome).toBe("pending_approval");
      const approved = await s.request("POST", `/v1/approvals/${first.structuredContent.approval.id}/approve`, { key: a.full });
      const again = await requestCard(agent, { amount_cents: 830, idempotency_key: key });
      expect(again.structuredContent).toMatchObject({ outcome: "issued", card: { id: approved.body.id }, approval: { status: "APPROVED" } });
      // A key a header cannot carry is refused by the tool, on either transport alike; so is one
      // with spaces at an end, which HTTP clients trim (" k" would be "k").
      for (const idempotency_key of ["a\nb", " k", "k "]) {
        const bad = await call(agent, "request_card", { amount_cents: 830, idempotency_key });
        expect(bad.isError, idempotency_key).toBe(true);
        expect(text(bad)).toMatch(/idempotency_key/);
      }
    });

    it("an approval whose card is still being made is pending for the agent, not an error", async () => {
      const a = await account({ approval: true });
      const agent = await connect(transport, a.agent);
      const key = `order-${randomUUID()}`;
      const first = await requestCard(agent, { amount_cents: 840, idempotency_key: key });
      const approved = await s.request("POST", `/v1/approvals/${first.structuredContent.approval.id}/approve`, { key: a.full });
      // As between the approval's claim and its card's opening (the hold and mint under way).
      await s.query("UPDATE cards SET status = 'CREATING' WHERE id = ?", [approved.body.id]);
      try {
        const during = await requestCard(agent, { amount_cents: 840, idempotency_key: key });
        expect(during.isError).toBeFalsy();
        expect(during.structuredContent).toMatchObject({ outcome: "pending_approval", approval: { status: "APPROVED" } });
      } finally {
        await s.query("UPDATE cards SET status = 'OPEN' WHERE id = ?", [approved.body.id]);
      }
      expect((await requestCard(agent, { amount_cents: 840, idempotency_key: key })).structuredContent).toMatchObject({ outcome: "issued", card: { id: approved.body.id } });
    });

    it("request_card with wait_seconds waits for the decision: a rejection, and a request still pending when the time is up", async () => {
      const a = await account({ approval: true });
      const agent = await connect(transport, a.agent);
      const waiting = requestCard(agent, { amount_cents: 600, wait_seconds: 60 });
      let approvalId = "";
      await expect
        .poll(async () => (approvalId = (await s.request("GET", "/v1/approvals", { key: a.full })).body.data[0]?.id ?? ""), { timeout: 20_000 })
        .toMatch(/^appr_/);
      expect((await s.request("POST", `/v1/approvals/${approvalId}/reject`, { key: a.full, body: { reason: "not this month" } })).status).toBe(200);
      const r = await waiting;
      expect(r.structuredContent).toMatchObject({ outcome: "rejected", card: null, approval: { id: approvalId, status: "REJECTED", reason: "not this month" } });
      expect(text(r)).toContain("not this month");

      const still = await requestCard(agent, { amount_cents: 600, wait_seconds: 1 });
      expect(still.structuredContent).toMatchObject({ outcome: "pending_approval", approval: { status: "PENDING" } });
    });

    it("reveal_card", async () => {
      const a = await account();
      const agent = await connect(transport, a.agent);
      const card = (await requestCard(agent, { amount_cents: 1500 })).structuredContent.card as { id: string; last_four: string };
      const r = await call(agent, "reveal_card", { id: card.id });
      expect(r.isError).toBeFalsy();
      if (transport === "stdio") {
        // On the agent's machine: the details, read from the processor by cardctl-mcp itself.
        const d = r.structuredContent;
        expect(d).toMatchObject({ card_id: card.id, last_four: card.last_four });
        expect(luhnValid(d.number)).toBe(true);
        expect(d.number.slice(-4)).toBe(card.last_four);
        expect(d.cvc).toMatch(/^\d{3,4}$/);
        expect(text(r)).toContain(d.number);
      } else {
        // Through the service: no number, only the key and where to read the card with it.
        expect(PAN_LIKE.test(JSON.stringify(r))).toBe(false);
        const { reveal, ephemeral_key_secret } = r.structuredContent;
        expect(reveal.headers.Authorization).toBe(`Bearer ${ephemeral_key_secret}`);
        // In the text too: a client may hand the model only the content.
        expect(text(r)).toContain(ephemeral_key_secret);
        expect(text(r)).toContain(JSON.stringify(reveal.url));
        // The client reads the card from the processor itself (PUBLIC_URL stands for this server).
        const url = (reveal.url as string).replace("http://cardctl.test", s.url);
        expect(url).toMatch(/expand\[\]=number/);
        const res = await fetch(url, { headers: reveal.headers });
        expect(res.status).toBe(200);
        const details = (await res.json()) as { number: string };
        expect(luhnValid(details.number)).toBe(true);
        expect(details.number.slice(-4)).toBe(card.last_four);
      }
    });

    it("answers API errors as tool errors with our code, message and details", async () => {
      const a = await account();
      const agent = await connect(transport, a.agent);
      const max = 5000;
      expect((await s.request("PUT", "/v1/policies/default", { key: a.full, body: { max_amount_cents: max } })).status).toBe(200);
      const over = await requestCard(agent, { amount_cents: max + 1 });
      expect(over.isError).toBe(true);
      expect(over.structuredContent.error).toMatchObject({ code: "policy_violation", status: 403, details: { max_amount_cents: max } });
      expect(text(over)).toContain(`${max} cents`);

      const unset = await account({ paymentMethod: null });
      const blocked = await requestCard(await connect(transport, unset.agent), { amount_cents: 100 });
      expect(blocked.isError).toBe(true);
      expect(blocked.structuredContent.error).toMatchObject({ code: "setup_required", details: { setup_url: expect.stringMatching(/\/setup/) } });
      expect(text(blocked)).toContain(blocked.structuredContent.error.details.setup_url);

      const missing = await call(agent, "get_card", { id: "card_doesnotexist" });
      expect(missing.isError).toBe(true);
      expect(missing.structuredContent.error.code).toBe("not_found");
      // The error object as JSON text too, for clients that hand the model only the text.
      expect(missing.content.some((c) => c.type === "text" && JSON.parse(c.text.startsWith("{") ? c.text : "null")?.error?.request_id === missing.structuredContent.error.request_id)).toBe(true);

      const invalid = await requestCard(agent, { amount_cents: 0 });
      expect(invalid.isError).toBe(true);
      expect(text(invalid)).toMatch(/amount_cents/);
    });

    it("dry-runs a request with check_policy, and reads balance and policy", async () => {
      const a = await account({ approval: true });
      const agent = await connect(transport, a.agent);
      const r = await call(agent, "check_policy", { amount_cents: 500 });
      expect(r.structuredContent).toMatchObject({ decision: "approval_required", reasons: [{ code: "approval_required" }] });
      expect((await call(agent, "get_policy")).structuredContent).toMatchObject({ approval_required: true });
      expect((await call(agent, "get_balance")).structuredContent).toMatchObject({ open_cards: 0, setup_complete: true });
      const human = await connect(transport, a.full);
      expect((await call(human, "update_policy", { approval_required: false })).structuredContent).toMatchObject({ approval_required: false });
      expect((await call(agent, "check_policy", { amount_cents: 500 })).structuredContent.decision).toBe("issue");
    });
  });

  it("refuses /mcp without a valid key (401, WWW-Authenticate) and answers GET with 405", async () => {
    const init = { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } } };
    const headers = { "content-type": "application/json", accept: "application/json, text/event-stream" };
    const none = await fetch(`${s.url}/mcp`, { method: "POST", headers, body: JSON.stringify(init) });
    expect(none.status).toBe(401);
    expect(none.headers.get("www-authenticate")).toMatch(/^Bearer/);
    const body = (await none.json()) as { error: { code: string; request_id: string } };
    expect(body.error).toMatchObject({ code: "unauthorized", request_id: none.headers.get("request-id") });
    const bad = await fetch(`${s.url}/mcp`, { method: "POST", headers: { ...headers, authorization: "Bearer sk_test_nope" }, body: JSON.stringify(init) });
    expect(bad.status).toBe(401);
    const inQuery = await fetch(`${s.url}/mcp?api_key=sk_test_nope`, { method: "POST", headers, body: JSON.stringify(init) });
    expect(inQuery.status).toBe(401);
    expect(inQuery.headers.get("www-authenticate")).toMatch(/^Bearer/);
    // A page of another site (it sends an Origin) is refused, the key notwithstanding (DNS rebinding).
    const fromPage = await s.request("POST", "/mcp", { body: { jsonrpc: "2.0", id: 1, method: "ping" }, headers: { origin: "http://evil.example", accept: "application/json, text/event-stream" } });
    expectError(fromPage, 403, "forbidden");
    for (const method of ["GET", "DELETE"]) {
      const res = await s.request(method, "/mcp");
      const err = expectError(res, 405, "method_not_allowed");
      expect(err.message).toMatch(/POST \/mcp/);
      expect(res.headers.get("allow")).toBe("POST");
    }
  });

  it("a cancel over HTTP never ends another client's call that has the same key and id", async () => {
    const a = await account({ approval: true });
    const [one, two] = [await connect("http", a.agent), await connect("http", a.agent)];
    const approvalId = (await requestCard(one, { amount_cents: 810 })).structuredContent.approval.id as string;
    await call(two, "list_cards"); // both clients have made one call: their next ids are the same
    const abort = new AbortController();
    const cancelled = one.callTool({ name: "wait_for_approval", arguments: { id: approvalId, wait_seconds: 30 } }, undefined, { signal: abort.signal });
    const other = two.callTool({ name: "wait_for_approval", arguments: { id: approvalId, wait_seconds: 30 } });
    await sleep(1000);
    abort.abort();
    await expect(cancelled).rejects.toThrow();
    await sleep(300);
    expect((await s.request("POST", `/v1/approvals/${approvalId}/approve`, { key: a.full })).status).toBe(201);
    expect(((await other) as CallToolResult & { structuredContent: Structured }).structuredContent).toMatchObject({ outcome: "issued" });
  });

  it("works behind a proxy that serves the API under a path of PUBLIC_URL", async () => {
    const t = await startServer({ PUBLIC_URL: "http://cards.example.com/cardctl" });
    try {
      const client = new Client({ name: "cardctl-test", version: "1.0.0" });
      await client.connect(new StreamableHTTPClientTransport(new URL(`${t.url}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${t.apiKey}` } } }));
      try {
        const issued = (await client.callTool({ name: "request_card", arguments: { amount_cents: 900, idempotency_key: randomUUID() } })) as CallToolResult & { structuredContent: Structured };
        expect(issued.structuredContent.outcome).toBe("issued");
        const r = (await client.callTool({ name: "reveal_card", arguments: { id: issued.structuredContent.card.id } })) as CallToolResult & { structuredContent: Structured };
        const url = r.structuredContent.reveal.url as string;
        // The simulated processor's client endpoint is a path of this service; Stripe's is Stripe's own host.
        if (processor === "stripe") expect(url).not.toContain("cards.example.com");
        else expect(url).toMatch(/^http:\/\/cards\.example\.com\/cardctl\/simulated-processor\/v1\/issuing\/cards\//);
      } finally {
        await client.close();
      }
    } finally {
      await t.close();
    }
  });

  it("answers /mcp with the API's own headers (Request-Id, and no cache)", async () => {
    const init = { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } } };
    const res = await fetch(`${s.url}/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream", authorization: `Bearer ${s.apiKey}` },
      body: JSON.stringify(init),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("request-id")).toMatch(/^req_/);
    expect(res.headers.get("cache-control")).toMatch(/no-(store|cache)/);
    await res.body?.cancel();
  });

  it("cardctl-mcp explains a missing key instead of starting", async () => {
    const child = spawn(process.execPath, [MCP_BIN], { env: { PATH: process.env.PATH ?? "" } });
    let stderr = "";
    child.stderr.on("data", (d) => (stderr += d));
    const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
    expect(code).toBe(2);
    expect(stderr).toContain("CARDCTL_API_KEY");
  });

  it("lists the tools with @modelcontextprotocol/inspector in CLI mode, over stdio and HTTP", async () => {
    const inspector = join(dirname(createRequire(import.meta.url).resolve("@modelcontextprotocol/inspector-cli/package.json")), "build/cli.js");
    const a = await account();
    const run = (args: string[]) =>
      new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
        // cwd: the inspector's CLI looks for its own package.json at ../package.json from the working directory.
        const child = spawn(process.execPath, [inspector, "--cli", ...args, "--method", "tools/list"], { cwd: dirname(inspector), env: { ...process.env } });
        let out = "";
        let err = "";
        child.stdout.on("data", (d) => (out += d));
        child.stderr.on("data", (d) => (err += d));
        child.on("exit", (code) => resolve({ code, out, err }));
      });
    const names = (out: string) => (JSON.parse(out) as { tools: { name: string }[] }).tools.map((t) => t.name).sort();
    const stdio = await run(["-e", `CARDCTL_API_KEY=${a.agent}`, "-e", `CARDCTL_BASE_URL=${s.url}`, process.execPath, MCP_BIN]);
    expect(stdio.code, stdio.err).toBe(0);
    expect(names(stdio.out)).toEqual(AGENT_TOOLS);
    const http = await run([`${s.url}/mcp`, "--transport", "http", "--header", `Authorization: Bearer ${a.full}`]);
    expect(http.code, http.err).toBe(0);
    expect(names(http.out)).toEqual([...AGENT_TOOLS, ...HUMAN_TOOLS].sort());
  });
});
