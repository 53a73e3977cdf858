import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dbKind, expectError, startServer, type TestServer } from "./harness.js";

describe(`smoke (${dbKind})`, () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startServer();
  });
  afterAll(() => s.close());

  it("creates a card with the demo key", async () => {
    const r = await s.request("POST", "/v1/cards", { body: { amount_cents: 1250, agent_id: "agent-1" } });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ status: "OPEN", spending_limit_cents: 1250, remaining_cents: 1250, agent_id: "agent-1" });
    expect(r.headers.get("request-id")).toMatch(/^req_/);
  });

  it("refuses a request without a key", async () => {
    expectError(await s.request("GET", "/v1/balance", { key: null }), 401, "unauthorized");
  });
});
