import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dbKind, requestTo } from "./harness.js";
import { processDatabase, spawnServer, type ServerProcess } from "./processes.js";

/**
 * A server killed with SIGKILL between the hold and the mint: the restart's recovery pass finishes
 * the card, and a retry with the same Idempotency-Key returns that one card.
 */
describe(`crash between hold and mint (${dbKind})`, () => {
  let databaseUrl: string;
  let cleanup: () => Promise<void>;
  const running: ServerProcess[] = [];

  beforeAll(async () => {
    ({ url: databaseUrl, drop: cleanup } = await processDatabase());
  });
  afterAll(async () => {
    for (const p of running) await p.stop("SIGKILL");
    await cleanup();
  });

  it("finishes the card on restart; the retry returns it; one card, one hold", async () => {
    const env = { DATABASE_URL: databaseUrl, CREATION_LEASE_MS: "1000", PROCESSOR_TIMEOUT_MS: "250" };
    const first = await spawnServer({ ...env, CARDCTL_TEST_PAUSE_AFTER_HOLD_MS: "600000" });
    running.push(first);
    const apiKey = first.apiKey!;
    expect(apiKey).toMatch(/^sk_test_/);
    const request = requestTo(first.url, apiKey);

    const body = { amount_cents: 2500, agent_id: "crash-agent" };
    const headers = { "idempotency-key": "crash-1" };
    const inFlight = request("POST", "/v1/cards", { body, headers }).catch((err: Error) => err);
    const paused = await first.waitFor(/paused after hold card_\w+/);
    const cardId = paused.split(" ").pop()!;
    await first.stop("SIGKILL");
    expect(await inFlight).toBeInstanceOf(Error); // the connection died with the process

    // The lease (1 s) runs out; the next start's recovery pass mints the card.
    await new Promise((r) => setTimeout(r, 1200));
    const second = await spawnServer(env);
    running.push(second);
    expect(second.apiKey).toBeUndefined(); // no new secrets on a second start
    const again = requestTo(second.url, apiKey);

    const card = await again("GET", `/v1/cards/${cardId}`);
    expect(card.status).toBe(200);
    expect(card.body).toMatchObject({ id: cardId, status: "OPEN", amount_cents: 2500, agent_id: "crash-agent" });

    const retry = await again("POST", "/v1/cards", { body, headers });
    expect(retry.status).toBe(201);
    expect(retry.body.id).toBe(cardId);
    const replay = await again("POST", "/v1/cards", { body, headers });
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.body.id).toBe(cardId);

    const list = await again("GET", "/v1/cards?agent_id=crash-agent");
    expect(list.body.data).toHaveLength(1);
    const balance = await again("GET", "/v1/balance");
    expect(balance.body.held_cents).toBe(2500);
    expect(balance.body.open_cards).toBe(1);
  });
});
