/**
 * GET /setup, where a 403 setup_required's `setup_url` points (issue 14, point 2; issue 17): a
 * browser gets the dashboard's Setup page (test/dashboard-setup.test.ts drives it); a client asking
 * for JSON (Accept: application/json) gets what the account needs (kyb, a payment method, the Stripe cardholder) and
 * how the operator does each, through the operator API and the cardctl CLI.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServer, type TestServer } from "./harness.js";

let s: TestServer;
beforeAll(async () => {
  s = await startServer();
});
afterAll(() => s.close());

describe("the setup page", () => {
  it("is where a 403 setup_required's setup_url leads: the dashboard's page for a browser, the steps as JSON for Accept: application/json", async () => {
    const account = await s.newAccount({ kyb: false, paymentMethod: null, cardholder: null });
    const denied = await s.request("POST", "/v1/cards", {
      key: await account.key(),
      body: { amount_cents: 500, agent_id: "a" },
      headers: { "idempotency-key": "setup-page-1" },
    });
    expect(denied.status).toBe(403);
    expect(denied.body.error.code).toBe("setup_required");
    const setupUrl = new URL(denied.body.error.details.setup_url as string);
    expect(setupUrl.pathname).toBe("/setup");

    // A browser (and any client not asking for JSON): the dashboard (its Setup page signs the owner in first), with its headers.
    for (const accept of ["text/html,application/xhtml+xml,*/*;q=0.8", "*/*", "text/html, application/json"]) {
      const page = await fetch(s.url + setupUrl.pathname, { headers: { accept } });
      expect(page.status).toBe(200);
      expect(page.headers.get("content-type"), accept).toBe("text/html; charset=utf-8");
      expect(page.headers.get("content-security-policy")).toMatch(/^default-src 'self'; script-src 'self'/);
      expect(page.headers.get("cache-control")).toBe("no-cache");
      expect(page.headers.get("vary")).toMatch(/Accept/);
      expect(await page.text()).toContain('<div id="root">');
    }

    // Accept: application/json (curl -H, agents): the steps.
    for (const accept of ["application/json", "application/json, */*;q=0.5"]) {
      const res = await fetch(s.url + setupUrl.pathname, { headers: { accept } });
      expect(res.headers.get("content-type"), accept).toMatch(/^application\/json/);
      const body = await res.json();
      expect(body.title).toBe("Finish account setup");
      expect(body.who).toContain("CARDCTL_ADMIN_TOKEN");
      expect(body.dashboard).toEqual({ url: "http://cardctl.test/setup", what: expect.stringContaining("owner signs in") });
      expect(body.check).toEqual({
        operator: { method: "GET", path: "/admin/v1/accounts/{id}", cli: "cardctl accounts get ACCOUNT_ID" },
        api_key: { method: "GET", path: "/v1/balance", field: "setup_complete" },
      });
      expect(body.steps.map((st: { cli: string }) => st.cli)).toEqual([
        "cardctl accounts verify-kyb ACCOUNT_ID",
        "cardctl accounts set-payment-method ACCOUNT_ID pm_card_visa",
        expect.stringMatching(/^cardctl accounts set-cardholder ACCOUNT_ID --type company /),
      ]);
    }

    // The example bodies are what the operator API accepts: running them completes the set-up.
    const { body: steps } = await s.request("GET", "/setup", { key: null, headers: { accept: "application/json" } });
    for (const step of steps.steps as Array<{ id: string; api: { path: string; body: unknown } }>) {
      const done = await s.admin("POST", step.api.path.replace("/admin/v1", "").replace("{id}", account.id), step.api.body);
      expect(done.status, `${step.id}: ${JSON.stringify(done.body)}`).toBe(200);
    }
    const balance = await s.request("GET", "/v1/balance", { key: await account.key() });
    expect(balance.body.setup_complete).toBe(true);
  });

  it("answers JSON for Accept: application/json, with the step ids of details.missing", async () => {
    const res = await s.request("GET", "/setup", { key: null, headers: { accept: "application/json" } });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    expect(res.headers.get("vary")).toMatch(/Accept/);
    const body = res.body as { steps: Array<{ id: string; required: { test: boolean; live: boolean }; api: { method: string; path: string; url: string }; cli: string }> };
    expect(body.steps.map((st) => st.id)).toEqual(["kyb", "payment_method", "cardholder"]);
    expect(body.steps.map((st) => `${st.api.method} ${st.api.path}`)).toEqual([
      "POST /admin/v1/accounts/{id}/kyb",
      "POST /admin/v1/accounts/{id}/payment_method",
      "POST /admin/v1/accounts/{id}/cardholder",
    ]);
    expect(body.steps[0]!.api.url).toBe("http://cardctl.test/admin/v1/accounts/{id}/kyb");
    expect(body.steps.map((st) => st.cli.split(" ").slice(0, 3).join(" "))).toEqual([
      "cardctl accounts verify-kyb",
      "cardctl accounts set-payment-method",
      "cardctl accounts set-cardholder",
    ]);
    // The cardholder is needed where Stripe issues the cards (test mode here when the suite runs on Stripe).
    expect(body.steps[2]!.required.test).toBe(s.onStripe);
    expect(body.steps[0]!.required).toEqual({ test: true, live: true });
  });
});
