import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AuthenticationError, Cardctl, NotFoundError, ValidationError, type Event, type Fetch } from "../src/index.js";
import { topSeq, writeEventAt } from "../../../apps/server/test/sse.js";
import { clientFor, startServer, type TestServer } from "./helpers.js";

/**
 * A fetch whose first event stream is cut right after its first event arrives (the network's
 * doing), or after its opening message with `at` ": connected"; `beforeReconnect` runs before each
 * later stream opens. Counts the streams opened.
 */
function cutAfterFirstEvent(beforeReconnect: () => Promise<void> = async () => {}, at = "data:") {
  let connections = 0;
  const cutting: Fetch = async (input, init) => {
    const stream = input.includes("/events/stream");
    if (stream && ++connections > 1) await beforeReconnect();
    const res = await fetch(input, init);
    if (!stream || connections > 1 || !res.body) return res;
    const reader = res.body.getReader();
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const { done, value } = await reader.read();
        if (done) return controller.close();
        controller.enqueue(value);
        if (new TextDecoder().decode(value).includes(at)) {
          await reader.cancel();
          controller.error(new TypeError("terminated"));
        }
      },
    });
    return new Response(body, { status: res.status, headers: res.headers });
  };
  return { fetch: cutting, connections: () => connections };
}

describe("events.list, events.get and events.stream against the real server", () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startServer({ EVENT_STREAM_HEARTBEAT_MS: "200" });
  });
  afterAll(() => s?.close());

  const fresh = async (o: { fetch?: Fetch } = {}) => clientFor(s, { apiKey: await (await s.newAccount()).key(), ...o });

  it("lists newest first, walks every page, filters by type, gets one", async () => {
    const c = await fresh();
    for (let i = 0; i < 3; i++) await c.cards.create({ amount_cents: 100 + i });
    const page = await c.events.list({ type: "card.created", limit: 2 });
    expect(page.data.map((e) => e.data.object.amount_cents)).toEqual([102, 101]);
    expect(page.has_more).toBe(true);
    const all = await c.events.list({ type: "card.created", limit: 1 }).toArray();
    expect(all.map((e) => e.data.object.amount_cents)).toEqual([102, 101, 100]);
    expect(await c.events.get(all[0]!.id)).toEqual(all[0]);
    await expect(c.events.get("evt_000000000000000000000000")).rejects.toBeInstanceOf(NotFoundError);
  });

  it("streams live events as an async iterator; breaking the loop ends it", async () => {
    const c = await fresh();
    const seen: Event[] = [];
    let connected!: () => void;
    const open = new Promise<void>((r) => (connected = r));
    const reading = (async () => {
      for await (const e of c.events.stream({ types: ["card.created", "card.closed"], onConnect: () => connected() })) {
        seen.push(e);
        if (seen.length === 2) break;
      }
    })();
    await open;
    const card = await c.cards.create({ amount_cents: 500 });
    await c.cards.close((card as { id: string }).id);
    await reading;
    expect(seen.map((e) => [e.type, e.data.object.id])).toEqual([
      ["card.created", (card as { id: string }).id],
      ["card.closed", (card as { id: string }).id],
    ]);
  });

  it("reconnects after a dropped connection and resumes after the last event, none missed or repeated", async () => {
    const cutting = cutAfterFirstEvent();
    const c = await fresh({ fetch: cutting.fetch });
    const abort = new AbortController();
    const seen: string[] = [];
    const drops: Error[] = [];
    let connected!: () => void;
    const open = new Promise<void>((r) => (connected = r));
    let first!: () => void;
    const firstSeen = new Promise<void>((r) => (first = r));
    const reading = (async () => {
      for await (const e of c.events.stream({ types: ["card.created"], signal: abort.signal, onConnect: () => connected(), onDisconnect: (err) => drops.push(err) })) {
        seen.push(e.data.object.id as string);
        if (seen.length === 1) first();
        if (seen.length === 3) abort.abort();
      }
    })();
    await open;
    const create = async (amount: number) => ((await c.cards.create({ amount_cents: amount })) as { id: string }).id;
    const ids = [await create(100)];
    await firstSeen; // its connection is cut now; these two are made while it reconnects
    ids.push(await create(101), await create(102));
    await reading; // the abort ends the iteration without an error
    expect(seen).toEqual(ids);
    expect(cutting.connections()).toBeGreaterThanOrEqual(2);
    expect(drops.length).toBeGreaterThanOrEqual(1);
  });

  it("a drop before any event came resumes from where the stream began: an event made meanwhile arrives", async () => {
    let c!: Cardctl;
    let made = "";
    const cutting = cutAfterFirstEvent(async () => {
      if (!made) made = ((await c.cards.create({ amount_cents: 150 })) as { id: string }).id;
    }, ": connected");
    c = await fresh({ fetch: cutting.fetch });
    const drops: Error[] = [];
    for await (const e of c.events.stream({ types: ["card.created"], onDisconnect: (err) => drops.push(err) })) {
      expect(e.data.object.id).toBe(made);
      break;
    }
    expect(drops).toHaveLength(1);
    expect(cutting.connections()).toBe(2);
  });

  it("a caller slower with an event than the idle timeout is not taken for a silent stream", async () => {
    const c = await fresh();
    const drops: Error[] = [];
    const seen: string[] = [];
    let connected!: () => void;
    const open = new Promise<void>((r) => (connected = r));
    const reading = (async () => {
      for await (const e of c.events.stream({ types: ["card.created"], idleTimeoutMs: 400, onConnect: () => connected(), onDisconnect: (err) => drops.push(err) })) {
        seen.push(e.data.object.id as string);
        if (seen.length === 2) break;
        await new Promise((resolve) => setTimeout(resolve, 1200)); // three idle timeouts, heartbeats meanwhile
      }
    })();
    await open;
    const ids = [((await c.cards.create({ amount_cents: 100 })) as { id: string }).id, ((await c.cards.create({ amount_cents: 101 })) as { id: string }).id];
    await reading;
    expect(seen).toEqual(ids);
    expect(drops).toEqual([]);
  });

  it("an event that committed out of order while it reconnected arrives, and none is repeated", async () => {
    const acct = await s.newAccount();
    const top = await topSeq(s);
    // Seq top+5 is read first, and top+3 commits while the client reconnects.
    const event = (seq: number, id: string) => writeEventAt(s, acct.id, seq, id);
    let lateWritten!: () => void;
    const late = new Promise<void>((r) => (lateWritten = r));
    // The second connection opens once the late event is in.
    const c = clientFor(s, { apiKey: await acct.key(), fetch: cutAfterFirstEvent(() => late).fetch });
    const abort = new AbortController();
    const seen: string[] = [];
    let connected!: () => void;
    const open = new Promise<void>((r) => (connected = r));
    let first!: () => void;
    const firstSeen = new Promise<void>((r) => (first = r));
    const reading = (async () => {
      for await (const e of c.events.stream({ types: ["card.created"], signal: abort.signal, onConnect: () => connected() })) {
        seen.push(e.id);
        if (seen.length === 1) first();
        if (seen.length === 3) abort.abort();
      }
    })();
    await open;
    await event(top + 5, "evt_readfirst00000000000000");
    await firstSeen;
    await event(top + 3, "evt_committedlate0000000000");
    lateWritten();
    const after = ((await c.cards.create({ amount_cents: 100 })) as { id: string }).id;
    await reading;
    expect(seen.slice(0, 2)).toEqual(["evt_readfirst00000000000000", "evt_committedlate0000000000"]);
    expect((await c.events.get(seen[2]!)).data.object.id).toBe(after);
  });

  it("throws what a reconnect cannot fix: a bad key, an unknown type", async () => {
    const bad = new Cardctl({ apiKey: "sk_test_0000000000000000000000000000", baseUrl: s.url });
    await expect(bad.events.stream().next()).rejects.toBeInstanceOf(AuthenticationError);
    const c = await fresh();
    await expect(c.events.stream({ types: ["card.nope" as never] }).next()).rejects.toBeInstanceOf(ValidationError);
  });
});
