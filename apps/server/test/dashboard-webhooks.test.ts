import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { expectSecretOnce, haveChromium, openDashboard, ownServer, type Dashboard } from "./browser.js";
import { dbKind, type TestServer } from "./harness.js";
import { eventually, startReceiver } from "./webhook-receiver.js";

/**
 * The dashboard's Webhooks page (/webhooks), in Debian's chromium against the real server: an
 * endpoint added from the page delivers to a local receiver that verifies each delivery with the
 * secret the page showed (the `standardwebhooks` library); a failed delivery is retried from the
 * page; Delete asks first; the API's refusals (validation, SSRF) show on the page.
 */
type Receiver = Awaited<ReturnType<typeof startReceiver>>;

/**
 * Deliveries to 127.0.0.1 allowed; fast attempts; the retry schedule ends after 600 ms, so a
 * receiver that keeps failing gets a failed delivery (and a disabled endpoint) within a second.
 */
const ENV = { WEBHOOK_ALLOW_PRIVATE: "1", WEBHOOK_TIMEOUT_MS: "2000", WEBHOOK_RETRY_BASE_MS: "50", WEBHOOK_RETRY_WINDOW_MS: "600" };

/**
 * Chromium logs every 4xx answer to fetch as a console error; the ones a test provokes on purpose
 * (the API refusing a URL) are taken out of `problems`, exactly as many as expected.
 */
function takeExpected400s(d: Dashboard, count: number) {
  const refused = d.problems.filter((p) => /status of 400/.test(p));
  expect(refused).toHaveLength(count);
  d.problems.splice(0, d.problems.length, ...d.problems.filter((p) => !/status of 400/.test(p)));
}

describe.skipIf(!haveChromium)(`the Webhooks page (${dbKind})`, () => {
  let s: TestServer;
  let d: Dashboard;
  let page: Dashboard["page"];
  let receiver: Receiver;
  let key: string;
  const shoot = (name: string) => d.shoot(name);
  const api = (method: string, path: string, body?: unknown) => s.request(method, path, { key, body });
  const endpointItem = (url: string) => page.getByRole("listitem", { name: `Endpoint ${url}` });
  const listed = async () => (await api("GET", "/v1/webhook_endpoints?limit=100")).body.data as any[];
  const newCard = async (purpose: string) => {
    const res = await api("POST", "/v1/cards", { amount_cents: 1000, agent_id: "hooks", purpose });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return res.body as { id: string };
  };

  /** Adds an endpoint from the page; answers the secret the page showed once (dismissed after). */
  async function addEndpoint(url: string, events?: string[]) {
    await page.getByLabel("URL").fill(url);
    if (events) {
      await page.getByLabel("Only the events chosen below").check();
      for (const type of events) await page.getByLabel(type, { exact: true }).check();
    } else await page.getByLabel("All events").check();
    await page.getByRole("button", { name: "Add endpoint" }).click();
    const box = page.getByLabel(`Signing secret of ${url}`);
    await box.waitFor();
    return box.inputValue();
  }

  beforeAll(async () => {
    s = await ownServer(ENV);
    receiver = await startReceiver();
    const account = await s.newAccount({ name: "Hooks Inc" });
    key = await account.key("test", "full");
    d = await openDashboard(s);
    page = d.page;
    await d.signInByInvite(account.id, "owner@hooks.example");
  });
  afterAll(async () => {
    await d?.close();
    await s?.close();
    await receiver?.close();
  });

  it("shows the empty list, and the API's refusal of a bad URL or no event type", async () => {
    await page.getByRole("link", { name: "Webhooks" }).click();
    await page.getByRole("heading", { name: "Webhooks", level: 1 }).waitFor();
    expect(new URL(page.url()).pathname).toBe("/webhooks");
    await page.getByText("No webhook endpoints yet.").waitFor();
    await shoot("webhooks-empty");

    await page.getByLabel("URL").fill("ftp://example.com/hooks");
    await page.getByRole("button", { name: "Add endpoint" }).click();
    await expect.poll(() => page.getByRole("alert").textContent()).toMatch(/url must start with https:\/\/ or http:\/\//);

    await page.getByLabel("URL").fill(`${receiver.url}/nothing`);
    await page.getByLabel("Only the events chosen below").check();
    await page.getByRole("button", { name: "Add endpoint" }).click();
    await expect.poll(() => page.getByRole("alert").textContent()).toMatch(/events/);
    await shoot("webhooks-invalid");
    takeExpected400s(d, 2);
    expect(await listed()).toEqual([]);
  });

  it("adds an endpoint: the secret shown once verifies its deliveries, listed as delivered", async () => {
    await page.getByText("live updates on").waitFor();
    const url = `${receiver.url}/ok`;
    const secret = await addEndpoint(url, ["card.created"]);
    expect(secret).toMatch(/^whsec_/);
    receiver.secret("/ok", secret);
    const item = endpointItem(url);
    await expectSecretOnce(d, secret, "webhooks-created", item);
    await item.getByText("card.created").waitFor();
    await item.getByText("enabled", { exact: true }).waitFor();
    expect(await listed()).toEqual([expect.objectContaining({ url, events: ["card.created"], status: "enabled", mode: "test" })]);

    // The deliveries open empty; an event appears live and ends delivered.
    await page.getByText("live updates on").waitFor();
    await item.getByRole("button", { name: "Deliveries" }).click();
    await item.getByText(/No deliveries yet/).waitFor();
    const card = await newCard("Webhook test");
    const delivery = item.getByRole("listitem", { name: "Delivery of card.created" });
    await delivery.getByText("delivered", { exact: true }).waitFor();
    await delivery.getByText(/1 attempt · last answer HTTP 200/).waitFor();
    expect(await delivery.getByRole("button", { name: "Retry" }).count()).toBe(0);

    // The receiver verified it with the secret the page showed: that secret is the endpoint's.
    const got = await eventually("the delivery at the receiver", () => receiver.at("/ok")[0]);
    expect(got.event).toMatchObject({ type: "card.created", data: { object: { id: card.id } } });
    expect(receiver.invalid).toEqual([]);
    const endpointId = (await listed())[0].id;
    expect((await api("GET", `/v1/webhook_endpoints/${endpointId}/deliveries`)).body.data).toEqual([
      expect.objectContaining({ event_id: got.event.id, event_type: "card.created", status: "succeeded", attempts: 1, last_response_status: 200 }),
    ]);
  });

  it("a receiver answering 500: the failed delivery shows; Retry from the page delivers it", async () => {
    receiver.behave("/down", 500);
    const url = `${receiver.url}/down`;
    receiver.secret("/down", await addEndpoint(url));
    await page.getByRole("button", { name: "Done" }).click();
    const item = endpointItem(url);
    await item.getByRole("button", { name: "Deliveries" }).click();
    await item.getByText(/No deliveries yet/).waitFor();

    await newCard("Down the drain");
    const delivery = item.getByRole("listitem", { name: "Delivery of card.created" });
    await delivery.getByText("failed", { exact: true }).waitFor();
    await delivery.getByText(/last answer HTTP 500/).waitFor();
    // The retry schedule ended: the endpoint is disabled (the page says so, through the live event).
    await item.getByText("disabled", { exact: true }).waitFor();
    const endpoint = (await listed()).find((e) => e.url === url);
    expect(endpoint.status).toBe("disabled");
    const failed = (await api("GET", `/v1/webhook_endpoints/${endpoint.id}/deliveries`)).body.data;
    expect(failed).toEqual([expect.objectContaining({ event_type: "card.created", status: "failed", last_response_status: 500 })]);
    const attempts = receiver.at("/down").length;
    expect(attempts).toBeGreaterThanOrEqual(1);
    await shoot("webhooks");

    receiver.behave("/down", "ok");
    await delivery.getByRole("button", { name: "Retry" }).click();
    await delivery.getByText("delivered", { exact: true }).waitFor();
    await delivery.getByText(/last answer HTTP 200/).waitFor();
    await item.getByText("enabled", { exact: true }).waitFor();
    const after = (await api("GET", `/v1/webhook_endpoints/${endpoint.id}/deliveries`)).body.data;
    expect(after).toEqual([expect.objectContaining({ id: failed[0].id, status: "succeeded", attempts: attempts + 1, last_response_status: 200 })]);
    expect((await listed()).find((e) => e.url === url).status).toBe("enabled");
    expect(receiver.at("/down")).toHaveLength(attempts + 1);
    expect(receiver.invalid).toEqual([]);
  });

  it("Edit changes the URL's event types and description; the API's refusal shows on the form, Cancel leaves it as it was", async () => {
    const url = `${receiver.url}/ok`;
    const item = endpointItem(url);
    await item.getByRole("button", { name: "Edit", exact: true }).click();
    const form = item.getByRole("form", { name: `Edit ${url}` });
    expect(await form.getByLabel("URL").inputValue()).toBe(url);
    expect(await form.getByLabel("card.created", { exact: true }).isChecked()).toBe(true);
    await form.getByLabel("URL").fill("ftp://example.com/hooks");
    await form.getByRole("button", { name: "Save changes" }).click();
    await expect.poll(() => form.getByRole("alert").textContent()).toMatch(/url must start with https:\/\/ or http:\/\//);
    takeExpected400s(d, 1);
    await form.getByRole("button", { name: "Cancel" }).click();
    await form.waitFor({ state: "detached" });
    expect((await listed()).find((e) => e.url === url)).toMatchObject({ events: ["card.created"], description: null });

    await item.getByRole("button", { name: "Edit", exact: true }).click();
    expect(await form.getByRole("alert").count()).toBe(0);
    await form.getByLabel("Description (optional)").fill("orders");
    await form.getByLabel("policy.updated", { exact: true }).check();
    await d.shoot("webhooks-edit");
    await form.getByRole("button", { name: "Save changes" }).click();
    await form.waitFor({ state: "detached" });
    await item.getByText("card.created, policy.updated").waitFor();
    await item.getByText("orders", { exact: true }).waitFor();
    const endpoint = (await listed()).find((e) => e.url === url);
    expect(endpoint).toMatchObject({ events: ["card.created", "policy.updated"], description: "orders", status: "enabled" });
    const [updated] = (await api("GET", "/v1/events?type=webhook_endpoint.updated")).body.data;
    expect(updated).toMatchObject({ actor: { type: "owner" }, data: { object: { id: endpoint.id, description: "orders" } } });
  });

  it("Disable asks first and stops deliveries, Enable resumes them; Rotate secret shows the new one once and both secrets sign", async () => {
    const url = `${receiver.url}/down`;
    const item = endpointItem(url);
    const endpoint = (await listed()).find((e) => e.url === url);
    const deliveries = async () => (await api("GET", `/v1/webhook_endpoints/${endpoint.id}/deliveries`)).body.data as any[];
    const had = (await deliveries()).length;
    await item.getByRole("button", { name: "Disable", exact: true }).click();
    await item.getByRole("group", { name: "Disable" }).getByRole("button", { name: "Disable endpoint" }).click();
    await item.getByText("disabled", { exact: true }).waitFor();
    await item.getByText(/Disabled: nothing is sent to it/).waitFor();
    expect((await listed()).find((e) => e.url === url).status).toBe("disabled");
    const [off] = (await api("GET", "/v1/events?type=webhook_endpoint.disabled")).body.data.filter((e: any) => e.actor.type === "owner");
    expect(off.data.object).toMatchObject({ id: endpoint.id, status: "disabled" });
    const before = receiver.at("/down").length;
    await newCard("While disabled");
    expect(await deliveries()).toHaveLength(had);

    await item.getByRole("button", { name: "Enable", exact: true }).click();
    await item.getByText("enabled", { exact: true }).waitFor();
    expect((await listed()).find((e) => e.url === url).status).toBe("enabled");

    await item.getByRole("button", { name: "Rotate secret" }).click();
    await item.getByRole("group", { name: "Rotate secret" }).getByRole("button", { name: "Rotate secret" }).click();
    const box = page.getByLabel(`New signing secret of ${url}`);
    await box.waitFor();
    const secret = await box.inputValue();
    expect(secret).toMatch(/^whsec_/);
    await item.getByText(/The previous signing secret also signs deliveries until/).waitFor();
    // The receiver still holds the old secret: it verifies, and so does the new one the page showed.
    await newCard("After the rotation");
    const [got] = await eventually("delivered after the rotation", () => receiver.at("/down").length > before && receiver.at("/down").slice(before));
    expect(got!.headers["webhook-signature"]!.split(" ")).toHaveLength(2);
    expect(new Webhook(secret).verify(got!.body, got!.headers)).toEqual(got!.event);
    await expectSecretOnce(d, secret, "webhooks-rotated", item);
    expect(receiver.invalid).toEqual([]);
  });

  it("Delete asks first; Cancel keeps the endpoint, Delete endpoint removes it", async () => {
    const url = `${receiver.url}/ok`;
    const item = endpointItem(url);
    await item.getByRole("button", { name: "Delete", exact: true }).click();
    const confirm = item.getByRole("group", { name: "Delete" });
    await confirm.getByRole("button", { name: "Cancel" }).click();
    await confirm.waitFor({ state: "detached" });
    expect((await listed()).map((e) => e.url)).toContain(url);

    await item.getByRole("button", { name: "Delete", exact: true }).click();
    await shoot("webhooks-delete");
    await confirm.getByRole("button", { name: "Delete endpoint" }).click();
    await item.waitFor({ state: "detached" });
    expect((await listed()).map((e) => e.url)).toEqual([`${receiver.url}/down`]);
    await endpointItem(`${receiver.url}/down`).waitFor();
  });

  it("loaded nothing the CSP blocked and threw no error", () => {
    expect(d.problems).toEqual([]);
  });

});

describe.skipIf(!haveChromium)(`the Webhooks page on a server without WEBHOOK_ALLOW_PRIVATE (${dbKind})`, () => {
  let s: TestServer;
  let d: Dashboard;
  let key: string;

  beforeAll(async () => {
    s = await ownServer();
    const account = await s.newAccount({ name: "Careful Inc" });
    d = await openDashboard(s);
    await d.signInByInvite(account.id, "owner@careful.example");
    key = await account.key("test", "full");
  });
  afterAll(async () => {
    await d?.close();
    await s?.close();
  });

  it("shows the SSRF refusals: the cloud metadata address, loopback, and plain http", async () => {
    const { page } = d;
    await page.goto(`${s.url}/webhooks`);
    await page.getByRole("heading", { name: "Webhooks", level: 1 }).waitFor();
    const refusal = async (url: string, message: RegExp) => {
      await page.getByLabel("URL").fill(url);
      await page.getByRole("button", { name: "Add endpoint" }).click();
      await expect.poll(() => page.getByRole("alert").textContent()).toMatch(message);
    };
    await refusal("https://169.254.169.254/latest/meta-data", /url is not allowed: address 169\.254\.169\.254, a loopback, private, link-local/);
    await d.shoot("webhooks-refused");
    await refusal("https://127.0.0.1:9/hooks", /url is not allowed: address 127\.0\.0\.1/);
    await refusal("http://example.com/hooks", /url must start with https:\/\/ \(http:\/\/ is allowed only when the server sets WEBHOOK_ALLOW_PRIVATE\)/);
    takeExpected400s(d, 3);
    expect(await page.getByLabel(/^Signing secret of/).count()).toBe(0);
    expect((await s.request("GET", "/v1/webhook_endpoints", { key })).body.data).toEqual([]);
    expect(d.problems).toEqual([]);
  });
});
