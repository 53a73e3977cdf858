import type { TestServer } from "./harness.js";

/** One Server-Sent Events message: its fields, or a comment line (heartbeats). */
export interface SseMessage {
  id?: string;
  event?: string;
  data?: string;
  retry?: string;
  comment?: string;
}

/**
 * A raw reader of GET /v1/events/stream (fetch, as any client would): the response, the messages
 * parsed so far, and a wait for the next message that matches.
 */
export async function openStream(baseUrl: string, key: string | null, o: { query?: string; lastEventId?: string; headers?: Record<string, string> } = {}) {
  const abort = new AbortController();
  const res = await fetch(`${baseUrl}/v1/events/stream${o.query ?? ""}`, {
    headers: {
      ...(key ? { authorization: `Bearer ${key}` } : {}),
      accept: "text/event-stream",
      ...(o.lastEventId ? { "last-event-id": o.lastEventId } : {}),
      ...o.headers,
    },
    signal: abort.signal,
  });
  const messages: SseMessage[] = [];
  const waiters = new Set<() => void>();
  let ended = false;
  const pump = (async () => {
    if (!res.body || res.status !== 200) return;
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      const reader = res.body.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let cut: number;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          // A block is one message: its fields, and any comment lines as messages of their own.
          const msg: Record<string, string> = {};
          for (const line of block.split("\n")) {
            if (line.startsWith(":")) messages.push({ comment: line.slice(1).trim() });
            else if (line) {
              const at = line.indexOf(":");
              msg[at < 0 ? line : line.slice(0, at)] = at < 0 ? "" : line.slice(at + 1).replace(/^ /, "");
            }
          }
          if (Object.keys(msg).length > 0) messages.push(msg as SseMessage);
          for (const w of waiters) w();
        }
      }
    } catch {
      // aborted
    } finally {
      ended = true;
      for (const w of waiters) w();
    }
  })();

  /** Events (data messages) parsed so far, as JSON. */
  const events = () => messages.filter((m) => m.data !== undefined).map((m) => JSON.parse(m.data!) as any);

  /** Waits until `done(messages)` holds, or the stream ends, or 20 s pass. */
  const until = (done: (m: SseMessage[]) => boolean, what = "a message") =>
    new Promise<void>((resolve, reject) => {
      const check = () => {
        if (done(messages)) {
          waiters.delete(check);
          clearTimeout(timer);
          resolve();
        } else if (ended) {
          waiters.delete(check);
          clearTimeout(timer);
          reject(new Error(`stream ended before ${what}; got ${JSON.stringify(messages)}`));
        }
      };
      const timer = setTimeout(() => {
        waiters.delete(check);
        reject(new Error(`no ${what} in 20 s; got ${JSON.stringify(messages)}`));
      }, 20_000);
      waiters.add(check);
      check();
    });

  /** Waits for an event of `type` (and `match`), and returns it. */
  const waitForEvent = async (type: string, match: (e: any) => boolean = () => true) => {
    await until(() => events().some((e) => e.type === type && match(e)), `event ${type}`);
    return events().find((e) => e.type === type && match(e));
  };

  return {
    res,
    messages,
    events,
    until,
    waitForEvent,
    /** Resolves when the server ended the stream. */
    ended: () => until(() => ended, "the end").catch(() => undefined).then(() => ended),
    close: async () => {
      abort.abort();
      await pump;
    },
  };
}

/**
 * Writes a card.created event row of `accountId` under an explicit seq, as a transaction that got
 * its auto-increment value earlier and commits now would leave it (MySQL hands out the values at
 * insert; rows appear at commit): with a lower seq than one a stream already read.
 */
export function writeEventAt(s: TestServer, accountId: string, seq: number, id: string) {
  return s.query("INSERT INTO events (seq, id, account_id, mode, type, actor_type, actor_id, data, created_at) VALUES (?, ?, ?, 'test', 'card.created', 'system', NULL, ?, ?)", [
    seq,
    id,
    accountId,
    JSON.stringify({ id: `card_${id}` }),
    Date.now(),
  ]);
}

/** The highest seq of the outbox (every account's): explicit seqs above it are free. */
export const topSeq = async (s: TestServer) => Number((await s.query("SELECT MAX(seq) AS top FROM events"))[0].top);
