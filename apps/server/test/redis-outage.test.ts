import { Redis } from "ioredis";
import net from "node:net";
import { PassThrough } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dbKind, startServer, type Reply, type TestServer } from "./harness.js";

const REDIS_HOST = "127.0.0.1";
const REDIS_PORT = 6379;
const LIMIT = 1000;
/** Generous on purpose (the bound under test is 250 ms): the machine may be loaded. */
const MAX_REQUEST_MS = 1500;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A TCP relay in front of the real Redis that the test can cut (every socket destroyed, listener
 * closed: connections are refused), start again on the same port, or make hang (connections stay
 * open but nothing is forwarded until resumed, like a network black hole; bytes are held, not lost).
 */
class Relay {
  port = 0;
  private server: net.Server | undefined;
  private readonly sockets = new Set<net.Socket>();
  private hanging = false;

  async start(port = this.port) {
    const server = net.createServer((client) => {
      const upstream = net.connect(REDIS_PORT, REDIS_HOST);
      for (const [from, to] of [
        [client, upstream],
        [upstream, client],
      ] as const) {
        this.sockets.add(from);
        from.pipe(to);
        from.on("error", () => to.destroy());
        from.on("close", () => {
          this.sockets.delete(from);
          to.destroy();
        });
        if (this.hanging) from.pause();
      }
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, "127.0.0.1", () => resolve());
    });
    this.server = server;
    this.port = (server.address() as net.AddressInfo).port;
  }

  async stop() {
    for (const socket of this.sockets) socket.destroy();
    this.sockets.clear();
    const server = this.server;
    this.server = undefined;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  hang() {
    this.hanging = true;
    for (const socket of this.sockets) socket.pause();
  }

  resume() {
    this.hanging = false;
    for (const socket of this.sockets) socket.resume();
  }
}

describe(`rate limits while Redis is away (${dbKind})`, () => {
  const relay = new Relay();
  let s: TestServer;
  let direct: Redis;
  let logs = "";
  let key: string;
  let redisKey: string;

  const logLines = () =>
    logs
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { level: number; msg: string });
  const warnings = () => logLines().filter((l) => l.level === 40 && /redis/i.test(l.msg));
  const backLines = () => logLines().filter((l) => l.level === 30 && /Redis reachable again/.test(l.msg));
  const redisCount = async () => Number((await direct.get(redisKey)) ?? 0);

  /** One request with the test key: answered normally, with the rate-limit headers, and in time. */
  async function timedRequest(): Promise<Reply> {
    const started = performance.now();
    const r = await s.request("GET", "/v1/balance", { key });
    const ms = performance.now() - started;
    expect(r.status).toBe(200);
    expect(r.headers.get("ratelimit-limit")).toBe(String(LIMIT));
    expect(Number(r.headers.get("ratelimit-remaining"))).toBeLessThan(LIMIT);
    expect(Number(r.headers.get("ratelimit-reset"))).toBeGreaterThan(Date.now() / 1000);
    expect(ms).toBeLessThan(MAX_REQUEST_MS);
    return r;
  }

  /** Requests until the server reports Redis back (`backLines` reaches `expected`), within 20 s. */
  async function untilBack(expected: number) {
    const deadline = Date.now() + 20_000;
    while (backLines().length < expected) {
      if (Date.now() > deadline) throw new Error(`Redis not used again within 20 s; logs:\n${logs}`);
      await timedRequest();
      await sleep(100);
    }
  }

  /** Counting is in Redis: each request increments the key, and the header shows Redis's count. */
  async function expectCountedInRedis() {
    for (let i = 0; i < 3; i++) {
      const before = await redisCount();
      const r = await timedRequest();
      const after = await redisCount();
      expect(after).toBe(before + 1);
      expect(Number(r.headers.get("ratelimit-remaining"))).toBe(LIMIT - after);
    }
  }

  beforeAll(async () => {
    // A port where nothing listens yet: Redis is unreachable when the server starts.
    await relay.start(0);
    await relay.stop();
    const stream = new PassThrough();
    stream.on("data", (d) => (logs += d.toString()));
    s = await startServer(
      { REDIS_URL: `redis://127.0.0.1:${relay.port}`, RATE_LIMIT_PER_HOUR: String(LIMIT), LOG_LEVEL: "info" },
      { logStream: stream },
    );
    const account = await s.newAccount();
    const created = (await s.admin("POST", `/accounts/${account.id}/keys`, { mode: "test" })).body;
    key = created.secret;
    // The plugin's namespace and our key generator; key ids are random, so no other suite shares it.
    redisKey = `cardctl-rate-limit:key:${created.id}`;
    direct = new Redis(REDIS_PORT, REDIS_HOST);
  });

  afterAll(async () => {
    await s?.close();
    await relay.stop();
    await direct?.quit();
  });

  it("answers normally when Redis is unreachable at start, counting per instance", async () => {
    for (let i = 0; i < 5; i++) {
      const started = performance.now();
      await timedRequest();
      expect(performance.now() - started).toBeLessThan(1000);
    }
    await sleep(50);
    expect(warnings()).toHaveLength(1);
    expect(warnings()[0]!.msg).toMatch(/counted per instance/);
    expect(await direct.exists(redisKey)).toBe(0);
  });

  it("counts in Redis again once it is reachable, and says so once", async () => {
    await relay.start();
    await untilBack(1);
    await expectCountedInRedis();
    await sleep(50);
    expect(backLines()).toHaveLength(1);
    expect(warnings()).toHaveLength(1);
  });

  it("keeps answering, with headers and without waiting on Redis, when Redis is cut mid-run; one warning", async () => {
    // Requests in flight while the connection drops, then a series during the outage.
    const inFlight = Promise.all(Array.from({ length: 5 }, () => timedRequest()));
    await relay.stop();
    await inFlight;
    await sleep(100); // whatever reached Redis before the cut is counted there
    const countAtCut = await redisCount();
    for (let i = 0; i < 10; i++) await timedRequest();
    await sleep(50);
    expect(warnings()).toHaveLength(2); // the one at start, and exactly one for this outage
    expect(await redisCount()).toBe(countAtCut); // counted locally meanwhile
  });

  it("goes back to Redis when it returns, with one info line", async () => {
    await relay.start();
    await untilBack(2);
    await expectCountedInRedis();
    await sleep(50);
    expect(backLines()).toHaveLength(2);
    expect(warnings()).toHaveLength(2);
  });

  it("bounds the wait when Redis hangs (connected, not answering), then recovers", async () => {
    relay.hang();
    for (let i = 0; i < 6; i++) await timedRequest();
    await sleep(50);
    expect(warnings()).toHaveLength(3);
    relay.resume();
    await untilBack(3);
    await expectCountedInRedis();
    await sleep(50);
    expect(warnings()).toHaveLength(3);
    expect(backLines()).toHaveLength(3);
  });
});
