import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { expectError, startServer, type TestServer } from "./harness.js";
import { deliveriesOf, deliveriesWhen, endpointFor, eventually, FAST, startReceiver, touchPolicy, useServerAndReceiver, type Receiver } from "./webhook-receiver.js";

/** Retrieving, changing, enabling and disabling an endpoint, and rotating its signing secret. */
describe("webhook endpoints: get, update, enable and disable, rotate the secret", () => {
  let server: TestServer;
  let receiver: Receiver;
  useServerAndReceiver((s, r) => ((server = s), (receiver = r)), { verified: true });

  /** A fresh account's full key, its key id, and the events of a type it saw. */
  async function account() {
    const key = await (await server.newAccount()).key();
    const keyId = (await server.request("GET", "/v1/api_keys/current", { key })).body.id as string;
    const eventsOf = async (type: string) => (await server.request("GET", `/v1/events?type=${type}`, { key })).body.data as any[];
    return { key, keyId, eventsOf };
  }
  const get = async (id: string, key: string) => (await server.request("GET", `/v1/webhook_endpoints/${id}`, { key })).body;
  const update = (id: string, body: unknown, key: string, headers?: Record<string, string>) => server.request("POST", `/v1/webhook_endpoints/${id}`, { body, key, headers });

  it("gets an endpoint as the list shows it; another account's is not found", async () => {
    const { key } = await account();
    const endpoint = await endpointFor(server, receiver, "/get", ["card.created"], key);
    const got = await server.request("GET", `/v1/webhook_endpoints/${endpoint.id}`, { key });
    expect(got.status).toBe(200);
    expect(got.body).toEqual((await server.request("GET", "/v1/webhook_endpoints", { key })).body.data[0]);
    expect(got.body).toMatchObject({ id: endpoint.id, status: "enabled", previous_secret_expires_at: null });
    expect(JSON.stringify(got.body)).not.toContain("whsec_");
    expectError(await server.request("GET", `/v1/webhook_endpoints/${endpoint.id}`), 404, "not_found");
    expectError(await update(endpoint.id, { description: "x" }, (await account()).key), 404, "not_found");
  });

  it("changes only the fields given, announces it, and sends by the new url and types", async () => {
    const { key, keyId, eventsOf } = await account();
    const endpoint = await endpointFor(server, receiver, "/old", ["card.created"], key);
    receiver.secret("/new", endpoint.secret);
    const before = await get(endpoint.id, key);
    const changed = await update(endpoint.id, { url: `${receiver.url}/new`, events: ["policy.updated", "policy.updated"], description: "ledger" }, key);
    expect(changed.status, JSON.stringify(changed.body)).toBe(200);
    expect(changed.body).toMatchObject({ url: `${receiver.url}/new`, events: ["policy.updated"], description: "ledger", status: "enabled", created_at: before.created_at });
    expect(Date.parse(changed.body.updated_at)).toBeGreaterThan(Date.parse(before.updated_at));
    expect(await get(endpoint.id, key)).toEqual(changed.body);
    const [updated] = await eventsOf("webhook_endpoint.updated");
    expect(updated).toMatchObject({ actor: { type: "api_key", id: keyId } });
    expect(updated.data.object).toEqual(changed.body);

    // The description alone, then removed with null; the rest stays.
    expect((await update(endpoint.id, { description: "books" }, key)).body).toMatchObject({ url: `${receiver.url}/new`, events: ["policy.updated"], description: "books" });
    expect((await update(endpoint.id, { description: null }, key)).body.description).toBeNull();
    // Nothing to change: the endpoint as it is, no event.
    const same = await update(endpoint.id, { events: ["policy.updated"] }, key);
    expect(same.body).toEqual(await get(endpoint.id, key));
    expect(await eventsOf("webhook_endpoint.updated")).toHaveLength(3);

    await server.request("POST", "/v1/cards", { body: { amount_cents: 500 }, key });
    await touchPolicy(server, key);
    await eventually("delivered to the new url", () => receiver.at("/new").length === 1);
    expect(receiver.at("/new")[0]!.event.type).toBe("policy.updated");
    expect(receiver.at("/old")).toEqual([]);
  });

  it("validates an update as a create: url, types, status", async () => {
    const { key } = await account();
    const endpoint = await endpointFor(server, receiver, "/valid", ["*"], key);
    const bad = async (body: unknown, path: string, text: RegExp) => {
      const err = expectError(await update(endpoint.id, body, key), 400, "validation_error");
      expect(err.details.issues.map((i: any) => i.path)).toContain(path);
      expect(err.message).toMatch(text);
    };
    await bad({ url: "ftp://example.com/x" }, "url", /https:\/\/ or http:\/\//);
    await bad({ events: [] }, "events", /at least 1/);
    await bad({ events: ["card.exploded"] }, "events.0", /card\.created/);
    await bad({ status: "paused" }, "status", /enabled/);
    await bad({ secret: "whsec_mine" }, "secret", /secret/);
    expect(await get(endpoint.id, key)).toMatchObject({ url: `${receiver.url}/valid`, events: ["*"], status: "enabled" });
  });

  it("disables: pending deliveries fail, nothing new is sent; enabling sends the events from then on", async () => {
    const { key, keyId, eventsOf } = await account();
    await endpointFor(server, receiver, "/toggle-watch", ["webhook_endpoint.disabled", "webhook_endpoint.enabled"], key);
    receiver.behave("/toggle", 500);
    const endpoint = await endpointFor(server, receiver, "/toggle", ["*"], key);
    await touchPolicy(server, key);
    await eventually("a failed attempt", async () => (await deliveriesOf(server, endpoint.id, key))[0]?.last_response_status === 500);

    const disabled = await update(endpoint.id, { status: "disabled" }, key);
    expect(disabled.status).toBe(200);
    expect(disabled.body.status).toBe("disabled");
    const [pending] = await eventually("failed by the disabling", async () => {
      const list = await deliveriesOf(server, endpoint.id, key);
      return list[0]?.status === "failed" && list;
    });
    expect(pending).toMatchObject({ status: "failed", next_attempt_at: null, last_error: expect.stringMatching(/not sent: the endpoint (was|is) disabled/) });
    const [off] = await eventsOf("webhook_endpoint.disabled");
    expect(off).toMatchObject({ actor: { type: "api_key", id: keyId }, data: { object: { id: endpoint.id, status: "disabled" } } });
    await eventually("announced to the other endpoint", () => receiver.at("/toggle-watch").some((r) => r.event.id === off.id));
    // Disabling again changes nothing: no second event.
    expect((await update(endpoint.id, { status: "disabled" }, key)).body.status).toBe("disabled");
    expect(await eventsOf("webhook_endpoint.disabled")).toHaveLength(1);

    // While disabled, nothing is made for it.
    await touchPolicy(server, key);
    expect(await deliveriesOf(server, endpoint.id, key)).toHaveLength(1);
    const sentBefore = receiver.at("/toggle").length;

    receiver.behave("/toggle", "ok");
    expect((await update(endpoint.id, { status: "enabled" }, key)).body.status).toBe("enabled");
    const [on] = await eventsOf("webhook_endpoint.enabled");
    expect(on).toMatchObject({ actor: { type: "api_key", id: keyId }, data: { object: { id: endpoint.id, status: "enabled" } } });
    await touchPolicy(server, key);
    await eventually("the new event delivered", () => receiver.at("/toggle").length > sentBefore);
    // Its success is recorded moments after the answer.
    const list = await deliveriesWhen("its success recorded", server, endpoint.id, key, (d) => d[0]?.status === "succeeded");
    expect(list.map((d) => [d.event_type, d.status])).toEqual([
      ["policy.updated", "succeeded"],
      ["policy.updated", "failed"],
    ]);
    // Neither the disabling nor the enabling was sent to the endpoint itself.
    expect(receiver.at("/toggle").filter((r) => r.event.type.startsWith("webhook_endpoint."))).toEqual([]);
  });

  it("many identical disables at once: one change, one event", async () => {
    const { key, eventsOf } = await account();
    const endpoint = await endpointFor(server, receiver, "/race", ["policy.updated"], key);
    const answers = await Promise.all(Array.from({ length: 12 }, () => update(endpoint.id, { status: "disabled" }, key)));
    expect(answers.map((a) => a.status)).toEqual(Array(12).fill(200));
    expect(answers.every((a) => a.body.status === "disabled")).toBe(true);
    expect(await eventsOf("webhook_endpoint.disabled")).toHaveLength(1);
    // Different changes at once all land: each read again when another got there first.
    const descriptions = Array.from({ length: 20 }, (_, i) => `d${i}`);
    const changes = await Promise.all(descriptions.map((description) => update(endpoint.id, { description }, key)));
    expect(changes.map((c) => c.status)).toEqual(Array(20).fill(200));
    expect(await eventsOf("webhook_endpoint.updated")).toHaveLength(20);
    expect(descriptions).toContain((await get(endpoint.id, key)).description);
  });

  it("changes and deletions of many endpoints of one account at once, beside card creations: all land, each announced", async () => {
    const { key, eventsOf } = await account();
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) ids.push((await endpointFor(server, receiver, `/many-${i}`, ["policy.updated"], key)).id);
    const statuses = (answers: { status: number }[]) => answers.map((a) => a.status);
    // Each writes one endpoint and fans out its event over the others: on MariaDB these deadlocked (500s).
    const changed = await Promise.all([
      ...ids.map((id, i) => update(id, i % 2 ? { description: `n${i}` } : { status: "disabled" }, key)),
      ...ids.map((id) => server.request("POST", `/v1/webhook_endpoints/${id}/rotate_secret`, { body: {}, key })),
      ...ids.map(() => server.request("POST", "/v1/cards", { body: { amount_cents: 100 }, key })),
    ]);
    expect(statuses(changed)).toEqual([...Array(24).fill(200), ...Array(12).fill(201)]);
    expect(await eventsOf("webhook_endpoint.secret_rotated")).toHaveLength(12);
    expect((await eventsOf("webhook_endpoint.updated")).length + (await eventsOf("webhook_endpoint.disabled")).length).toBe(12);
    const deleted = await Promise.all(ids.map((id) => server.request("DELETE", `/v1/webhook_endpoints/${id}`, { key })));
    expect(statuses(deleted)).toEqual(Array(12).fill(200));
    expect(await eventsOf("webhook_endpoint.deleted")).toHaveLength(12);
    expect((await server.request("GET", "/v1/webhook_endpoints", { key })).body.data).toEqual([]);
  });

  it("rotates the secret: both sign during the overlap, then only the new one; the answer replays with its key", async () => {
    const { key, keyId, eventsOf } = await account();
    const endpoint = await endpointFor(server, receiver, "/rotate", ["policy.updated"], key);
    const rotated = await server.request("POST", `/v1/webhook_endpoints/${endpoint.id}/rotate_secret`, { body: {}, key, headers: { "idempotency-key": "rot-1" } });
    expect(rotated.status, JSON.stringify(rotated.body)).toBe(200);
    expect(rotated.body.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(rotated.body.secret).not.toBe(endpoint.secret);
    const overlapEnds = Date.parse(rotated.body.previous_secret_expires_at);
    expect(Math.abs(overlapEnds - (Date.now() + 24 * 3600 * 1000))).toBeLessThan(60_000);
    const replay = await server.request("POST", `/v1/webhook_endpoints/${endpoint.id}/rotate_secret`, { body: {}, key, headers: { "idempotency-key": "rot-1" } });
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.body.secret).toBe(rotated.body.secret);
    const [event] = await eventsOf("webhook_endpoint.secret_rotated");
    expect(event).toMatchObject({ actor: { type: "api_key", id: keyId }, data: { object: { id: endpoint.id, previous_secret_expires_at: rotated.body.previous_secret_expires_at } } });
    expect(JSON.stringify(event)).not.toContain("whsec_");
    expect(await eventsOf("webhook_endpoint.secret_rotated")).toHaveLength(1);

    // The receiver still holds the old secret: the delivery verifies with it, and with the new one.
    await touchPolicy(server, key);
    const [during] = await eventually("delivered during the overlap", () => receiver.at("/rotate").length === 1 && receiver.at("/rotate"));
    expect(during!.headers["webhook-signature"]!.split(" ")).toHaveLength(2);
    expect(new Webhook(rotated.body.secret).verify(during!.body, during!.headers)).toEqual(during!.event);

    // Rotating with no overlap: only the newest secret signs; the old ones verify nothing.
    const final = await server.request("POST", `/v1/webhook_endpoints/${endpoint.id}/rotate_secret`, { body: { expire_previous_in_seconds: 0 }, key });
    expect(final.body.previous_secret_expires_at).toBeNull();
    receiver.secret("/rotate", final.body.secret);
    await touchPolicy(server, key);
    const [, after] = await eventually("delivered after", () => receiver.at("/rotate").length === 2 && receiver.at("/rotate"));
    expect(after!.headers["webhook-signature"]!.split(" ")).toHaveLength(1);
    for (const old of [endpoint.secret, rotated.body.secret]) expect(() => new Webhook(old).verify(after!.body, after!.headers)).toThrow();
    expectError(await server.request("POST", `/v1/webhook_endpoints/${endpoint.id}/rotate_secret`, { body: { expire_previous_in_seconds: 8 * 86400 }, key }), 400, "validation_error");
    // A JSON body is typed as sent: nothing of another type passes as a number (null as 0 would end the previous secret at once).
    for (const wrong of [null, "", [], true, "60", [5]])
      for (const path of [`/v1/webhook_endpoints/${endpoint.id}/rotate_secret`, "/trpc/webhookEndpoints.rotateSecret"]) {
        const body = path.startsWith("/trpc/") ? { id: endpoint.id, expire_previous_in_seconds: wrong } : { expire_previous_in_seconds: wrong };
        const err = expectError(await server.request("POST", path, { body, key }), 400, "validation_error");
        expect(JSON.stringify(err.details ?? err)).toContain("expire_previous_in_seconds");
      }
  });

  it("many rotations at once: each answer's secret was in force, the last one signs", async () => {
    const { key, eventsOf } = await account();
    const endpoint = await endpointFor(server, receiver, "/rotate-race", ["policy.updated"], key);
    // Enough at once that, on MariaDB, transactions share-locking the row (the event's fan-out) and then writing it deadlocked.
    const n = 20;
    const answers = await Promise.all(Array.from({ length: n }, () => server.request("POST", `/v1/webhook_endpoints/${endpoint.id}/rotate_secret`, { body: {}, key })));
    expect(answers.map((a) => a.status)).toEqual(Array(n).fill(200));
    expect(new Set(answers.map((a) => a.body.secret)).size).toBe(n);
    expect(await eventsOf("webhook_endpoint.secret_rotated")).toHaveLength(n);
    const [current] = await server.query("SELECT secret FROM webhook_endpoints WHERE id = ?", [endpoint.id]);
    expect(answers.map((a) => a.body.secret)).toContain(current.secret);
  });
});

describe("an attempt in flight while its endpoint is disabled", () => {
  let server: TestServer;
  let receiver: Receiver;
  beforeAll(async () => {
    // Attempts of 2 s: time enough to disable the endpoint while one hangs.
    server = await startServer({ ...FAST, WEBHOOK_TIMEOUT_MS: "2000" });
    receiver = await startReceiver();
  });
  afterAll(async () => {
    await server?.close();
    await receiver?.close();
  });

  it("fails with its outcome, as the endpoint's other pending deliveries did, instead of waiting for a retry", async () => {
    const key = await (await server.newAccount()).key();
    receiver.behave("/slow", "hang");
    const endpoint = await endpointFor(server, receiver, "/slow", ["policy.updated"], key);
    await touchPolicy(server, key);
    await eventually("the attempt in flight", () => receiver.at("/slow").length === 1);
    const disabled = await server.request("POST", `/v1/webhook_endpoints/${endpoint.id}`, { body: { status: "disabled" }, key });
    expect(disabled.body.status).toBe("disabled");
    // The disabling left the attempt to its outcome (it was leased): the timeout, then no retry.
    const [delivery] = await deliveriesWhen("the attempt's outcome recorded", server, endpoint.id, key, (d) => d[0]?.last_error != null);
    expect(delivery).toMatchObject({ status: "failed", attempts: 1, next_attempt_at: null, last_error: "no answer within 2000 ms" });
    // Enabled again, the endpoint is not sent it by itself (a retry of the delivery would).
    receiver.behave("/slow", "ok");
    expect((await server.request("POST", `/v1/webhook_endpoints/${endpoint.id}`, { body: { status: "enabled" }, key })).body.status).toBe("enabled");
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(receiver.at("/slow")).toHaveLength(1);
  });
});
