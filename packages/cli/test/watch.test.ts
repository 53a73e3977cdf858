import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServer, type TestServer } from "../../../apps/server/test/harness.js";
import { run, tempConfigDir } from "./helpers.js";

let s: TestServer;
let env: Record<string, string>;
beforeAll(async () => {
  s = await startServer();
  env = { CARDCTL_BASE_URL: s.url, CARDCTL_API_KEY: s.apiKey, CARDCTL_CONFIG_DIR: tempConfigDir() };
});
afterAll(async () => {
  await s?.close();
});

async function pending(amount: number, purpose: string): Promise<string> {
  const r = await s.request("POST", "/v1/cards", {
    body: { amount_cents: amount, agent_id: "watch-bot", purpose, policy_override: { approval_required: true } },
  });
  expect(r.status).toBe(202);
  return r.body.approval_id;
}

describe("approvals watch (scripted stdin)", () => {
  it("approves one request and rejects another", async () => {
    const a = await pending(1250, "books");
    const b = await pending(4000, "a yacht");
    const r = await run(["approvals", "watch", "--interval", "0.5"], {
      env,
      input: `approve ${a}\nreject ${b} too expensive\nquit\n`,
    });
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trim().split("\n");
    expect(lines[0]).toMatch(new RegExp(`^pending ${b} \\$40\\.00 watch-bot "a yacht" expires in (23 h|1 day)$`));
    expect(lines[1]).toMatch(new RegExp(`^pending ${a} \\$12\\.50 watch-bot "books"`));
    expect(lines).toContainEqual(expect.stringMatching(new RegExp(`^approved ${a} card card_\\w+ \\$12\\.50$`)));
    expect(lines).toContain(`rejected ${b} (too expensive)`);
    expect(r.stdout).not.toContain("gone");

    const approved = (await s.request("GET", "/v1/approvals?status=APPROVED")).body.data;
    expect(approved.find((x: any) => x.id === a)?.card_id).toMatch(/^card_/);
    const rejected = (await s.request("GET", "/v1/approvals?status=REJECTED")).body.data;
    expect(rejected.find((x: any) => x.id === b)?.reason).toBe("too expensive");
  });

  it("sees requests that arrive while it runs, live (the event stream: its poll is hourly here); #n refers to the list; --json prints events", async () => {
    const first = await pending(100, "first");
    let second = "";
    const r = await run(["approvals", "watch", "--interval", "3600", "--json"], {
      env,
      drive: async (child) => {
        const events: any[] = [];
        let buf = "";
        child.stdout!.on("data", (d: Buffer) => {
          buf += d.toString();
          let i: number;
          while ((i = buf.indexOf("\n")) >= 0) {
            events.push(JSON.parse(buf.slice(0, i)));
            buf = buf.slice(i + 1);
          }
        });
        const until = async (pred: () => boolean) => {
          for (let n = 0; n < 100 && !pred(); n++) await new Promise((res) => setTimeout(res, 50));
          expect(pred()).toBe(true);
        };
        await until(() => events.some((e) => e.event === "pending" && e.approval.id === first));
        second = await pending(200, "second");
        await until(() => events.some((e) => e.event === "pending" && e.approval.id === second));
        child.stdin!.write("list\n");
        await until(() => events.filter((e) => e.event === "pending").length >= 4);
        // after "list" the order is newest first: #1 is the second request
        child.stdin!.write("reject #1\napprove #2\n");
        await until(() => events.some((e) => e.event === "approved"));
        child.stdin!.end();
      },
    });
    expect(r.code, r.stderr).toBe(0);
    const events = r.stdout.trim().split("\n").map((l) => JSON.parse(l));
    expect(events).toContainEqual({ event: "rejected", id: second, reason: null });
    expect(events).toContainEqual(expect.objectContaining({ event: "approved", id: first, card: expect.objectContaining({ status: "OPEN" }) }));
  });

  it("#n counts in the last full list: a request that arrives meanwhile does not shift it", async () => {
    const listed = await pending(150, "listed");
    let later = "";
    const r = await run(["approvals", "watch", "--interval", "0.2"], {
      env,
      drive: async (child) => {
        let out = "";
        child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
        const until = async (pred: () => boolean) => {
          for (let n = 0; n < 100 && !pred(); n++) await new Promise((res) => setTimeout(res, 50));
          expect(pred()).toBe(true);
        };
        await until(() => out.includes(`pending ${listed}`));
        const firstList = out.trim().split("\n");
        const position = firstList.findIndex((l) => l.startsWith(`pending ${listed} `)) + 1;
        later = await pending(250, "arrived later");
        await until(() => out.includes(`pending ${later}`));
        child.stdin!.write(`approve #${position}\n`);
        await until(() => out.includes("approved "));
        child.stdin!.end("quit\n");
      },
    });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^approved ${listed} card card_`, "m"));
    expect(r.stdout).not.toMatch(new RegExp(`^approved ${later}`, "m"));
  });

  it("reports failures and exits 1", async () => {
    const r = await run(["approvals", "watch"], { env, input: "approve appr_nope\nfrobnicate\napprove #99\n" });
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^error appr_nope not_found: .*\(request id req_\w+\)$/m);
    expect(r.stdout).toContain('error unknown command "frobnicate"');
    // A number past the list is told at once, not sent to the API as an id.
    expect(r.stdout).toMatch(/^error no request #99 in the list \(it has \d+; "list" shows them numbered\)$/m);
  });

  it("notices requests decided elsewhere, live", async () => {
    const id = await pending(300, "decided elsewhere");
    const r = await run(["approvals", "watch", "--interval", "3600"], {
      env,
      drive: async (child) => {
        let out = "";
        child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
        for (let n = 0; n < 100 && !out.includes(id); n++) await new Promise((res) => setTimeout(res, 50));
        await s.request("POST", `/v1/approvals/${id}/reject`, { body: {} });
        for (let n = 0; n < 100 && !out.includes(`gone ${id}`); n++) await new Promise((res) => setTimeout(res, 50));
        child.stdin!.end("quit\n");
      },
    });
    expect(r.stdout).toContain(`gone ${id}`);
  });
});
