import type { Event } from "@cardctl/sdk";
import type { Command } from "commander";
import { randomBytes } from "node:crypto";
import { Webhook } from "standardwebhooks";
import { ctxOf, VERSION, type Ctx } from "../context.js";
import { UsageError } from "../errors.js";
import { formatDuration } from "../output.js";
import { summarize } from "./events.js";

/** A receiver gets this long to answer a forwarded event, as webhook deliveries do. */
const FORWARD_TIMEOUT_MS = 10_000;

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
  return url.toString();
}

/**
 * POSTs the event to the receiver as a webhook delivery would be: the event JSON, signed per
 * Standard Webhooks with this session's secret; no redirects followed. The receiver's status, or
 * why there is none.
 */
async function forward(url: string, signer: Webhook, event: Event): Promise<{ status?: number; error?: string }> {
  const payload = JSON.stringify(event);
  const now = new Date();
  try {
    const res = await fetch(url, {
      method: "POST",
      redirect: "manual",
      signal: AbortSignal.timeout(FORWARD_TIMEOUT_MS),
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
standardwebhooks library and that secret) and the receiver's status is printed. A dropped
connection is resumed where it stopped. Ctrl-C quits. With --json: one event JSON per line.

Examples:
  cardctl listen
  cardctl listen --events approval.created,card.used --forward-to http://localhost:3000/webhooks`,
    )
    .action(async (o: { events?: string; forwardTo?: string }, cmd: Command) => {
      const ctx = ctxOf(cmd);
      const target = o.forwardTo === undefined ? undefined : forwardUrl(o.forwardTo);
      const types = (o.events ?? "").split(",").map((t) => t.trim()).filter(Boolean);
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
  try {
    for await (const event of client.events.stream({
      types: o.types.length ? (o.types as never) : undefined,
      signal: stop.signal,
      onConnect: () => {
        if (connections++ === 0)
          note(`${out.style("Ready!", "green", "bold")} Your webhook signing secret is ${out.style(o.secret, "bold")} (^C to quit)`);
        else note(out.style("Reconnected.", "green"));
      },
      onDisconnect: (err, retryInMs) => note(out.style(`Connection lost (${err.message}); reconnecting in ${formatDuration(retryInMs)}…`, "yellow")),
    })) {
      if (out.json) out.line(JSON.stringify(event));
      else out.line(`${clock(event.created_at)}  --> ${out.style(event.type, "bold")} [${event.id}]  ${summarize(out, event)}`);
      if (!o.target) continue;
      const r = await forward(o.target, signer, event);
      const line =
        r.status !== undefined
          ? `<-- [${out.style(String(r.status), r.status >= 200 && r.status < 300 ? "green" : "red")}] POST ${o.target} [${event.id}]`
          : `<-- ${out.style(`[ERROR] ${r.error}`, "red")} POST ${o.target} [${event.id}]`;
      note(`${clock(new Date().toISOString())}  ${line}`);
    }
  } finally {
    process.off("SIGINT", quit);
    process.off("SIGTERM", quit);
  }
}
