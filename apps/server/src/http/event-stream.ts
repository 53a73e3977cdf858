import { AppError, eventJson, schemas, type Services } from "@cardctl/api";
import type { FastifyInstance } from "fastify";
import { resetAsTimestamp } from "./rate-limit.js";

/** A client this far behind (bytes queued on its socket) is dropped; it resumes with Last-Event-ID. */
const MAX_BUFFERED = 1024 * 1024;

/** `?types=a,b` (or repeated): event types to keep; every type when absent. */
function parseTypes(raw: unknown): schemas.EventType[] {
  const list = (Array.isArray(raw) ? raw.join(",") : typeof raw === "string" ? raw : "").split(",").map((t) => t.trim()).filter(Boolean);
  const unknown = list.filter((t) => !(schemas.EVENT_TYPES as readonly string[]).includes(t));
  if (unknown.length > 0)
    throw new AppError(400, "validation_error", `Invalid request: types has unknown event types: ${unknown.join(", ")}.`, {
      issues: [{ path: "types", message: `unknown event types: ${unknown.join(", ")}; see GET /v1/events for the types` }],
    });
  return list as schemas.EventType[];
}

/**
 * `?mode=test|live`: the owner's session chooses its mode this way (auth.ts), as EventSource
 * cannot send the Cardctl-Mode header; an API key's mode is its own, so another one is refused.
 */
function checkMode(raw: unknown, mode: string) {
  if (raw === undefined) return;
  if (raw !== "test" && raw !== "live")
    throw new AppError(400, "validation_error", "Invalid request: mode must be test or live.", { issues: [{ path: "mode", message: "must be test or live" }] });
  if (raw !== mode)
    throw new AppError(400, "validation_error", `Invalid request: this API key is a ${mode}-mode key, and its events are of ${mode} mode only.`, {
      issues: [{ path: "mode", message: `must be ${mode} (the API key's mode) or absent` }],
    });
}

/**
 * GET /v1/events/stream: the account's new events (of the key's mode) as Server-Sent Events, one
 * `id: <cursor>` / `data: <event JSON>` message each; `?types=` filters, `?mode=` picks the mode of an owner's session, `Last-Event-ID` (a
 * cursor, or an event's id) resumes after that event (see EventFeed). Read from the outbox (EventFeed), so events written by any instance arrive:
 * those committed on this instance at once (the stream is woken), the others at its next poll (every `pollMs`).
 * Comment lines every `heartbeatMs` keep idle proxies from closing it. A request timeout never
 * ends it (Node's requestTimeout covers receiving the request only); the client's disconnect, the
 * server's close, and its credential ending do: the key revoked, the owner's session signed out or
 * expired, checked before each batch of events and at each heartbeat.
 */
export function registerEventStream(app: FastifyInstance, services: Services, opts: { heartbeatMs: number; pollMs: number }) {
  const open = new Set<() => void>();
  // Streams never end by themselves, and closing the server waits for open requests.
  app.addHook("preClose", async () => {
    for (const end of open) end();
  });

  // No HEAD twin: it would open a stream with no body to carry it.
  app.get("/v1/events/stream", { exposeHeadRoute: false }, async (req, reply) => {
    const principal = req.principal!; // the auth step answered 401 already
    const query = req.query as { types?: unknown; mode?: unknown };
    checkMode(query.mode, principal.mode);
    const types = parseTypes(query.types);
    const lastEventId = req.headers["last-event-id"];
    const feed = await services.events.feed(principal, { lastEventId: typeof lastEventId === "string" && lastEventId ? lastEventId : undefined, types });

    reply.hijack();
    resetAsTimestamp(reply);
    const res = reply.raw;
    res.writeHead(200, {
      ...(reply.getHeaders() as Record<string, string | number | string[]>),
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache, no-transform",
      connection: "keep-alive",
      // nginx and similar proxies buffer responses unless told not to.
      "x-accel-buffering": "no",
    });
    // The feed's position as the opening message's id: a client that reconnects before the first
    // event resumes from there (EventSource keeps an id that came without data too).
    res.write(`retry: 2000\nid: ${feed.position()}\n: connected\n\n`);

    let ended = false;
    let timer: NodeJS.Timeout | undefined;
    const end = () => {
      if (ended) return;
      ended = true;
      clearTimeout(timer);
      clearInterval(heartbeat);
      unwatch();
      open.delete(end);
      res.end();
    };
    open.add(end);
    res.on("close", end);
    const inForce = () => (principal.sessionId ? services.owners.inForce(principal.sessionId) : services.accounts.keyInForce(principal.keyId));
    const heartbeat = setInterval(() => {
      inForce().then(
        (ok) => {
          if (ended) return;
          if (ok) res.write(": ping\n\n");
          else end();
        },
        () => undefined, // the database is away: the next heartbeat checks again
      );
    }, opts.heartbeatMs);

    // One read of the feed at a time; a wake during one makes another right after it.
    let reading = false;
    let again = false;
    const poll = async () => {
      clearTimeout(timer);
      reading = true;
      try {
        const batch = await feed.next();
        if (batch.length > 0 && !(await inForce())) return end();
        for (const { event, cursor } of batch) {
          if (ended) return;
          res.write(`id: ${cursor}\ndata: ${eventJson(event)}\n\n`);
        }
      } catch (err) {
        // The client reconnects (retry:) and resumes from its Last-Event-ID.
        req.log.error({ err }, "event stream failed");
        return end();
      } finally {
        reading = false;
      }
      if (res.writableLength > MAX_BUFFERED) return end();
      if (ended) return;
      // A full batch leaves more to read (a backlog, another instance's burst): read on at once.
      if (again || feed.more) {
        again = false;
        void poll();
      } else timer = setTimeout(poll, opts.pollMs);
    };
    const unwatch = services.events.watch(principal, () => {
      if (ended) return;
      if (reading) again = true;
      else void poll();
    });
    // The client may have gone while the feed was opening, before `close` was listened for.
    if (res.destroyed) return end();
    void poll();
  });
}
