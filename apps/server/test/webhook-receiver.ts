import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, expect } from "vitest";
import { startServer, type TestServer } from "./harness.js";

/** How the receiver answers: 200 (ok), a status, a redirect, or never (hang); or, by the event it got, one of those. */
export type Behaviour = "ok" | "hang" | "redirect" | number | ((event: any) => "ok" | "hang" | "redirect" | number);

export interface Received {
  path: string;
  headers: Record<string, string>;
  body: string;
  event: any;
  /** When it arrived (ms). */
  at: number;
}

/**
 * A webhook receiver on 127.0.0.1 that verifies every delivery with the `standardwebhooks`
 * library (the secret of the path's endpoint, set with `secret(path, …)`) and records it; an
 * unverifiable delivery is recorded in `invalid`. Each path answers as `behave(path, …)` says.
 */
export async function startReceiver(port = 0) {
  const received: Received[] = [];
  const invalid: string[] = [];
  const secrets = new Map<string, string>();
  const behaviours = new Map<string, Behaviour>();
  const hanging = new Set<ServerResponse>();
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      const path = req.url ?? "/";
      const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)]));
      const secret = secrets.get(path);
      let event: any;
      try {
        if (!secret) throw new Error(`no secret for ${path}`);
        event = new Webhook(secret).verify(body, headers);
        received.push({ path, headers, body, event, at: Date.now() });
      } catch (err) {
        invalid.push(`${path}: ${(err as Error).message}`);
      }
      const behaviour = behaviours.get(path) ?? "ok";
      const b = typeof behaviour === "function" ? behaviour(event) : behaviour;
      if (b === "hang") hanging.add(res);
      else if (b === "redirect") res.writeHead(302, { location: `${path}/moved` }).end();
      else res.writeHead(b === "ok" ? 200 : b).end(b === "ok" ? "ok" : "no");
    });
  });
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    received,
    invalid,
    /** Deliveries to one path. */
    at: (path: string) => received.filter((r) => r.path === path),
    secret: (path: string, secret: string) => secrets.set(path, secret),
    behave: (path: string, b: Behaviour) => behaviours.set(path, b),
    async close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Resolves when `check` returns a truthy value (polled), or fails after `timeoutMs` with `what`. */
export async function eventually<T>(what: string, check: () => T | Promise<T>, timeoutMs = 15_000): Promise<Exclude<T, false | 0 | "" | null | undefined>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as Exclude<T, false | 0 | "" | null | undefined>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

export type Receiver = Awaited<ReturnType<typeof startReceiver>>;

/** A fast schedule for tests: 300 ms attempts, retries from 50 ms (the defaults are 10 s and 5 s). */
export const FAST = { WEBHOOK_ALLOW_PRIVATE: "1", WEBHOOK_TIMEOUT_MS: "300", WEBHOOK_RETRY_BASE_MS: "50" };

/**
 * A server on the FAST schedule and a receiver for a describe block: started before its tests and
 * handed to `set`, closed after them; with `verified`, every delivery must then have verified.
 */
export function useServerAndReceiver(set: (server: TestServer, receiver: Receiver) => void, o: { verified?: boolean } = {}): void {
  let server: TestServer | undefined;
  let receiver: Receiver | undefined;
  beforeAll(async () => {
    server = await startServer(FAST);
    receiver = await startReceiver();
    set(server, receiver);
  });
  afterAll(async () => {
    await server?.close();
    await receiver?.close();
    if (o.verified) expect(receiver?.invalid).toEqual([]);
  });
}

/** Creates an endpoint for `path` on the receiver and tells the receiver its secret. */
export async function endpointFor(server: TestServer, receiver: Receiver, path: string, events: string[] = ["*"], key?: string) {
  const res = await server.request("POST", "/v1/webhook_endpoints", { body: { url: receiver.url + path, events }, key });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  receiver.secret(path, res.body.secret);
  return res.body as { id: string; secret: string };
}

export const deliveriesOf = async (server: TestServer, endpointId: string, key?: string) =>
  (await server.request("GET", `/v1/webhook_endpoints/${endpointId}/deliveries?limit=100`, { key })).body.data as any[];

/** An endpoint's deliveries (newest first) once `ready` holds for them, polled as `eventually` does. */
export const deliveriesWhen = (what: string, server: TestServer, endpointId: string, key: string | undefined, ready: (deliveries: any[]) => boolean) =>
  eventually(what, async () => {
    const deliveries = await deliveriesOf(server, endpointId, key);
    return ready(deliveries) && deliveries;
  });

/** A state change with an event: the default policy updated. */
export const touchPolicy = (server: TestServer, key?: string) => server.request("PUT", "/v1/policies/default", { body: { max_amount_cents: 40000 }, key });
