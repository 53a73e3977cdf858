import { spawn, spawnSync } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServer, type TestServer } from "../../../apps/server/test/harness.js";
import { BIN, tempConfigDir } from "./helpers.js";

/** util-linux `script` gives the CLI a pseudo-terminal; the test types into it through script's stdin. */
const hasScript = spawnSync("script", ["--version"]).status === 0;

let s: TestServer;
let env: Record<string, string>;
beforeAll(async () => {
  // Private addresses allowed: the webhook endpoint made below only needs to exist.
  s = await startServer({ WEBHOOK_ALLOW_PRIVATE: "1" });
  env = { ...process.env, CARDCTL_BASE_URL: s.url, CARDCTL_API_KEY: s.apiKey, CARDCTL_CONFIG_DIR: tempConfigDir(), NO_COLOR: "1" } as Record<string, string>;
  delete env.FORCE_COLOR;
});
afterAll(async () => {
  await s?.close();
});

function inPty(args: string[]) {
  const cmd = [process.execPath, BIN, ...args].map((a) => `'${a.replace(/'/g, "'\\''")}'`).join(" ");
  const child = spawn("script", ["-qfec", cmd, "/dev/null"], { env, stdio: ["pipe", "pipe", "pipe"] });
  let out = "";
  child.stdout.setEncoding("utf8").on("data", (d) => (out += d));
  const exited = new Promise<number>((r) => child.on("close", (code) => r(code ?? -1)));
  return {
    type: (keys: string) => child.stdin.write(keys),
    /** Output since `from` contains `text`. */
    async waitFor(text: string | RegExp, from = 0) {
      for (let i = 0; i < 200; i++) {
        const tail = out.slice(from);
        if (typeof text === "string" ? tail.includes(text) : text.test(tail)) return out.length;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`timed out waiting for ${text}\n--- output ---\n${out}`);
    },
    get output() {
      return out;
    },
    exited,
    kill: () => child.kill(),
  };
}

async function pending(amount: number, purpose: string): Promise<string> {
  const r = await s.request("POST", "/v1/cards", { body: { amount_cents: amount, purpose, policy_override: { approval_required: true } } });
  return r.body.approval_id;
}

describe.skipIf(!hasScript)("on a terminal (pseudo-terminal)", () => {
  it("approvals watch: select with a number, approve with a (y), reject with r and a reason, quit with q", async () => {
    const older = await pending(1500, "older request");
    const newer = await pending(2500, "newer request");
    const t = inPty(["approvals", "watch", "--interval", "0.5"]);
    try {
      await t.waitFor(older);
      await t.waitFor(newer);
      t.type("2"); // the older one (the list is newest first)
      t.type("a");
      let at = await t.waitFor(`Approve ${older} for $15.00?`);
      t.type("y");
      at = await t.waitFor(`✓ Approved ${older}: card card_`, at);
      t.type("r");
      at = await t.waitFor(`Reject ${newer}. Reason`, at);
      t.type("too much\r");
      // A [y/N] before the reject, as before an approve.
      at = await t.waitFor(`Reject ${newer} for $25.00 (reason: too much)? No card will be issued. [y/N]`, at);
      t.type("y");
      at = await t.waitFor(`✓ Rejected ${newer} (too much)`, at);
      await t.waitFor("No pending requests", at);
      t.type("q");
      expect(await t.exited).toBe(0);
      // After q the full screen is gone; the decisions stay in the scrollback.
      const after = t.output.slice(t.output.lastIndexOf("\x1b[?1049l"));
      expect(after).toContain("cardctl approvals watch: 2 decisions this session");
      expect(after).toMatch(new RegExp(`\\d\\d:\\d\\d:\\d\\d  ✓ Approved ${older}: card card_\\w+ \\(•••• \\d{4}, \\$15\\.00\\)`));
      expect(after).toContain(`✓ Rejected ${newer} (too much)`);
    } finally {
      t.kill();
    }
    const approved = (await s.request("GET", "/v1/approvals?status=APPROVED")).body.data;
    expect(approved.map((a: any) => a.id)).toContain(older);
    const rejected = (await s.request("GET", "/v1/approvals?status=REJECTED")).body.data;
    expect(rejected.find((a: any) => a.id === newer)?.reason).toBe("too much");
  });

  it("approvals watch: 'a' then anything but y does not approve", async () => {
    const id = await pending(700, "keep me");
    const t = inPty(["approvals", "watch"]);
    try {
      await t.waitFor(id);
      t.type("a");
      const at = await t.waitFor(`Approve ${id}`);
      t.type("n");
      await t.waitFor("Not approved.", at);
      t.type("q");
      expect(await t.exited).toBe(0);
    } finally {
      t.kill();
    }
    const still = (await s.request("GET", "/v1/approvals")).body.data;
    expect(still.map((a: any) => a.id)).toContain(id);
  });

  it("approvals watch: r, an empty reason, then anything but y does not reject", async () => {
    const id = await pending(800, "keep me too");
    const t = inPty(["approvals", "watch"]);
    try {
      await t.waitFor(id);
      t.type("r");
      let at = await t.waitFor(`Reject ${id}. Reason`);
      t.type("\r");
      at = await t.waitFor(`Reject ${id} for $8.00? No card will be issued. [y/N]`, at);
      t.type("n");
      at = await t.waitFor("Not rejected.", at);
      t.type("q");
      expect(await t.exited).toBe(0);
      const after = t.output.slice(t.output.lastIndexOf("\x1b[?1049l"));
      expect(after).toContain("no decisions this session");
    } finally {
      t.kill();
    }
    const still = (await s.request("GET", "/v1/approvals")).body.data;
    expect(still.map((a: any) => a.id)).toContain(id);
  });

  it("cards close asks for confirmation on a terminal", async () => {
    const card = (await s.request("POST", "/v1/cards", { body: { amount_cents: 100 } })).body;
    const no = inPty(["cards", "close", card.id]);
    await no.waitFor(`Close card ${card.id}?`);
    no.type("n\r");
    expect(await no.exited).toBe(2);
    expect((await s.request("GET", `/v1/cards/${card.id}`)).body.status).toBe("OPEN");

    // Ctrl-C at the question cancels (exit 2), as "no" does.
    const cancelled = inPty(["cards", "close", card.id]);
    await cancelled.waitFor(`Close card ${card.id}?`);
    cancelled.type("\x03");
    await cancelled.waitFor("Cancelled (Ctrl-C).");
    expect(await cancelled.exited).toBe(2);
    expect(cancelled.output).not.toContain("No input");
    expect((await s.request("GET", `/v1/cards/${card.id}`)).body.status).toBe("OPEN");

    const yes = inPty(["cards", "close", card.id]);
    await yes.waitFor(`Close card ${card.id}?`);
    yes.type("y\r");
    await yes.waitFor(`Card ${card.id} is CLOSED`);
    expect(await yes.exited).toBe(0);
  });

  it("webhooks delete asks for confirmation on a terminal", async () => {
    const endpoint = (await s.request("POST", "/v1/webhook_endpoints", { body: { url: "http://127.0.0.1:9/hook", events: ["*"] } })).body;
    const no = inPty(["webhooks", "delete", endpoint.id]);
    await no.waitFor(`Delete webhook endpoint ${endpoint.id} and its deliveries?`);
    no.type("n\r");
    expect(await no.exited).toBe(2);
    expect((await s.request("GET", `/v1/webhook_endpoints/${endpoint.id}`)).status).toBe(200);

    const yes = inPty(["webhooks", "delete", endpoint.id]);
    await yes.waitFor(`Delete webhook endpoint ${endpoint.id} and its deliveries?`);
    yes.type("y\r");
    await yes.waitFor(`Webhook endpoint ${endpoint.id} deleted.`);
    expect(await yes.exited).toBe(0);
    expect((await s.request("GET", `/v1/webhook_endpoints/${endpoint.id}`)).status).toBe(404);
  });

  it("login asks for the key without echoing it", async () => {
    const dir = tempConfigDir();
    env.CARDCTL_CONFIG_DIR = dir;
    delete env.CARDCTL_API_KEY;
    const t = inPty(["login", "--base-url", s.url]);
    const at = await t.waitFor("API key for profile");
    // One * per character typed; Backspace takes one back.
    t.type(`${s.apiKey}x`);
    await t.waitFor("*".repeat(s.apiKey.length + 1), at);
    t.type("\x7f\r");
    await t.waitFor("Logged in");
    expect(await t.exited).toBe(0);
    expect(t.output).not.toContain(s.apiKey);
    expect(t.output).not.toContain(s.apiKey.slice(8, 16));
    env.CARDCTL_API_KEY = s.apiKey;
  });
});
