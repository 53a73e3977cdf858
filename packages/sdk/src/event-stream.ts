import { backoffMs, sleepUntil, type HttpClient } from "./core.js";
import { APIConnectionError, InternalServerError, RateLimitError, UserAbortError } from "./errors.js";
import type { Event, EventType } from "./types.js";

/** Options of `events.stream()`. */
export interface EventStreamOptions {
  /** Only these event types (default: every type). */
  types?: EventType[] | undefined;
  /** Start after this event (`evt_…`, or a message's cursor) instead of now, e.g. where an earlier stream stopped. */
  lastEventId?: string | undefined;
  /** Ends the stream: the iteration then finishes without an error. */
  signal?: AbortSignal | undefined;
  /** Reconnect when the connection drops, with backoff, resuming after the last event (default true). */
  reconnect?: boolean | undefined;
  /** Told about each drop before reconnecting (the error, and the wait before the next attempt). */
  onDisconnect?: ((error: Error, retryInMs: number) => void) | undefined;
  /** Told each time a connection is open (the first, and after each reconnect). */
  onConnect?: (() => void) | undefined;
  /** A connection silent (not even a heartbeat) this long is taken as dropped (default 60 000 ms). */
  idleTimeoutMs?: number | undefined;
}

/**
 * Ids of the events yielded lately, kept to drop repeats: when an event committed out of order
 * around a reconnect, the server sends the moments before it again (it cannot tell what arrived).
 */
const RECENT_IDS = 10_000;

/** One Server-Sent Events message of the stream. */
interface SseMessage {
  id?: string;
  data?: string;
}

/**
 * Messages of an SSE body: blank-line separated blocks of `field: value` lines, those with data or
 * an id (the opening message's id is where the stream began); comments (heartbeats) count as
 * activity only.
 */
async function* sseMessages(body: ReadableStream<Uint8Array>, onActivity: () => void): AsyncGenerator<SseMessage> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      onActivity();
      buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
      let cut: number;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const msg: SseMessage = {};
        for (const line of block.split("\n")) {
          if (line === "" || line.startsWith(":")) continue;
          const at = line.indexOf(":");
          const field = at < 0 ? line : line.slice(0, at);
          const value = at < 0 ? "" : line.slice(at + 1).replace(/^ /, "");
          if (field === "id") msg.id = value;
          else if (field === "data") msg.data = msg.data === undefined ? value : `${msg.data}\n${value}`;
        }
        if (msg.data !== undefined || msg.id !== undefined) yield msg;
      }
    }
  } finally {
    reader.releaseLock();
  }
}

/** Failures worth reconnecting after: the network, a time-out, 429 and 5xx. */
const transient = (err: unknown) => err instanceof APIConnectionError || err instanceof RateLimitError || err instanceof InternalServerError || (err as { status?: number })?.status === 503;

/**
 * The account's events live (GET /v1/events/stream), as an async iterator. Reconnects after a
 * drop with exponential backoff and `Last-Event-ID` (the cursor of the last message), so no event
 * is missed; one sent again on a resume is dropped here, so none is repeated either. Errors a
 * retry cannot fix (401, 400) are thrown.
 */
export async function* streamEvents(http: HttpClient, options: EventStreamOptions): AsyncGenerator<Event, void, undefined> {
  const reconnect = options.reconnect ?? true;
  const idleMs = options.idleTimeoutMs ?? 60_000;
  let lastEventId = options.lastEventId;
  const recent = new Set<string>();
  const query = { types: options.types?.length ? options.types.join(",") : undefined };
  for (let failures = 0; ; ) {
    if (options.signal?.aborted) return;
    // One connection: aborted by the caller's signal or by silence.
    const connection = new AbortController();
    const onAbort = () => connection.abort();
    options.signal?.addEventListener("abort", onAbort, { once: true });
    let idle: ReturnType<typeof setTimeout> | undefined;
    const alive = () => {
      clearTimeout(idle);
      idle = setTimeout(() => connection.abort(new Error(`no data for ${idleMs} ms`)), idleMs);
    };
    let error: Error;
    try {
      alive();
      const res = await http.openStream("/events/stream", query, lastEventId ? { "last-event-id": lastEventId } : {}, connection.signal);
      failures = 0;
      options.onConnect?.();
      const messages = sseMessages(res.body!, alive);
      for (;;) {
        let next: IteratorResult<SseMessage>;
        try {
          next = await messages.next();
        } catch (err) {
          // The connection broke while open (undici: "terminated"): the network's doing.
          throw connection.signal.aborted ? err : new APIConnectionError({ code: "connection_error", message: `The event stream broke: ${(err as Error).message}`, cause: err });
        }
        if (next.done) break;
        if (next.value.data === undefined) {
          lastEventId = next.value.id;
          continue;
        }
        const event = JSON.parse(next.value.data) as Event;
        lastEventId = next.value.id ?? event.id;
        if (recent.has(event.id)) continue;
        recent.add(event.id);
        if (recent.size > RECENT_IDS) recent.delete(recent.values().next().value!);
        // The caller's time with the event is not the server's silence (a slow --forward-to receiver).
        clearTimeout(idle);
        yield event;
        alive();
      }
      error = new APIConnectionError({ code: "stream_ended", message: "The server ended the event stream." });
    } catch (err) {
      if (options.signal?.aborted) return;
      if (err instanceof UserAbortError || connection.signal.aborted) error = new APIConnectionError({ code: "stream_idle", message: `The event stream was silent for ${idleMs} ms.`, cause: err });
      else if (!transient(err)) throw err;
      else error = err as Error;
    } finally {
      clearTimeout(idle);
      options.signal?.removeEventListener("abort", onAbort);
      connection.abort();
    }
    if (!reconnect) throw error;
    // Rate limited: reconnecting before the window resets would only be refused again.
    const wait = Math.max(backoffMs(failures++), error instanceof RateLimitError ? (error.retryAfterMs ?? 0) : 0);
    options.onDisconnect?.(error, wait);
    try {
      await sleepUntil(Date.now() + wait, options.signal);
    } catch {
      return; // aborted while waiting
    }
  }
}
