import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { expectError, requestTo, startServer, type TestServer } from "./harness.js";
import { ownerSession } from "./helpers.js";
import { processDatabase, spawnServer, type ServerProcess } from "./processes.js";
import { deliveriesOf, deliveriesWhen, endpointFor, eventually, FAST, startReceiver, touchPolicy, useServerAndReceiver, type Receiver } from "./webhook-receiver.js";

describe("webhook endpoints: API", () => {
  let server: TestServer;
  let receiver: Receiver;
  useServerAndReceiver((s, r) => ((server = s), (receiver = r)));

  it("creates an endpoint and shows its secret once", async () => {
    const created = await server.request("POST", "/v1/webhook_endpoints", {
      body: { url: `${receiver.url}/once`, events: ["card.created", "card.created", "approval.created"], description: "inbox" },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ url: `${receiver.url}/once`, events: ["card.created", "approval.created"], description: "inbox", status: "enabled", mode: "test" });
    expect(created.body.id).toMatch(/^we_/);
    expect(created.body.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    const list = await server.request("GET", "/v1/webhook_endpoints");
    const listed = list.body.data.find((e: any) => e.id === created.body.id);
    expect(Object.keys(listed).sort()).toEqual(["created_at", "description", "events", "id", "mode", "previous_secret_expires_at", "status", "updated_at", "url"]);
    expect(JSON.stringify(list.body)).not.toContain("whsec_");
  });

  it("replays a create with the same Idempotency-Key (one endpoint, the same secret)", async () => {
    const send = () => server.request("POST", "/v1/webhook_endpoints", { body: { url: `${receiver.url}/idem`, events: ["*"] }, headers: { "idempotency-key": "we-1" } });
    const [a, b] = [await send(), await send()];
    expect(b.headers.get("idempotent-replayed")).toBe("true");
    expect(b.body).toEqual(a.body);
    const all = (await server.request("GET", "/v1/webhook_endpoints?limit=100")).body.data;
    expect(all.filter((e: any) => e.url === `${receiver.url}/idem`)).toHaveLength(1);
  });

  it("refuses agent keys (403 forbidden) on every webhook call", async () => {
    const account = await server.newAccount();
    const full = await account.key("test", "full");
    const agent = await account.key("test", "agent");
    const endpoint = await endpointFor(server, receiver, "/agent", ["*"], full);
    const calls: [string, string, unknown?][] = [
      ["POST", "/v1/webhook_endpoints", { url: `${receiver.url}/x`, events: ["*"] }],
      ["GET", "/v1/webhook_endpoints"],
      ["GET", `/v1/webhook_endpoints/${endpoint.id}`],
      ["POST", `/v1/webhook_endpoints/${endpoint.id}`, { status: "disabled" }],
      ["POST", `/v1/webhook_endpoints/${endpoint.id}/rotate_secret`, {}],
      ["DELETE", `/v1/webhook_endpoints/${endpoint.id}`],
      ["GET", `/v1/webhook_endpoints/${endpoint.id}/deliveries`],
      ["POST", `/v1/webhook_endpoints/${endpoint.id}/deliveries/whd_x/retry`],
    ];
    for (const [method, path, body] of calls) expectError(await server.request(method, path, { body, key: agent }), 403, "forbidden");
  });

  it("validates the body with clear messages", async () => {
    const bad = async (body: unknown, path: string, text: RegExp) => {
      const err = expectError(await server.request("POST", "/v1/webhook_endpoints", { body }), 400, "validation_error");
      expect(err.details.issues.map((i: any) => i.path)).toContain(path);
      expect(err.message).toMatch(text);
    };
    await bad({ url: `${receiver.url}/v`, events: ["card.exploded"] }, "events.0", /card\.created/);
    await bad({ url: `${receiver.url}/v`, events: [] }, "events", /at least 1/);
    await bad({ url: "not a url", events: ["*"] }, "url", /absolute URL/);
    await bad({ url: "ftp://example.com/x", events: ["*"] }, "url", /https:\/\/ or http:\/\//);
    await bad({ url: "https://user:pw@example.com/x", events: ["*"] }, "url", /user name or password/);
    // ~430 characters as given, ~2,430 once percent-encoded (as stored and sent): refused alike on SQLite and MariaDB.
    const long = `${receiver.url}/${"é".repeat(400)}`;
    await bad({ url: long, events: ["*"] }, "url", new RegExp(`at most 2048 characters once percent-encoded \\(it is ${new URL(long).toString().length}\\)`));
  });

  it("limits an account to 16 endpoints per mode, also when 24 are created at once", async () => {
    const account = await server.newAccount();
    const key = await account.key();
    const create = (i: number) => server.request("POST", "/v1/webhook_endpoints", { body: { url: `${receiver.url}/n${i}`, events: ["*"] }, key });
    // At once: on MariaDB these deadlocked (500s), and the limit was counted outside the transaction.
    const answers = await Promise.all(Array.from({ length: 24 }, (_, i) => create(i)));
    expect(answers.map((a) => a.status).sort()).toEqual([...Array(16).fill(201), ...Array(8).fill(409)]);
    for (const refused of answers.filter((a) => a.status === 409)) expect(expectError(refused, 409, "limit_exceeded").details).toEqual({ limit: 16 });
    expect((await server.request("GET", "/v1/webhook_endpoints?limit=100", { key })).body.data).toHaveLength(16);
    expect((await server.request("GET", "/v1/events?type=webhook_endpoint.created&limit=100", { key })).body.data).toHaveLength(16);
    // In the other mode the account has none yet.
    expect((await server.request("POST", "/v1/webhook_endpoints", { body: { url: `${receiver.url}/live`, events: ["*"] }, key: await account.key("live") })).status).toBe(201);
  });

  it("lists, pages and deletes; other accounts' endpoints are not found", async () => {
    const account = await server.newAccount();
    const key = await account.key();
    const a = await endpointFor(server, receiver, "/p1", ["*"], key);
    const b = await endpointFor(server, receiver, "/p2", ["*"], key);
    const first = await server.request("GET", "/v1/webhook_endpoints?limit=1", { key });
    expect(first.body).toMatchObject({ data: [{ id: b.id }], has_more: true });
    const second = await server.request("GET", `/v1/webhook_endpoints?limit=1&starting_after=${b.id}`, { key });
    expect(second.body).toMatchObject({ data: [{ id: a.id }], has_more: false });
    expectError(await server.request("DELETE", `/v1/webhook_endpoints/${a.id}`), 404, "not_found");
    expectError(await server.request("GET", `/v1/webhook_endpoints/${a.id}/deliveries`), 404, "not_found");
    expect((await server.request("DELETE", `/v1/webhook_endpoints/${a.id}`, { key })).body).toEqual({ id: a.id, deleted: true });
    expectError(await server.request("GET", `/v1/webhook_endpoints/${a.id}/deliveries`, { key }), 404, "not_found");
    expect((await server.request("GET", "/v1/webhook_endpoints", { key })).body.data.map((e: any) => e.id)).toEqual([b.id]);
  });
});

describe("webhook delivery: woken by the event's commit", () => {
  it("sends an event committed on this instance at once, and a delivery retried on it, though the worker polls only hourly", async () => {
    const server = await startServer({ ...FAST, WEBHOOK_POLL_MS: "3600000" });
    const receiver = await startReceiver();
    try {
      const key = await (await server.newAccount()).key();
      await endpointFor(server, receiver, "/woken", ["policy.updated"], key);
      await touchPolicy(server, key);
      const endpointId = (await server.request("GET", "/v1/webhook_endpoints", { key })).body.data[0].id;
      const [got] = await eventually("delivered without a poll", () => receiver.at("/woken").length && receiver.at("/woken"));
      expect(got!.event.type).toBe("policy.updated");
      // Written already claimed by this instance: one attempt, then succeeded.
      const [d] = await eventually("succeeded", async () => {
        const list = await deliveriesOf(server, endpointId, key);
        return list[0]?.status === "succeeded" && list;
      });
      expect(d).toMatchObject({ attempts: 1, last_response_status: 200 });
      // A manual retry wakes the worker too.
      expect((await server.request("POST", `/v1/webhook_endpoints/${endpointId}/deliveries/${d.id}/retry`, { key })).status).toBe(200);
      await eventually("sent again without a poll", () => receiver.at("/woken").length === 2);
      expect(receiver.invalid).toEqual([]);
    } finally {
      await server.close();
      await receiver.close();
    }
  });
});

describe("webhook delivery: a hanging receiver", () => {
  it("holds at most 16 attempts, delays no other receiver, and gets its whole backlog once it answers", async () => {
    // A timeout longer than the test's first part: nothing is retried meanwhile.
    const server = await startServer({ ...FAST, WEBHOOK_TIMEOUT_MS: "5000" });
    const receiver = await startReceiver();
    try {
      const key = await (await server.newAccount()).key();
      receiver.behave("/hold", "hang");
      await endpointFor(server, receiver, "/hold", ["policy.updated"], key);
      await endpointFor(server, receiver, "/fine", ["policy.updated"], key);
      for (let i = 0; i < 20; i++) await touchPolicy(server, key);
      await eventually("all 20 at the answering receiver", () => receiver.at("/fine").length === 20);
      expect(receiver.at("/hold").length).toBe(16);
      receiver.behave("/hold", "ok");
      // The 16 attempts time out and are retried; the 4 that waited for a slot are sent as slots free.
      const ids = (path: string) => new Set(receiver.at(path).map((r) => r.event.id));
      await eventually("every event at the receiver that hung", () => ids("/hold").size === 20, 30_000);
      expect(ids("/hold")).toEqual(ids("/fine"));
      expect(receiver.invalid).toEqual([]);
    } finally {
      await server.close();
      await receiver.close();
    }
  });
});

describe("webhook delivery: attempts waiting for a slot", () => {
  it("go where their endpoint says when they leave: a new url, not the old one; none once it is disabled", async () => {
    // A timeout longer than the test's first part: nothing is retried meanwhile.
    const server = await startServer({ ...FAST, WEBHOOK_TIMEOUT_MS: "4000" });
    const receiver = await startReceiver();
    try {
      const key = await (await server.newAccount()).key();
      receiver.behave("/old", "hang");
      receiver.behave("/gone", "hang");
      const moved = await endpointFor(server, receiver, "/old", ["policy.updated"], key);
      const disabled = await endpointFor(server, receiver, "/gone", ["policy.updated"], key);
      receiver.secret("/new", moved.secret);
      for (let i = 0; i < 20; i++) await touchPolicy(server, key);
      // 16 attempts of each hang; the other 4 of each wait in this instance for a slot.
      await eventually("16 attempts in flight at each", () => receiver.at("/old").length === 16 && receiver.at("/gone").length === 16);
      expect((await server.request("POST", `/v1/webhook_endpoints/${moved.id}`, { key, body: { url: `${receiver.url}/new` } })).status).toBe(200);
      expect((await server.request("POST", `/v1/webhook_endpoints/${disabled.id}`, { key, body: { status: "disabled" } })).status).toBe(200);
      // The 16 time out and free their slots: the waiting 4 leave, to the new url (and none to the disabled one).
      const ids = (path: string) => new Set(receiver.at(path).map((r) => r.event.id));
      await eventually("every event at the new url", () => ids("/new").size === 20, 30_000);
      expect(receiver.at("/old")).toHaveLength(16);
      expect(receiver.at("/gone")).toHaveLength(16);
      await deliveriesWhen("all final", server, disabled.id, key, (list) => list.length === 20 && list.every((d) => d.status === "failed"));
      expect(receiver.at("/gone")).toHaveLength(16);
      expect(receiver.invalid).toEqual([]);
    } finally {
      await server.close();
      await receiver.close();
    }
  });
});

describe("webhook delivery", () => {
  let server: TestServer;
  let receiver: Receiver;
  useServerAndReceiver((s, r) => ((server = s), (receiver = r)), { verified: true });

  /** A fresh account (so its events are its own), with a full key. */
  async function account() {
    const a = await server.newAccount();
    return a.key();
  }

  it("delivers each event, signed (Standard Webhooks), as GET /v1/events/:id shows it", async () => {
    const key = await account();
    const endpoint = await endpointFor(server, receiver, "/all", ["*"], key);
    const card = await server.request("POST", "/v1/cards", { body: { amount_cents: 1200 }, key });
    expect(card.status).toBe(201);
    const [got] = await eventually("card.created delivered", () => receiver.at("/all").filter((r) => r.event.type === "card.created").length && receiver.at("/all"));
    expect(got!.event.data.object.id).toBe(card.body.id);
    expect(got!.headers["webhook-id"]).toBe(got!.event.id);
    expect(got!.headers["webhook-signature"]).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    expect(got!.headers["content-type"]).toBe("application/json");
    const shown = (await server.request("GET", `/v1/events/${got!.event.id}`, { key })).body;
    expect(JSON.parse(got!.body)).toEqual(shown);
    // The same text, key for key (the body is made from the stored data without parsing it).
    expect(got!.body).toBe(JSON.stringify(shown));
    const [delivery] = await deliveriesWhen("succeeded", server, endpoint.id, key, (d) => d.some((x) => x.status === "succeeded"));
    expect(delivery).toMatchObject({ endpoint_id: endpoint.id, event_id: got!.event.id, event_type: "card.created", status: "succeeded", attempts: 1, last_response_status: 200, last_error: null, next_attempt_at: null });
  });

  it("sends only the event types an endpoint takes, and only of its mode", async () => {
    const key = await account();
    const endpoint = await endpointFor(server, receiver, "/policy-only", ["policy.updated"], key);
    await server.request("POST", "/v1/cards", { body: { amount_cents: 500 }, key });
    await touchPolicy(server, key);
    await eventually("policy.updated delivered", () => receiver.at("/policy-only").length === 1);
    const deliveries = await deliveriesOf(server, endpoint.id, key);
    expect(deliveries.map((d) => d.event_type)).toEqual(["policy.updated"]);
  });

  it("the events of one transaction (an authorization and the card it used) reach each endpoint that takes their type", async () => {
    const key = await account();
    const used = await endpointFor(server, receiver, "/used-only", ["card.used"], key);
    const approved = await endpointFor(server, receiver, "/approved-only", ["authorization.approved"], key);
    const both = await endpointFor(server, receiver, "/both", ["authorization.approved", "card.used"], key);
    const card = await server.request("POST", "/v1/cards", { body: { amount_cents: 900 }, key });
    const auth = await server.request("POST", `/v1/test_helpers/cards/${card.body.id}/authorizations`, { body: { amount_cents: 400, merchant: { name: "Shop" } }, key });
    expect(auth.status).toBe(200);
    await eventually("delivered", () => receiver.at("/used-only").length === 1 && receiver.at("/approved-only").length === 1 && receiver.at("/both").length === 2);
    expect(receiver.at("/used-only")[0]!.event.data.object.id).toBe(card.body.id);
    expect(receiver.at("/approved-only")[0]!.event.data.object.id).toBe(auth.body.id);
    expect(receiver.at("/both").map((r) => r.event.type).sort()).toEqual(["authorization.approved", "card.used"]);
    const types = async (id: string) => (await deliveriesOf(server, id, key)).map((d) => d.event_type).sort();
    expect(await types(used.id)).toEqual(["card.used"]);
    expect(await types(approved.id)).toEqual(["authorization.approved"]);
    expect(await types(both.id)).toEqual(["authorization.approved", "card.used"]);
  });

  it("delivers an event to each of two endpoints made in the same millisecond (ids that start alike)", async () => {
    const key = await account();
    const a = await endpointFor(server, receiver, "/same-ms-a", ["policy.updated"], key);
    const b = await endpointFor(server, receiver, "/same-ms-b", ["policy.updated"], key);
    // An id starts with the millisecond it was made in: give b a's, as two endpoints made at once have.
    const twin = `${a.id.slice(0, 11)}${b.id.slice(11)}`;
    await server.query("UPDATE webhook_endpoints SET id = ? WHERE id = ?", [twin, b.id]);
    await touchPolicy(server, key);
    await eventually("delivered to both", () => receiver.at("/same-ms-a").length === 1 && receiver.at("/same-ms-b").length === 1);
    const ids = [...(await deliveriesOf(server, a.id, key)), ...(await deliveriesOf(server, twin, key))].map((d) => d.id);
    expect(new Set(ids).size).toBe(2);
  });

  it("retries after 500s with the same webhook-id until a 2xx", async () => {
    const key = await account();
    receiver.behave("/flaky", 500);
    const endpoint = await endpointFor(server, receiver, "/flaky", ["policy.updated"], key);
    await touchPolicy(server, key);
    await eventually("3 failed attempts", () => receiver.at("/flaky").length >= 3);
    const pending = (await deliveriesOf(server, endpoint.id, key))[0];
    expect(pending).toMatchObject({ status: "pending", last_response_status: 500, last_error: "HTTP 500" });
    receiver.behave("/flaky", "ok");
    const [done] = await deliveriesWhen("succeeded", server, endpoint.id, key, (d) => d.some((x) => x.status === "succeeded"));
    expect(done!.attempts).toBe(receiver.at("/flaky").length);
    expect(new Set(receiver.at("/flaky").map((r) => r.headers["webhook-id"]))).toEqual(new Set([done!.event_id]));
  });

  it("retries after timeouts (no whole answer within WEBHOOK_TIMEOUT_MS)", async () => {
    const key = await account();
    receiver.behave("/slow", "hang");
    const endpoint = await endpointFor(server, receiver, "/slow", ["policy.updated"], key);
    await touchPolicy(server, key);
    await eventually("2 attempts", () => receiver.at("/slow").length >= 2);
    const [pending] = await deliveriesOf(server, endpoint.id, key);
    expect(pending.last_error).toMatch(/no answer within 300 ms/);
    expect(pending.last_response_status).toBeNull();
    receiver.behave("/slow", "ok");
    await eventually("succeeded", async () => (await deliveriesOf(server, endpoint.id, key))[0].status === "succeeded");
  });

  it("does not follow redirects: a 3xx is a failed attempt", async () => {
    const key = await account();
    receiver.behave("/redir", "redirect");
    const endpoint = await endpointFor(server, receiver, "/redir", ["policy.updated"], key);
    await touchPolicy(server, key);
    const [d] = await eventually("an attempt", async () => {
      const [x] = await deliveriesOf(server, endpoint.id, key);
      return x?.attempts >= 2 && x.last_response_status === 302 && [x];
    });
    expect(d.status).toBe("pending");
    expect(d.last_error).toMatch(/redirect .*302.* not followed/);
    expect(receiver.at("/redir/moved")).toEqual([]);
    await server.request("DELETE", `/v1/webhook_endpoints/${endpoint.id}`, { key });
  });

  it("delivers once a receiver that was down is up again", async () => {
    const key = await account();
    const down = await startReceiver();
    const port = Number(new URL(down.url).port);
    await down.close();
    const created = await server.request("POST", "/v1/webhook_endpoints", { body: { url: `${down.url}/back`, events: ["policy.updated"] }, key });
    await touchPolicy(server, key);
    await eventually("a refused attempt", async () => (await deliveriesOf(server, created.body.id, key))[0]?.last_error?.includes("ECONNREFUSED"));
    const up = await startReceiver(port);
    up.secret("/back", created.body.secret);
    try {
      await eventually("delivered", () => up.at("/back").length > 0);
      await eventually("succeeded", async () => (await deliveriesOf(server, created.body.id, key))[0].status === "succeeded");
      expect(up.invalid).toEqual([]);
    } finally {
      await up.close();
    }
  });

  it("sends the events of an instance that died before writing their deliveries, once its lease ends, once each", async () => {
    const key = await account();
    // Two events made while the account had no endpoint: no fan-out was written for them.
    await touchPolicy(server, key);
    await touchPolicy(server, key);
    const [later, earlier] = (await server.request("GET", "/v1/events?type=policy.updated", { key })).body.data as { id: string }[];
    const endpoint = await endpointFor(server, receiver, "/orphans", ["policy.updated"], key);
    // What an instance that committed them and died leaves: fan-outs leased to its worker, one lease ended, one not yet.
    const fanOut = "INSERT INTO webhook_fan_outs (event_id, endpoint_ids, lease_token, lease_until) VALUES (?, ?, ?, ?)";
    await server.query(fanOut, [earlier!.id, endpoint.id, "worker-of-a-dead-instance", Date.now() - 1]);
    await server.query(fanOut, [later!.id, endpoint.id, "worker-of-a-dead-instance", Date.now() + 60_000]);
    await eventually("the ended lease's event delivered", () => receiver.at("/orphans").length === 1);
    expect(receiver.at("/orphans")[0]!.event.id).toBe(earlier!.id);
    // The other lease still holds (the worker polls every 500 ms): nothing more is sent.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(receiver.at("/orphans")).toHaveLength(1);
    await server.query("UPDATE webhook_fan_outs SET lease_until = ? WHERE event_id = ?", [Date.now() - 1, later!.id]);
    await eventually("both delivered", async () => (await deliveriesOf(server, endpoint.id, key)).filter((d) => d.status === "succeeded").length === 2);
    expect(receiver.at("/orphans").map((r) => r.event.id).sort()).toEqual([earlier!.id, later!.id].sort());
    expect(await server.query("SELECT event_id FROM webhook_fan_outs WHERE event_id IN (?, ?)", [earlier!.id, later!.id])).toEqual([]);
  });

  it("the maintenance pass purges deliveries older than 30 days, and only those", async () => {
    const key = await account();
    const endpoint = await endpointFor(server, receiver, "/kept", ["policy.updated"], key);
    for (let i = 0; i < 2; i++) await touchPolicy(server, key);
    const [newer, older] = await deliveriesWhen("both succeeded", server, endpoint.id, key, (list) => list.length === 2 && list.every((d) => d.status === "succeeded"));
    await server.query("UPDATE webhook_deliveries SET created_at = ? WHERE id = ?", [Date.now() - 31 * 24 * 3600 * 1000, older.id]);
    expect((await server.app.services.maintenance.run()).deliveriesPurged).toBeGreaterThanOrEqual(1);
    expect((await deliveriesOf(server, endpoint.id, key)).map((d) => d.id)).toEqual([newer.id]);
  });

  it("retries a delivery on request: the same event again", async () => {
    const key = await account();
    const endpoint = await endpointFor(server, receiver, "/again", ["policy.updated"], key);
    await touchPolicy(server, key);
    const [d] = await eventually("succeeded", async () => {
      const list = await deliveriesOf(server, endpoint.id, key);
      return list[0]?.status === "succeeded" && list;
    });
    const retried = await server.request("POST", `/v1/webhook_endpoints/${endpoint.id}/deliveries/${d.id}/retry`, { key });
    expect(retried.status).toBe(200);
    expect(retried.body).toMatchObject({ id: d.id, status: "pending" });
    await eventually("sent again", () => receiver.at("/again").length === 2);
    expect(receiver.at("/again").map((r) => r.headers["webhook-id"])).toEqual([d.event_id, d.event_id]);
    await eventually("succeeded again", async () => (await deliveriesOf(server, endpoint.id, key))[0].attempts === 2);
    expectError(await server.request("POST", `/v1/webhook_endpoints/${endpoint.id}/deliveries/whd_nope/retry`, { key }), 404, "not_found");
  });

  it("endpoints made, retried and deleted are events naming who did it: an API key, or an owner in the dashboard", async () => {
    const account = await server.newAccount();
    const key = await account.key();
    const keyId = (await server.request("GET", "/v1/api_keys/current", { key })).body.id;
    const o = await ownerSession(server, account.id, "hooks@webhooks.example");
    const eventsOf = async (type: string) => (await server.request("GET", `/v1/events?type=${type}`, { key })).body.data as any[];
    const listed = async (id: string) => (await server.request("GET", "/v1/webhook_endpoints?limit=100", { key })).body.data.find((e: any) => e.id === id);

    // Made with the key: announced, to the account's other endpoints only (there are none yet, and not to itself).
    const watch = await endpointFor(server, receiver, "/watch-all", ["*"], key);
    const [byKey] = await eventsOf("webhook_endpoint.created");
    expect(byKey).toMatchObject({ actor: { type: "api_key", id: keyId }, data: { object: { id: watch.id } } });
    expect(byKey.data.object).toEqual(await listed(watch.id));
    expect(JSON.stringify(byKey)).not.toContain("whsec_");
    expect(await deliveriesOf(server, watch.id, key)).toEqual([]);

    // Made by the owner: the owner is the actor, and the other endpoint receives it.
    const made = await o.mutation("webhookEndpoints.create", { url: `${receiver.url}/owner-made`, events: ["policy.updated"] });
    expect(made.status, JSON.stringify(made.body)).toBeLessThan(300);
    const endpoint = made.body.result.data as { id: string; secret: string };
    receiver.secret("/owner-made", endpoint.secret);
    const [byOwner] = await eventsOf("webhook_endpoint.created");
    expect(byOwner).toMatchObject({ actor: { type: "owner", id: o.owner.id } });
    expect(byOwner.data.object).toEqual(await listed(endpoint.id));
    const [told] = await eventually("announced to the other endpoint", () => receiver.at("/watch-all").filter((r) => r.event.id === byOwner.id).length && receiver.at("/watch-all"));
    expect(told!.event.data.object.id).toBe(endpoint.id);

    // Retried by the owner, then by the key: webhook_delivery.retried, the delivery pending again.
    await touchPolicy(server, key);
    const [d] = await eventually("delivered", async () => {
      const list = await deliveriesOf(server, endpoint.id, key);
      return list[0]?.status === "succeeded" && list;
    });
    expect((await o.mutation("webhookEndpoints.retry", { id: endpoint.id, delivery_id: d.id })).status).toBe(200);
    await eventually("sent again", () => receiver.at("/owner-made").length === 2);
    await eventually("succeeded again", async () => (await deliveriesOf(server, endpoint.id, key))[0].status === "succeeded");
    expect((await server.request("POST", `/v1/webhook_endpoints/${endpoint.id}/deliveries/${d.id}/retry`, { key })).status).toBe(200);
    const retried = (await eventsOf("webhook_delivery.retried")).reverse();
    expect(retried.map((e) => e.actor)).toEqual([
      { type: "owner", id: o.owner.id },
      { type: "api_key", id: keyId },
    ]);
    for (const e of retried) expect(e.data.object).toMatchObject({ id: d.id, endpoint_id: endpoint.id, event_id: d.event_id, status: "pending", attempts: expect.any(Number) });
    // An unknown delivery is no retry: nothing announced.
    expectError(await o.mutation("webhookEndpoints.retry", { id: endpoint.id, delivery_id: "whd_nope" }), 404, "not_found");
    expect(await eventsOf("webhook_delivery.retried")).toHaveLength(2);

    // Deleted by the owner: announced to the other endpoint; then the key deletes that one.
    const before = await listed(endpoint.id);
    expect((await o.mutation("webhookEndpoints.delete", { id: endpoint.id })).status).toBe(200);
    const [gone] = await eventsOf("webhook_endpoint.deleted");
    expect(gone).toMatchObject({ actor: { type: "owner", id: o.owner.id } });
    expect(gone.data.object).toEqual(before);
    await eventually("deletion announced", () => receiver.at("/watch-all").some((r) => r.event.id === gone.id));
    expect((await server.request("DELETE", `/v1/webhook_endpoints/${watch.id}`, { key })).status).toBe(200);
    expect((await eventsOf("webhook_endpoint.deleted"))[0]).toMatchObject({ actor: { type: "api_key", id: keyId }, data: { object: { id: watch.id } } });
    // Deleting again is a 404 and announces nothing.
    expectError(await server.request("DELETE", `/v1/webhook_endpoints/${watch.id}`, { key }), 404, "not_found");
    expect(await eventsOf("webhook_endpoint.deleted")).toHaveLength(2);
  });

  it("refuses private addresses at delivery time too (a host that later resolves elsewhere)", async () => {
    // The server without WEBHOOK_ALLOW_PRIVATE, with an endpoint that passed its check when it resolved elsewhere.
    const strict = await startServer({ WEBHOOK_TIMEOUT_MS: "300", WEBHOOK_RETRY_BASE_MS: "50" });
    try {
      receiver.secret("/rebound", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
      const created = await strict.request("POST", "/v1/webhook_endpoints", { body: { url: "https://93.184.215.14/rebound", events: ["policy.updated"] } });
      expect(created.status).toBe(201);
      await strict.query("UPDATE webhook_endpoints SET url = ? WHERE id = ?", [`${receiver.url.replace(/^http:/, "https:")}/rebound`, created.body.id]);
      await touchPolicy(strict);
      const [d] = await eventually("a refused attempt", async () => {
        const list = await deliveriesOf(strict, created.body.id);
        return list[0]?.attempts >= 1 && list[0].last_error && list;
      });
      expect(d.last_error).toMatch(/^refused: address 127\.0\.0\.1, a loopback, private/);
      // An http:// endpoint (made while the server allowed it) gets nothing in plain text either.
      await strict.query("UPDATE webhook_endpoints SET url = ? WHERE id = ?", [`${receiver.url}/rebound`, created.body.id]);
      await touchPolicy(strict);
      const [plain] = await eventually("a refused plain-text attempt", async () => {
        const list = await deliveriesOf(strict, created.body.id);
        return list.length === 2 && list[0]?.attempts >= 1 && list[0].last_error && list;
      });
      expect(plain.last_error).toMatch(/^refused: http:\/\/ is allowed only when the server sets WEBHOOK_ALLOW_PRIVATE/);
      expect(receiver.at("/rebound")).toEqual([]);
    } finally {
      await strict.close();
    }
  });
});

describe("SSRF: endpoint URLs without WEBHOOK_ALLOW_PRIVATE", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer();
  });
  afterAll(async () => server?.close());

  it.each([
    "https://localhost/hook",
    "https://127.0.0.1/hook",
    "https://127.1.2.3:8443/hook",
    "https://10.0.0.7/hook",
    "https://192.168.1.1/hook",
    "https://169.254.169.254/latest/meta-data",
    "https://[::1]/hook",
    "https://[::ffff:127.0.0.1]/hook",
    "https://[fd00::1]/hook",
    "https://0.0.0.0/hook",
    // IPv4-translated (SIIT) loopback, Teredo, local-use NAT64 of the metadata address.
    "https://[::ffff:0:7f00:1]/hook",
    "https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/hook",
    "https://[64:ff9b:1::a9fe:a9fe]/hook",
  ])("refuses %s", async (url) => {
    const err = expectError(await server.request("POST", "/v1/webhook_endpoints", { body: { url, events: ["*"] } }), 400, "validation_error");
    expect(err.details.issues[0].path).toBe("url");
    expect(err.message).toMatch(/non-public address \(allowed only when the server sets WEBHOOK_ALLOW_PRIVATE\)/);
    // A name's private address is not told (it would map the server's network); a literal is the caller's own.
    if (url === "https://localhost/hook") {
      expect(err.message).toContain("host localhost resolves to a loopback, private");
      expect(err.message).not.toMatch(/127\.0\.0\.1|::1/);
    }
  });

  it("refuses http:// and accepts a public https URL", async () => {
    const err = expectError(await server.request("POST", "/v1/webhook_endpoints", { body: { url: "http://93.184.215.14/hook", events: ["*"] } }), 400, "validation_error");
    expect(err.message).toMatch(/https:\/\/ \(http:\/\/ is allowed only when the server sets WEBHOOK_ALLOW_PRIVATE\)/);
    expect((await server.request("POST", "/v1/webhook_endpoints", { body: { url: "https://93.184.215.14/hook", events: ["*"] } })).status).toBe(201);
  });
});

describe("auto-disable when the retry schedule ends", () => {
  let server: TestServer;
  let receiver: Receiver;
  beforeAll(async () => {
    // The window must hold two attempts after the first waits for the sender thread to load
    // (from TypeScript on a loaded CI machine, over 1.5 s), and end well after the attempt whose
    // next backoff (50 ms doubling: 6.4 s in, 12.8 s next) would pass it.
    server = await startServer({ ...FAST, WEBHOOK_RETRY_WINDOW_MS: "12000" });
    receiver = await startReceiver();
  });
  afterAll(async () => {
    await server?.close();
    await receiver?.close();
    expect(receiver.invalid).toEqual([]);
  });

  it("fails the delivery, disables the endpoint with a webhook_endpoint.disabled event; a retry enables it again", async () => {
    const key = await (await server.newAccount()).key();
    receiver.behave("/dead", 503);
    const dead = await endpointFor(server, receiver, "/dead", ["policy.updated"], key);
    await endpointFor(server, receiver, "/watch", ["webhook_endpoint.disabled"], key);
    await touchPolicy(server, key);
    await eventually("disabled", async () => (await server.request("GET", "/v1/webhook_endpoints", { key })).body.data.find((e: any) => e.id === dead.id).status === "disabled", 30_000);
    const [d] = await deliveriesOf(server, dead.id, key);
    expect(d).toMatchObject({ status: "failed", last_response_status: 503, next_attempt_at: null });
    expect(d.attempts).toBeGreaterThanOrEqual(2);
    // The last attempt is at the window's end (12 s after the event), not when the next backoff would pass it.
    const tried = receiver.at("/dead");
    expect(tried.at(-1)!.at - Date.parse(tried[0]!.event.created_at)).toBeGreaterThanOrEqual(11_900);
    const events = (await server.request("GET", "/v1/events?type=webhook_endpoint.disabled", { key })).body.data;
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ actor: { type: "system", id: null }, data: { object: { id: dead.id, status: "disabled" } } });
    // The endpoint as the API shows it once disabled: its updated_at too.
    const shown = (await server.request("GET", `/v1/webhook_endpoints/${dead.id}`, { key })).body;
    expect(events[0].data.object).toEqual(shown);
    const [told] = await eventually("announced", () => receiver.at("/watch").length && receiver.at("/watch"));
    expect(told!.event.id).toBe(events[0].id);
    // Disabled: new events are not sent to it.
    const sent = receiver.at("/dead").length;
    await touchPolicy(server, key);
    expect((await deliveriesOf(server, dead.id, key)).length).toBe(1);
    receiver.behave("/dead", "ok");
    expect((await server.request("POST", `/v1/webhook_endpoints/${dead.id}/deliveries/${d.id}/retry`, { key })).status).toBe(200);
    await eventually("delivered on retry", async () => (await deliveriesOf(server, dead.id, key))[0].status === "succeeded");
    expect(receiver.at("/dead").length).toBe(sent + 1);
    expect((await server.request("GET", "/v1/webhook_endpoints", { key })).body.data.find((e: any) => e.id === dead.id).status).toBe("enabled");
    // The retry enabled it: webhook_endpoint.enabled, by the key that retried.
    const keyId = (await server.request("GET", "/v1/api_keys/current", { key })).body.id;
    const enabled = (await server.request("GET", "/v1/events?type=webhook_endpoint.enabled", { key })).body.data;
    expect(enabled).toHaveLength(1);
    expect(enabled[0]).toMatchObject({ actor: { type: "api_key", id: keyId }, data: { object: { id: dead.id, status: "enabled" } } });
  });
});

describe("auto-disable spares an endpoint that takes the other events", () => {
  let server: TestServer;
  let receiver: Receiver;
  beforeAll(async () => {
    server = await startServer({ ...FAST, WEBHOOK_RETRY_WINDOW_MS: "8000" });
    receiver = await startReceiver();
  });
  afterAll(async () => {
    await server?.close();
    await receiver?.close();
    expect(receiver.invalid).toEqual([]);
  });

  it("a delivery its receiver keeps refusing fails alone when later ones succeeded: the endpoint stays enabled, no disabled event", async () => {
    const key = await (await server.newAccount()).key();
    // The receiver's code chokes on one kind of event (a 500 each time) and takes the rest.
    receiver.behave("/picky", (event) => (event?.type === "policy.updated" ? 500 : "ok"));
    const picky = await endpointFor(server, receiver, "/picky", ["policy.updated", "card.created"], key);
    await touchPolicy(server, key);
    expect((await server.request("POST", "/v1/cards", { key, body: { amount_cents: 300 } })).status).toBe(201);
    const final = await deliveriesWhen("the refused one final", server, picky.id, key, (list) => list.some((d) => d.status === "failed"));
    expect(final.map((d) => d.status).sort()).toEqual(["failed", "succeeded"]);
    expect((await server.request("GET", `/v1/webhook_endpoints/${picky.id}`, { key })).body.status).toBe("enabled");
    expect((await server.request("GET", "/v1/events?type=webhook_endpoint.disabled", { key })).body.data).toEqual([]);
    // Still sent the next events.
    expect((await server.request("POST", "/v1/cards", { key, body: { amount_cents: 400 } })).status).toBe(201);
    await eventually("the next card.created", () => receiver.at("/picky").filter((r) => r.event.type === "card.created").length === 2);
  });
});

/** Two server processes on one database (a MariaDB database, or an SQLite file) deliver each event once. */
describe("two instances deliver each event exactly once", () => {
  let a: ServerProcess;
  let b: ServerProcess;
  let drop: () => Promise<void>;
  let receiver: Receiver;
  beforeAll(async () => {
    const db = await processDatabase();
    drop = db.drop;
    const env = { DATABASE_URL: db.url, ...FAST, WEBHOOK_TIMEOUT_MS: "5000" };
    a = await spawnServer(env);
    b = await spawnServer(env);
    receiver = await startReceiver();
  });
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    await drop?.();
    await receiver?.close();
  });

  it("splits the work and sends every event once", async () => {
    const key = a.apiKey ?? b.apiKey!;
    const [onA, onB] = [requestTo(a.url, key), requestTo(b.url, key)];
    const endpoint = (await onA("POST", "/v1/webhook_endpoints", { body: { url: `${receiver.url}/both`, events: ["card.created"] } })).body;
    receiver.secret("/both", endpoint.secret);
    const cards = await Promise.all(Array.from({ length: 40 }, (_, i) => (i % 2 ? onA : onB)("POST", "/v1/cards", { body: { amount_cents: 100 + i } })));
    expect(cards.every((c) => c.status === 201)).toBe(true);
    const deliveries = async () => (await onB("GET", `/v1/webhook_endpoints/${endpoint.id}/deliveries?limit=100`)).body.data as any[];
    await eventually("all delivered", async () => {
      const list = await deliveries();
      return list.length === 40 && list.every((d) => d.status === "succeeded");
    });
    // Every delivery is final, so nothing more can be sent: exactly one request per event.
    const ids = receiver.at("/both").map((r) => r.event.data.object.id);
    expect(ids.sort()).toEqual(cards.map((c) => c.body.id).sort());
    expect((await deliveries()).every((d) => d.attempts === 1)).toBe(true);
    expect(receiver.invalid).toEqual([]);
  });
});

describe("a stopping instance gives back what it holds", () => {
  it("hands the attempts waiting in it for a slot back at once: another instance sends them, not when their lease ends", async () => {
    const db = await processDatabase();
    // The lease is this timeout plus a minute: whatever is not given back waits that long.
    const env = { DATABASE_URL: db.url, ...FAST, WEBHOOK_TIMEOUT_MS: "5000" };
    const receiver = await startReceiver();
    let a: ServerProcess | undefined;
    let b: ServerProcess | undefined;
    try {
      a = await spawnServer(env);
      const onA = requestTo(a.url, a.apiKey!);
      receiver.behave("/hold", "hang");
      const endpoint = (await onA("POST", "/v1/webhook_endpoints", { body: { url: `${receiver.url}/hold`, events: ["policy.updated"] } })).body;
      receiver.secret("/hold", endpoint.secret);
      for (let i = 0; i < 40; i++) expect((await onA("PUT", "/v1/policies/default", { body: { max_amount_cents: 40000 + i } })).status).toBe(200);
      // 16 attempts hang at the receiver; the other 24 wait in instance A for a slot, claimed by it.
      await eventually("16 attempts in flight", () => receiver.at("/hold").length === 16);
      await a.stop();
      receiver.behave("/hold", "ok");
      b = await spawnServer(env);
      const ids = () => new Set(receiver.at("/hold").map((r) => r.event.id));
      await eventually("every event sent by instance B", () => ids().size === 40, 20_000);
      expect(receiver.invalid).toEqual([]);
    } finally {
      await Promise.all([a?.stop(), b?.stop()]);
      await db.drop();
      await receiver.close();
    }
  });
});
