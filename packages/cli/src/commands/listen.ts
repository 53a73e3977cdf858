import type { Event } from "@cardctl/sdk";
import type { Command } from "commander";
import { randomBytes } from "node:crypto";
import { Webhook } from "standardwebhooks";
import { ctxOf, VERSION, type Ctx } from "../context.js";
import { UsageError } from "../errors.js";
import { parseEventTypes } from "../options.js";
import { formatDuration } from "../output.js";
import { summarize } from "./events.js";

/** A receiver gets this long to answer a forwarded event, as webhook deliveries do. */
const FORWARD_TIMEOUT_MS = 10_000;
/** Events waiting for their forward at most: beyond, the stream waits (a receiver that hangs holds each for the timeout). */
const FORWARDS_QUEUED = 100;

/** HH:MM:SS of a timestamp, in local time (as the Stripe CLI prints them). */
const clock = (iso: string) => new Date(iso).toTimeString().slice(0, 8);

/** The forward URL, checked: http(s) only. */
function forwardUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UsageError(`--forward-to must be a URL such as http://localhost:3000/webhooks, got "${raw}".`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new UsageError(`--forward-to must be an http:// or https:// URL, got "${raw}".`);
  if (url.username || url.password) throw new UsageError("--forward-to must not carry a user name or password (a receiver verifies the signature instead).");
  return url.toString();
}

/**
 * POSTs the event to the receiver as a webhook delivery would be: the event JSON, signed per
 * Standard Webhooks with this session's secret; no redirects followed. The receiver's status, or
 * why there is none; null when `stop` (Ctrl-C) ended it first.
 */
async function forward(url: string, signer: Webhook, event: Event, stop: AbortSignal): Promise<{ status?: number; error?: string } | null> {
  const payload = JSON.stringify(event);
  const now = new Date();
  try {
    const res = await fetch(url, {
      method: "POST",
      redirect: "manual",
      signal: AbortSignal.any([AbortSignal.timeout(FORWARD_TIMEOUT_MS), stop]),
      headers: {
        "content-type": "application/json",
        "user-agent": `cardctl-cli/${VERSION} (listen)`,
        "webhook-id": event.id,
        "webhook-timestamp": String(Math.floor(now.getTime() / 1000)),
        "webhook-signature": signer.sign(event.id, now, payload),
      },
      body: payload,
    });
    await res.body?.cancel();
    return { status: res.status };
  } catch (err) {
    if (stop.aborted) return null;
    const e = err as Error & { cause?: { code?: string; message?: string } };
    if (e.name === "TimeoutError") return { error: `no answer within ${formatDuration(FORWARD_TIMEOUT_MS)}` };
    return { error: e.cause?.code ?? e.cause?.message ?? e.message };
  }
}

export function registerListen(program: Command): void {
  program
    .command("listen")
    .description("Stream the account's events live, and optionally forward each, signed, to a local URL")
    .option("--events <types>", "only these event types, comma-separated (e.g. card.created,approval.created)")
    .option("--forward-to <url>", "POST each event to this URL, signed per Standard Webhooks with the session's secret")
    .addHelpText(
      "after",
      `
Prints "Ready! Your webhook signing secret is whsec_…" (a new secret per session), then one line per
event: time, type, id and what happened. With --forward-to each event is POSTed as a webhook
delivery would be (headers webhook-id, webhook-timestamp, webhook-signature; verify with the
standardwebhooks library and that secret) and the receiver's status is printed when it answers
(one at a time, in order, each given ${FORWARD_TIMEOUT_MS / 1000} s; events are printed as they come). A dropped connection is resumed where it
stopped; a server that cannot be reached at the start is an error (exit 1). Ctrl-C quits. With
--json: one event JSON per line. --events takes the types of \`cardctl webhooks create\` ("*": all).

Examples:
  cardctl listen
  cardctl listen --events approval.created,card.used --forward-to http://localhost:3000/webhooks`,
    )
    .action(async (o: { events?: string; forwardTo?: string }, cmd: Command) => {
      const ctx = ctxOf(cmd);
      const target = o.forwardTo === undefined ? undefined : forwardUrl(o.forwardTo);
      const picked = o.events === undefined ? [] : parseEventTypes(o.events, "--events");
      const types = picked[0] === "*" ? [] : picked;
      ctx.flagNames.types = "--events";
      const secret = `whsec_${randomBytes(32).toString("base64")}`;
      await listen(ctx, { types, target, secret });
    });
}

async function listen(ctx: Ctx, o: { types: string[]; target: string | undefined; secret: string }): Promise<void> {
  const { out } = ctx;
  const client = ctx.client();
  const signer = new Webhook(o.secret);
  const stop = new AbortController();
  const quit = () => stop.abort();
  process.once("SIGINT", quit);
  process.once("SIGTERM", quit);
  // Notes go to stderr with --json, so stdout is the events alone.
  const note = (s: string) => (out.json ? out.err(s) : out.line(s));
  let connections = 0;
  let connected = false;
  /** The first connection's failure: the server cannot be reached (or refuses), said as any command says it. */
  let unreachable: Error | undefined;
  // Forwards run one after another, in the events' order, beside the stream.
  let forwards = Promise.resolve();
  let queued = 0;
  /** Resolves the stream's wait for a free place in a full queue of forwards. */
  let slotFreed: (() => void) | undefined;
  const forwardAndPrint = async (target: string, event: Event) => {
    const r = await forward(target, signer, event, stop.signal);
    if (r === null) return;
    const line =
      r.status !== undefined
        ? `<-- [${out.style(String(r.status), r.status >= 200 && r.status < 300 ? "green" : "red")}] POST ${target} [${event.id}]`
        : `<-- ${out.style(`[ERROR] ${r.error}`, "red")} POST ${target} [${event.id}]`;
    note(`${clock(new Date().toISOString())}  ${line}`);
  };
  try {
    for await (const event of client.events.stream({
      types: o.types.length ? (o.types as never) : undefined,
      signal: stop.signal,
      onConnect: () => {
        connected = true;
        if (connections++ === 0)
          note(`${out.style("Ready!", "green", "bold")} Your webhook signing secret is ${out.style(o.secret, "bold")} (^C to quit)`);
        else note(out.style("Reconnected.", "green"));
      },
      onDisconnect: (err, retryInMs) => {
        if (connections === 0) {
          unreachable = err;
          return stop.abort();
        }
        note(out.style(`${connected ? "Connection lost" : "Still unreachable"} (${err.message}); reconnecting in ${formatDuration(retryInMs)}…`, "yellow"));
        connected = false;
      },
    })) {
      if (out.json) out.line(JSON.stringify(event));
      else out.line(`${clock(event.created_at)}  --> ${out.style(event.type, "bold")} [${event.id}]  ${summarize(out, event)}`);
      if (!o.target) continue;
      // Each event is printed as it comes; its forward answers in its own time.
      const target = o.target;
      queued++;
      forwards = forwards
        .then(() => forwardAndPrint(target, event))
        .finally(() => {
          queued--;
          slotFreed?.();
        });
      // Full: the stream waits for the next forward to finish, not for all of them.
      if (queued >= FORWARDS_QUEUED) await new Promise<void>((resolve) => (slotFreed = resolve));
    }
    await forwards;
    if (unreachable) throw unreachable;
  } finally {
    process.off("SIGINT", quit);
    process.off("SIGTERM", quit);
  }
}
