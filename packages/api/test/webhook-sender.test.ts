import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AddressRefused } from "../src/webhooks/addresses.js";
import { checkedLookup, signWebhook, WebhookSender } from "../src/webhooks/sender.js";

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

describe("WebhookSender", () => {
  const received: { headers: IncomingHttpHeaders; body: string }[] = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      received.push({ headers: req.headers, body });
      res.writeHead(200).end("thanks");
    });
  });
  let port = 0;
  beforeAll(() => new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => ((port = (server.address() as AddressInfo).port), resolve()))));
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it("signs as the standardwebhooks library verifies", () => {
    const payload = JSON.stringify({ id: "evt_1", amount: 1500 });
    const timestamp = Math.floor(Date.now() / 1000);
    const headers = { "webhook-id": "evt_1", "webhook-timestamp": String(timestamp), "webhook-signature": signWebhook(SECRET, "evt_1", timestamp, payload) };
    expect(new Webhook(SECRET).verify(payload, headers)).toEqual({ id: "evt_1", amount: 1500 });
    expect(() => new Webhook(SECRET).verify(payload.replace("1500", "1501"), headers)).toThrow();
  });

  it("connects to a host name through the checked lookup, and delivers signed", async () => {
    const sender = new WebhookSender({ timeoutMs: 2000, allowPrivate: true });
    try {
      const payload = JSON.stringify({ id: "evt_2" });
      expect(await sender.send({ url: `http://localhost:${port}/hook`, secrets: [SECRET], id: "evt_2", payload })).toEqual({ ok: true, status: 200, error: null });
      const last = received.at(-1)!;
      expect(last.body).toBe(payload);
      expect(new Webhook(SECRET).verify(last.body, last.headers as Record<string, string>)).toEqual({ id: "evt_2" });
    } finally {
      sender.close();
    }
  });

  it("signs with each secret during a rotation's overlap: a receiver holding either one verifies", async () => {
    const previous = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
    const sender = new WebhookSender({ timeoutMs: 2000, allowPrivate: true });
    try {
      const payload = JSON.stringify({ id: "evt_4" });
      expect((await sender.send({ url: `http://127.0.0.1:${port}/hook`, secrets: [SECRET, previous], id: "evt_4", payload })).ok).toBe(true);
      const last = received.at(-1)!;
      expect(String(last.headers["webhook-signature"]).split(" ")).toHaveLength(2);
      for (const secret of [SECRET, previous]) expect(new Webhook(secret).verify(last.body, last.headers as Record<string, string>)).toEqual({ id: "evt_4" });
      expect(() => new Webhook("whsec_dGhpcyBpcyBub3QgYW55IG9mIHRoZSBzZWNyZXRz").verify(last.body, last.headers as Record<string, string>)).toThrow();
    } finally {
      sender.close();
    }
  });

  it("refuses a private address found by a connection's own lookup (DNS rebinding after the attempt's check)", async () => {
    const lookup = checkedLookup(false);
    const err = await new Promise((resolve) => lookup("localhost", { all: true }, (e) => resolve(e)));
    expect(err).toBeInstanceOf(AddressRefused);
    expect(String((err as Error).message)).toMatch(/host localhost resolves to a loopback, private, link-local or otherwise non-public/);
    const sender = new WebhookSender({ timeoutMs: 2000, allowPrivate: false });
    try {
      const outcome = await sender.send({ url: `http://localhost:${port}/hook`, secrets: [SECRET], id: "evt_3", payload: "{}" });
      expect(outcome).toMatchObject({ ok: false, status: null, error: expect.stringMatching(/^refused: host localhost resolves to/) });
    } finally {
      sender.close();
    }
  });
});
