import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServer, type TestServer } from "../../../apps/server/test/harness.js";
import { eventually, startReceiver } from "../../../apps/server/test/webhook-receiver.js";
import { run, tempConfigDir } from "./helpers.js";

/** `cardctl webhooks create|list|delete|deliveries|retry` against a real server and receiver. */
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
    await eventually("sent again", () => receiver.at("/cli-json").length === 2);
    const deleted = await cli(["delete", created.id]);
    expect(deleted.stdout).toContain(`Webhook endpoint ${created.id} deleted.`);
    expect((await cli(["list", "--json"])).json()).toEqual({ data: [], has_more: false });
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
    const missing = await cli(["delete", "we_missing"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/No such webhook endpoint/);
  });
});
