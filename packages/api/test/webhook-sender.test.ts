import { createSocket } from "node:dgram";
import { promises as dns } from "node:dns";
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AddressRefused, resolveWebhookHost } from "../src/webhooks/addresses.js";
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
    const checked = checkedLookup(false, 2000);
    const err = await new Promise((resolve) => checked("localhost", { all: true }, (e) => resolve(e)));
    expect(err).toBeInstanceOf(AddressRefused);
    expect(String((err as Error).message)).toMatch(/host localhost resolves to a loopback, private, link-local or otherwise non-public/);
    const sender = new WebhookSender({ timeoutMs: 2000, allowPrivate: false });
    try {
      const outcome = await sender.send({ url: `https://localhost:${port}/hook`, secrets: [SECRET], id: "evt_3", payload: "{}" });
      expect(outcome).toMatchObject({ ok: false, status: null, error: expect.stringMatching(/^refused: host localhost resolves to/) });
    } finally {
      sender.close();
    }
  });

  it("refuses http:// at delivery unless WEBHOOK_ALLOW_PRIVATE (an endpoint made while it was set)", async () => {
    const sender = new WebhookSender({ timeoutMs: 2000, allowPrivate: false });
    const before = received.length;
    try {
      const outcome = await sender.send({ url: "http://93.184.215.14/hook", secrets: [SECRET], id: "evt_5", payload: "{}" });
      expect(outcome).toEqual({ ok: false, status: null, error: expect.stringMatching(/^refused: http:\/\/ is allowed only when the server sets WEBHOOK_ALLOW_PRIVATE/) });
      expect(received.length).toBe(before);
    } finally {
      sender.close();
    }
  });
});

describe("webhook host lookups", () => {
  // A DNS server that never answers, for the names this suite looks up through DNS.
  const silent = createSocket("udp4");
  const system = dns.getServers();
  beforeAll(async () => {
    await new Promise<void>((resolve) => silent.bind(0, "127.0.0.1", resolve));
    dns.setServers([`127.0.0.1:${silent.address().port}`]);
  });
  afterAll(() => {
    dns.setServers(system);
    silent.close();
  });

  it("a name whose DNS never answers fails at its deadline, holding none of the threads the system's lookups need", async () => {
    // Many hanging names at once (each endpoint's attempts in flight) ...
    const hanging = Array.from({ length: 8 }, (_, i) => resolveWebhookHost(`hangs-${i}.example`, false, 1500).then(() => "resolved", (err: Error) => err));
    let settled = 0;
    for (const p of hanging) void p.then(() => settled++);
    // ... leave getaddrinfo (libuv's thread pool) to everything else: it answers while they still wait.
    for (let i = 0; i < 4; i++) expect((await dns.lookup("localhost", { all: true })).length).toBeGreaterThan(0);
    expect(settled).toBe(0);
    for (const outcome of await Promise.all(hanging)) {
      expect(outcome).toBeInstanceOf(AddressRefused);
      expect((outcome as Error).message).toMatch(/^host hangs-\d\.example could not be resolved \(no answer within 1500 ms\)$/);
    }
  });

  it("attempts to one host close together share its lookup, its failure too", async () => {
    const first = resolveWebhookHost("shared.example", false, 1000).catch((err: Error) => err);
    const second = resolveWebhookHost("shared.example", false, 1000).catch((err: Error) => err);
    expect(await second).toBe(await first);
  });
});
