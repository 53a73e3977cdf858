import net from "node:net";
import { Cardctl, type ClientOptions, type Fetch } from "../src/index.js";
import type { TestServer } from "../../../apps/server/test/harness.js";

export { startServer, type TestServer } from "../../../apps/server/test/harness.js";

/** A client for the test server; `key` defaults to the demo account's full test key. */
export function clientFor(s: TestServer, o: ClientOptions = {}) {
  return new Cardctl({ apiKey: s.apiKey, baseUrl: s.url, ...o });
}

export interface Exchange {
  method: string;
  url: string;
  idempotencyKey: string | null;
  status: number | "error";
  code?: string | undefined;
}

/** A fetch that records every attempt (and can run a hook after each response). */
export function recordingFetch(after?: (x: Exchange, res: Response | undefined) => void | Promise<void>) {
  const log: Exchange[] = [];
  const f: Fetch = async (input, init) => {
    const h = new Headers(init.headers);
    const x: Exchange = { method: init.method ?? "GET", url: input, idempotencyKey: h.get("idempotency-key"), status: "error" };
    log.push(x);
    try {
      const res = await fetch(input, init);
      x.status = res.status;
      if (!res.ok) {
        const body = await res.clone().json().catch(() => undefined);
        x.code = body?.error?.code;
      }
      await after?.(x, res);
      return res;
    } catch (err) {
      await after?.(x, undefined);
      throw err;
    }
  };
  return { fetch: f, log };
}

/** A free TCP port on 127.0.0.1 that nothing listens on. */
export async function closedPort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const port = (srv.address() as net.AddressInfo).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

/**
 * A TCP proxy in front of `target`. `mode(n)` decides for connection n (1-based): "pass" forwards,
 * "drop-response" forwards the request but cuts the connection when the response starts (the
 * server has done the work, the client never hears of it), "blackhole" never answers.
 */
export async function tcpProxy(target: string, mode: (n: number) => "pass" | "drop-response" | "blackhole") {
  const { hostname, port } = new URL(target);
  const requests: string[] = [];
  const sockets = new Set<net.Socket>();
  let n = 0;
  const server = net.createServer((client) => {
    const which = mode(++n);
    const index = requests.push("") - 1;
    sockets.add(client);
    client.on("close", () => sockets.delete(client));
    client.on("error", () => undefined);
    client.on("data", (d) => (requests[index] += d.toString("latin1")));
    if (which === "blackhole") return;
    const upstream = net.connect(Number(port), hostname);
    sockets.add(upstream);
    upstream.on("close", () => {
      sockets.delete(upstream);
      client.destroy();
    });
    upstream.on("error", () => client.destroy());
    client.on("close", () => upstream.destroy());
    client.pipe(upstream);
    if (which === "drop-response") upstream.once("data", () => client.destroy());
    else upstream.pipe(client);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  return {
    url,
    /** Raw text of each connection's requests. */
    requests,
    /** Idempotency-Key of each request seen, in order. */
    idempotencyKeys: () =>
      requests.flatMap((r) => [...r.matchAll(/^idempotency-key:\s*(.+?)\r$/gim)].map((m) => m[1]!)),
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
