import { spawn, type ChildProcess } from "node:child_process";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import { connect, createServer as createNetServer, type AddressInfo, type Socket } from "node:net";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServer, type TestServer } from "../../../apps/server/test/harness.js";
import { BIN, run, tempConfigDir } from "./helpers.js";

let s: TestServer;
let env: Record<string, string>;
let key: string;
beforeAll(async () => {
  s = await startServer();
  key = await (await s.newAccount()).key();
  env = { CARDCTL_BASE_URL: s.url, CARDCTL_API_KEY: key, CARDCTL_CONFIG_DIR: tempConfigDir(), NO_COLOR: "1" };
});
afterAll(async () => {
  await s?.close();
});

const post = (path: string, body?: unknown) => s.request("POST", path, { key, body });

describe("cardctl events", () => {
  it("list: a table newest first, --type filters, --json is the API's page; get shows one", async () => {
    const card = (await post("/v1/cards", { amount_cents: 1250, agent_id: "lister" })).body;
    await post(`/v1/cards/${card.id}/close`);
    const table = await run(["events", "list"], { env: { ...env, COLUMNS: "200" } });
    expect(table.code, table.stderr).toBe(0);
    const lines = table.stdout.trim().split("\n");
    expect(lines[0]).toMatch(/^ID\s+TYPE\s+SUMMARY/);
    expect(lines[1]).toMatch(new RegExp(`^evt_\\w+\\s+hold\\.released\\s+${card.id} captured \\$0\\.00, released \\$12\\.50`));
    expect(lines[2]).toMatch(new RegExp(`^evt_\\w+\\s+card\\.closed\\s+${card.id} \\$12\\.50 CLOSED lister`));
    expect(lines[3]).toMatch(/card\.created/);

    const badType = await run(["events", "list", "--type", "card.exploded"], { env });
    expect(badType.code).toBe(1);
    expect(badType.stderr).toMatch(/Error: Invalid request: --type /);

    const json = await run(["events", "list", "--type", "card.created", "--json"], { env });
    expect(json.code, json.stderr).toBe(0);
    const page = json.json();
    expect(page).toMatchObject({ has_more: false, data: [{ type: "card.created", data: { object: { id: card.id } } }] });

    const one = await run(["events", "get", page.data[0].id], { env });
    expect(one.code, one.stderr).toBe(0);
    expect(one.stdout).toMatch(/Type\s+card\.created/);
    expect(one.stdout).toContain(`"id": "${card.id}"`);
    const missing = await run(["events", "get", "evt_000000000000000000000000"], { env });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/not_found|No such event/);
  });
});

/** A local receiver recording every request (its headers and raw body), answering `status`. */
async function receiver(status: number | "hang" = 200) {
  const got: { headers: IncomingHttpHeaders; body: string }[] = [];
  const server: Server = createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8").on("data", (d) => (body += d));
    req.on("end", () => {
      got.push({ headers: req.headers, body });
      if (status !== "hang") res.writeHead(status).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const close = () => {
    server.closeAllConnections();
    return new Promise((r) => server.close(r));
  };
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`, got, close };
}

/** `cardctl listen …` as a running process, with its output so far and a wait for a line. */
function listen(args: string[], extraEnv: Record<string, string> = {}) {
  const child: ChildProcess = spawn(process.execPath, [BIN, "listen", ...args], { env: { ...process.env, ...env, ...extraEnv }, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout!.setEncoding("utf8").on("data", (d) => (stdout += d));
  child.stderr!.setEncoding("utf8").on("data", (d) => (stderr += d));
  const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  const waitFor = async (re: RegExp): Promise<RegExpMatchArray> => {
    for (let i = 0; i < 400; i++) {
      const m = stdout.match(re);
      if (m) return m;
      if (child.exitCode !== null) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`no ${re} in the output\nstdout: ${stdout}\nstderr: ${stderr}`);
  };
  return { child, exited, waitFor, output: () => ({ stdout, stderr }) };
}

describe("cardctl listen", () => {
  it("prints the session's secret, then events live; forwards each, signed, to a local receiver; Ctrl-C exits 0", async () => {
    const hook = await receiver(200);
    const l = listen(["--forward-to", hook.url, "--events", "card.created,card.closed"]);
    try {
      const [, secret] = await l.waitFor(/Ready! Your webhook signing secret is (whsec_[A-Za-z0-9+/=]+)/);
      const card = (await post("/v1/cards", { amount_cents: 700, agent_id: "listener" })).body;
      await post(`/v1/cards/${card.id}/close`);
      await l.waitFor(/<-- \[200\] POST .*\n[\s\S]*<-- \[200\] POST /);
      const { stdout } = l.output();
      expect(stdout).toMatch(new RegExp(`\\d\\d:\\d\\d:\\d\\d  --> card\\.created \\[evt_\\w+\\]  ${card.id} \\$7\\.00 OPEN listener`));
      expect(stdout).toMatch(new RegExp(`--> card\\.closed \\[evt_\\w+\\]  ${card.id} \\$7\\.00 CLOSED`));
      expect(stdout).not.toContain("hold.released"); // not among --events
      expect(stdout).toContain(`<-- [200] POST ${hook.url}`);

      // Every delivery verifies with the standardwebhooks library and the printed secret.
      expect(hook.got).toHaveLength(2);
      const wh = new Webhook(secret!);
      const delivered = hook.got.map((d) => wh.verify(d.body, d.headers as Record<string, string>) as any);
      expect(delivered.map((e) => [e.type, e.data.object.id])).toEqual([
        ["card.created", card.id],
        ["card.closed", card.id],
      ]);
      expect(hook.got[0]!.headers["webhook-id"]).toBe(delivered[0].id);
      expect(() => new Webhook(`whsec_${Buffer.from("another secret entirely!!").toString("base64")}`).verify(hook.got[0]!.body, hook.got[0]!.headers as Record<string, string>)).toThrow();
    } finally {
      l.child.kill("SIGINT");
      expect(await l.exited).toBe(0);
      await hook.close();
    }
  });

  it("prints the receiver's failures and carries on; --json prints one event per line", async () => {
    const down = await receiver(500);
    const l = listen(["--json", "--forward-to", down.url, "--events", "card.created"]);
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`not ready: ${JSON.stringify(l.output())}`)), 20_000);
        const check = setInterval(() => {
          if (/Ready!/.test(l.output().stderr)) {
            clearInterval(check);
            clearTimeout(timer);
            resolve();
          }
        }, 50);
      });
      const card = (await post("/v1/cards", { amount_cents: 300 })).body;
      const [line] = await l.waitFor(/^\{.*\}$/m);
      expect(JSON.parse(line!)).toMatchObject({ type: "card.created", data: { object: { id: card.id } } });
      for (let i = 0; i < 200 && !/<-- \[500\]/.test(l.output().stderr); i++) await new Promise((r) => setTimeout(r, 50));
      expect(l.output().stderr).toContain(`<-- [500] POST ${down.url}`);
    } finally {
      l.child.kill("SIGINT");
      expect(await l.exited).toBe(0);
      await down.close();
    }
  });

  it("reconnects after the connection drops and resumes where it stopped", async () => {
    // A TCP proxy in front of the server whose open connections can be cut.
    const sockets = new Set<Socket>();
    const proxy = createNetServer((client) => {
      const upstream = connect(Number(new URL(s.url).port), "127.0.0.1");
      for (const sock of [client, upstream]) {
        sockets.add(sock);
        sock.on("close", () => sockets.delete(sock)).on("error", () => undefined);
      }
      client.pipe(upstream).pipe(client);
      client.on("close", () => upstream.destroy());
      upstream.on("close", () => client.destroy());
    });
    await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", r));
    const l = listen(["--events", "card.created"], { CARDCTL_BASE_URL: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}` });
    try {
      await l.waitFor(/Ready!/);
      const first = (await post("/v1/cards", { amount_cents: 101 })).body;
      await l.waitFor(new RegExp(`--> card\\.created .*${first.id}`));
      for (const sock of sockets) sock.destroy();
      await l.waitFor(/Connection lost \(.*\); reconnecting in/);
      const second = (await post("/v1/cards", { amount_cents: 102 })).body;
      await l.waitFor(/Reconnected\./);
      await l.waitFor(new RegExp(`--> card\\.created .*${second.id}`));
      expect(l.output().stdout.match(/--> card\.created/g)).toHaveLength(2);
    } finally {
      l.child.kill("SIGINT");
      expect(await l.exited).toBe(0);
      for (const sock of sockets) sock.destroy();
      await new Promise((r) => proxy.close(r));
    }
  });

  it("a receiver that hangs delays no event's line; Ctrl-C ends its forward at once, printing nothing more", async () => {
    const hung = await receiver("hang");
    const l = listen(["--forward-to", hung.url, "--events", "*"]);
    try {
      await l.waitFor(/Ready!/);
      const cards = [(await post("/v1/cards", { amount_cents: 201 })).body, (await post("/v1/cards", { amount_cents: 202 })).body];
      // Both printed as they came, though the first forward still waits for its answer (10 s).
      await l.waitFor(new RegExp(`--> card\\.created .*${cards[0].id}[\\s\\S]*--> card\\.created .*${cards[1].id}`));
      expect(l.output().stdout).not.toContain("<--");
      const at = Date.now();
      l.child.kill("SIGINT");
      expect(await l.exited).toBe(0);
      expect(Date.now() - at).toBeLessThan(5_000);
      expect(l.output().stdout).not.toContain("<--");
    } finally {
      l.child.kill("SIGKILL");
      await hung.close();
    }
  });

  it("a server that cannot be reached at the start is an error (exit 1), as for any command", async () => {
    const gone = createNetServer();
    await new Promise<void>((r) => gone.listen(0, "127.0.0.1", r));
    const port = (gone.address() as AddressInfo).port;
    await new Promise((r) => gone.close(r));
    const res = await run(["listen"], { env: { ...env, CARDCTL_BASE_URL: `http://127.0.0.1:${port}` } });
    expect(res.code).toBe(1);
    expect(res.stderr).toContain(`Could not reach http://127.0.0.1:${port}`);
    expect(res.stdout).not.toContain("Ready!");
  });

  it("refuses a bad --forward-to and unknown event types before connecting (usage, exit 2)", async () => {
    const bad = await run(["listen", "--forward-to", "ftp://example.com"], { env });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("--forward-to must be an http:// or https:// URL");
    const credentials = await run(["listen", "--forward-to", "http://user:pw@localhost:3000/x"], { env });
    expect(credentials.code).toBe(2);
    expect(credentials.stderr).toContain("--forward-to must not carry a user name or password");
    const unknown = await run(["listen", "--events", "card.nope,card.created"], { env });
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('--events has unknown event types: card.nope ("*" alone is every type). Event types: card.created, card.used,');
    const empty = await run(["listen", "--events", ","], { env });
    expect(empty.code).toBe(2);
    expect(empty.stderr).toContain('--events needs at least one event type, or "*" for all.');
  });
});
