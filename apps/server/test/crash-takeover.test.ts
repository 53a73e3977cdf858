import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dbKind, expectError, requestTo } from "./harness.js";
import { processDatabase, spawnServer, spawnStarting, type ServerProcess } from "./processes.js";
import { sleep } from "./helpers.js";

/**
 * Several instances on one database, a request killed mid-way and the client retrying with its
 * Idempotency-Key while another instance's recovery pass is finishing that request's card: the
 * "still running" 409 must not forget the key, and once recovery is done the retry gets the card.
 */
describe(`retries while another instance recovers (${dbKind})`, () => {
  let db: { url: string; drop: () => Promise<void> };
  let apiKey: string;
  const running: Pick<ServerProcess, "stop">[] = [];
  const start = <T extends Pick<ServerProcess, "stop">>(p: T) => (running.push(p), p);

  beforeAll(async () => {
    db = await processDatabase();
    // The first start seeds the demo account and prints its key.
    const seed = await spawnServer({ DATABASE_URL: db.url });
    apiKey = seed.apiKey!;
    await seed.stop();
  });
  afterAll(async () => {
    for (const p of running) await p.stop("SIGKILL");
    await db.drop();
  });

  it("one Idempotency-Key, one card: 409 while recovery runs, then the recovered card", async () => {
    // C is up before the card exists: its own start-up recovery pass has nothing to take over.
    const [a, c] = await Promise.all([
      spawnServer({ DATABASE_URL: db.url, CREATION_LEASE_MS: "1000", PROCESSOR_TIMEOUT_MS: "250", CARDCTL_TEST_PAUSE_AFTER_HOLD_MS: "600000" }),
      spawnServer({ DATABASE_URL: db.url, CREATION_LEASE_MS: "1000", PROCESSOR_TIMEOUT_MS: "250" }),
    ]);
    start(a);
    start(c);
    const body = { amount_cents: 2500, agent_id: "takeover-agent" };
    const headers = { "idempotency-key": "takeover-1" };
    const lost = requestTo(a.url, apiKey)("POST", "/v1/cards", { body, headers }).catch((err: Error) => err);
    const cardId = (await a.waitFor(/paused after hold card_\w+/)).split(" ").pop()!;
    await a.stop("SIGKILL");
    expect(await lost).toBeInstanceOf(Error);
    await sleep(1200); // the dead request's lease runs out

    // Instance B's start-up recovery takes the card over (with a long lease) and pauses after its hold.
    const b = start(spawnStarting({ DATABASE_URL: db.url, CREATION_LEASE_MS: "60000", CARDCTL_TEST_PAUSE_AFTER_HOLD_MS: "4000" }));
    await b.waitFor(`paused after hold ${cardId}`);
    const retry = () => requestTo(c.url, apiKey)("POST", "/v1/cards", { body, headers });

    expectError(await retry(), 409, "idempotency_key_in_use");
    // Before the fix this 409 forgot the key, and this retry made a second card and a second hold.
    expectError(await retry(), 409, "idempotency_key_in_use");

    await b.ready(); // its recovery pass has minted the card
    const done = await retry();
    expect(done.status).toBe(201);
    expect(done.body.id).toBe(cardId);
    const replay = await retry();
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.body.id).toBe(cardId);

    const read = requestTo(c.url, apiKey);
    expect((await read("GET", "/v1/cards?agent_id=takeover-agent")).body.data.map((x: { id: string }) => x.id)).toEqual([cardId]);
    expect((await read("GET", "/v1/balance")).body.held_cents).toBe(2500);
  });

  it("no approval without its card: an approve killed after its hold is finished, and its retry returns the card", async () => {
    const env = { DATABASE_URL: db.url, CREATION_LEASE_MS: "1000", PROCESSOR_TIMEOUT_MS: "250" };
    const a = start(await spawnServer({ ...env, CARDCTL_TEST_PAUSE_AFTER_HOLD_MS: "600000" }));
    const onA = requestTo(a.url, apiKey);
    const pending = await onA("POST", "/v1/cards", { body: { amount_cents: 3100, policy_override: { approval_required: true } } });
    expect(pending.status).toBe(202);
    const approve = (request: typeof onA) =>
      request("POST", `/v1/approvals/${pending.body.approval_id}/approve`, { headers: { "idempotency-key": "approve-crash-1" } });
    const lost = approve(onA).catch((err: Error) => err);
    const cardId = (await a.waitFor(/paused after hold card_\w+/)).split(" ").pop()!;
    await a.stop("SIGKILL");
    expect(await lost).toBeInstanceOf(Error);
    await sleep(1200);

    const b = start(await spawnServer(env)); // its start-up recovery pass finishes the card
    const onB = requestTo(b.url, apiKey);
    const approved = (await onB("GET", "/v1/approvals?status=APPROVED")).body.data;
    expect(approved).toMatchObject([{ id: pending.body.approval_id, card_id: cardId }]);
    expect((await onB("GET", `/v1/cards/${cardId}`)).body.status).toBe("OPEN");

    const retry = await approve(onB);
    expect(retry.status).toBe(201);
    expect(retry.body.id).toBe(cardId);
    // Without the key, it is an approval that is no longer pending.
    expectError(await onB("POST", `/v1/approvals/${pending.body.approval_id}/approve`), 409, "approval_not_pending");
  });
});
