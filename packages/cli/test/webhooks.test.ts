import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServer, type TestServer } from "../../../apps/server/test/harness.js";
import { Webhook } from "standardwebhooks";
import { eventually, startReceiver } from "../../../apps/server/test/webhook-receiver.js";
import { run, tempConfigDir } from "./helpers.js";

/** `cardctl webhooks create|list|get|update|enable|disable|rotate-secret|delete|deliveries|retry` against a real server and receiver. */
let s: TestServer;
let receiver: Awaited<ReturnType<typeof startReceiver>>;
let env: Record<string, string>;

beforeAll(async () => {
  s = await startServer({ WEBHOOK_ALLOW_PRIVATE: "1", WEBHOOK_RETRY_BASE_MS: "50" });
  receiver = await startReceiver();
  env = { CARDCTL_BASE_URL: s.url, CARDCTL_CONFIG_DIR: tempConfigDir(), NO_COLOR: "1", COLUMNS: "200" };
});
afterAll(async () => {
  await s?.close();
  await receiver?.close();
});

async function account() {
  const key = await (await s.newAccount()).key();
  return { key, cli: (args: string[]) => run(["webhooks", ...args], { env: { ...env, CARDCTL_API_KEY: key } }) };
}

describe("cardctl webhooks", () => {
  it("create shows the secret once with a hint to store it; list never shows it", async () => {
    const { cli } = await account();
    const r = await cli(["create", `${receiver.url}/cli`, "--events", "policy.updated,card.created", "--description", "ops"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("✓ Webhook endpoint created.");
    expect(r.stdout).toMatch(/Endpoint\s+we_\w+/);
    expect(r.stdout).toMatch(/Events\s+policy\.updated, card\.created/);
    expect(r.stdout).toMatch(/Signing secret\s+whsec_\S+/);
    expect(r.stdout + r.stderr).toMatch(/Store the signing secret now: it is not shown again/);
    const list = await cli(["list"]);
    expect(list.code).toBe(0);
    expect(list.stdout).toMatch(/ID\s+STATUS\s+URL\s+EVENTS\s+CREATED/);
    expect(list.stdout).toContain(`${receiver.url}/cli`);
    expect(list.stdout).not.toContain("whsec_");
  });

  it("list at 80 columns (stdout not a terminal): the URL stays whole, CREATED and the event types give way", async () => {
    const key = await (await s.newAccount()).key();
    const list = () => run(["webhooks", "list"], { env: { ...env, COLUMNS: "", CARDCTL_API_KEY: key } });
    const events = ["approval.created", "card.created", "card.used", "card.closed"];
    await s.request("POST", "/v1/webhook_endpoints", { key, body: { url: `${receiver.url}/w`, events } });
    const short = await list();
    expect(short.code, short.stderr).toBe(0);
    let lines = short.stdout.trimEnd().split("\n");
    for (const line of lines) expect(line.length, line).toBeLessThanOrEqual(80);
    expect(lines[0]).toMatch(/^ID\s+STATUS\s+URL\s+EVENTS$/);
    expect(lines[1]).toMatch(new RegExp(`\\s${receiver.url}/w\\s+approval\\.c\\S*…$`));

    await s.request("POST", "/v1/webhook_endpoints", { key, body: { url: `${receiver.url}/a/much/longer/path/for/the/receiver`, events } });
    lines = (await list()).stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^ID\s+STATUS\s+URL$/);
    expect(lines[1]).toMatch(new RegExp(`\\s${receiver.url}/a/much/longer/path/for/the/receiver$`));
  });

  it("--json everywhere; deliveries, retry and delete", async () => {
    const { cli, key } = await account();
    const created = (await cli(["create", `${receiver.url}/cli-json`, "--events", "policy.updated", "--json"])).json();
    expect(created.secret).toMatch(/^whsec_/);
    receiver.secret("/cli-json", created.secret);
    await s.request("PUT", "/v1/policies/default", { key, body: { max_amount_cents: 30000 } });
    await eventually("delivered", () => receiver.at("/cli-json").length === 1);
    const deliveries = await eventually("succeeded", async () => {
      const d = (await cli(["deliveries", created.id, "--json"])).json();
      return d.data[0]?.status === "succeeded" && d;
    });
    const delivery = deliveries.data[0];
    const table = await cli(["deliveries", created.id, "--status", "succeeded"]);
    expect(table.stdout).toMatch(/ID\s+STATUS\s+EVENT\s+ATTEMPTS\s+LAST ANSWER\s+NEXT ATTEMPT\s+CREATED/);
    expect(table.stdout).toMatch(new RegExp(`${delivery.id}\\s+succeeded\\s+policy\\.updated\\s+1\\s+HTTP 200\\s+-`));
    const retried = await cli(["retry", created.id, delivery.id]);
    expect(retried.code, retried.stderr).toBe(0);
    expect(retried.stdout).toContain(`Delivery ${delivery.id} of policy.updated ${delivery.event_id} will be sent again now.`);
    expect(retried.stdout).not.toContain("enabled again");
    await eventually("sent again", () => receiver.at("/cli-json").length === 2);
    // A retry on a disabled endpoint enables it again, and says so.
    expect((await cli(["disable", created.id])).code).toBe(0);
    const revived = await cli(["retry", created.id, delivery.id]);
    expect(revived.stdout).toContain(`Endpoint ${created.id} was disabled: it is enabled again, and receives new events from now on.`);
    await eventually("sent a third time", () => receiver.at("/cli-json").length === 3);
    // --all follows every page: a second event's delivery, then pages of one.
    await s.request("PUT", "/v1/policies/default", { key, body: { max_amount_cents: 31000 } });
    await eventually("the second event delivered", () => receiver.at("/cli-json").length === 4);
    const all = (await cli(["deliveries", created.id, "--all", "--limit", "1", "--json"])).json();
    expect(all.has_more).toBe(false);
    expect(all.data.map((d: { id: string }) => d.id)).toEqual([expect.stringMatching(/^whd_/), delivery.id]);
    expect((await cli(["deliveries", created.id, "--limit", "1"])).stderr).toContain("More deliveries exist: use --all or a larger --limit.");
    // Not a terminal: refused without --yes, nothing deleted.
    const refused = await cli(["delete", created.id]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(`Refusing to delete ${created.id} without confirmation: not a terminal. Pass --yes.`);
    expect((await cli(["list", "--json"])).json().data).toHaveLength(1);
    const deleted = await cli(["delete", created.id, "--yes"]);
    expect(deleted.stdout).toContain(`Webhook endpoint ${created.id} deleted.`);
    expect((await cli(["list", "--json"])).json()).toEqual({ data: [], has_more: false });
    expect(receiver.invalid).toEqual([]);
  });

  it("get, update, disable and enable, rotate-secret (both secrets sign during the overlap)", async () => {
    const { cli, key } = await account();
    const created = (await cli(["create", `${receiver.url}/cli-change`, "--events", "card.created", "--json"])).json();
    receiver.secret("/cli-change", created.secret);
    const got = await cli(["get", created.id]);
    expect(got.code, got.stderr).toBe(0);
    expect(got.stdout).toMatch(new RegExp(`Endpoint\\s+${created.id}`));
    expect(got.stdout).toMatch(/Events\s+card\.created/);

    const updated = await cli(["update", created.id, "--events", "policy.updated", "--description", "books"]);
    expect(updated.code, updated.stderr).toBe(0);
    expect(updated.stdout).toContain("✓ Webhook endpoint updated.");
    expect(updated.stdout).toMatch(/Events\s+policy\.updated/);
    expect(updated.stdout).toMatch(/Description\s+books/);
    expect((await cli(["update", created.id, "--description", "", "--json"])).json().description).toBeNull();
    const nothing = await cli(["update", created.id]);
    expect(nothing.code).toBe(2);
    expect(nothing.stderr).toMatch(/at least one of --url, --events, --description/);

    const off = await cli(["disable", created.id]);
    expect(off.stdout).toContain(`✓ Webhook endpoint ${created.id} disabled.`);
    expect((await cli(["get", created.id, "--json"])).json().status).toBe("disabled");
    expect((await cli(["enable", created.id])).stdout).toContain(`✓ Webhook endpoint ${created.id} enabled.`);

    const rotated = await cli(["rotate-secret", created.id, "--expire-previous-in", "2h"]);
    expect(rotated.code, rotated.stderr).toBe(0);
    expect(rotated.stdout).toContain("✓ Signing secret rotated.");
    expect(rotated.stdout).toMatch(/Previous secret\s+also signs until \S+ \(in [12] h\)/);
    const secret = /Signing secret\s+(whsec_\S+)/.exec(rotated.stdout)![1]!;
    expect(secret).not.toBe(created.secret);
    expect(rotated.stdout + rotated.stderr).toMatch(/signed with both secrets/);
    // The receiver still verifies with the old secret; the new one verifies the same delivery.
    await s.request("PUT", "/v1/policies/default", { key, body: { max_amount_cents: 30000 } });
    const [d] = await eventually("delivered", () => receiver.at("/cli-change").length === 1 && receiver.at("/cli-change"));
    expect(new Webhook(secret).verify(d!.body, d!.headers)).toEqual(d!.event);
    expect((await cli(["rotate-secret", created.id, "--expire-previous-in", "soon"])).code).toBe(2);
    const long = await cli(["rotate-secret", created.id, "--expire-previous-in", "8d"]);
    expect(long.code).toBe(2);
    expect(long.stderr).toContain('--expire-previous-in must be at most 7d, got "8d".');
    const final = await cli(["rotate-secret", created.id, "--expire-previous-in", "0", "--json"]);
    expect(final.json().previous_secret_expires_at).toBeNull();
    expect(receiver.invalid).toEqual([]);
  });

  it("reports errors: an agent key (403), a bad --status (usage), an unknown endpoint (404)", async () => {
    const acct = await s.newAccount();
    const agent = await acct.key("test", "agent");
    const r = await run(["webhooks", "list"], { env: { ...env, CARDCTL_API_KEY: agent } });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/agent/);
    const { cli } = await account();
    expect((await cli(["deliveries", "we_x", "--status", "late"])).code).toBe(2);
    // Event types are checked before any request, and named with their flag.
    const typo = await cli(["create", `${receiver.url}/typo`, "--events", "card.used,card.usd"]);
    expect(typo.code).toBe(2);
    expect(typo.stderr).toContain('--events has unknown event types: card.usd ("*" alone is every type). Event types: card.created,');
    expect((await cli(["list", "--json"])).json().data).toEqual([]);
    const missing = await cli(["delete", "we_missing", "--yes"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/No such webhook endpoint/);
  });
});
