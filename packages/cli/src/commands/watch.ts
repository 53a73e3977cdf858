import type { Command } from "commander";
import { createInterface, emitKeypressEvents } from "node:readline";
import { EVENT_TYPES } from "@cardctl/contract/event-types";
import { ctxOf, type Ctx } from "../context.js";
import { isApiError } from "../errors.js";
import { relativeTime, terminalSafe, truncate } from "../output.js";

interface Approval {
  id: string;
  amount_cents: number;
  agent_id: string | null;
  purpose: string | null;
  status: string;
  expires_at: string;
  created_at: string;
}

async function fetchPending(ctx: Ctx): Promise<Approval[]> {
  return (await ctx.client().approvals.list({ status: "PENDING", limit: 100 } as any).toArray(500)) as Approval[];
}

const APPROVAL_EVENTS = EVENT_TYPES.filter((t) => t.startsWith("approval."));

/**
 * Calls `changed` on each approval event of the account as it happens (GET /v1/events/stream),
 * and on each (re)connection, for what came before it: a refresh costs a request per change,
 * where polling every few seconds would spend the key's hourly budget (1,000 by default) within
 * the hour. `lost` hears why the stream ended for good (the key refused); returns its stop.
 */
function onApprovalEvents(ctx: Ctx, changed: () => void, lost: (err: unknown) => void): () => void {
  const stop = new AbortController();
  void (async () => {
    try {
      for await (const _ of ctx.client().events.stream({ types: APPROVAL_EVENTS, signal: stop.signal, onConnect: changed })) changed();
    } catch (err) {
      if (!stop.signal.aborted) lost(err);
    }
  })();
  return () => stop.abort();
}

function errText(err: unknown): string {
  if (isApiError(err)) return `${err.code}: ${err.message}${err.requestId ? ` (request id ${err.requestId})` : ""}`;
  return err instanceof Error ? err.message : String(err);
}

export function registerWatch(approvals: Command): void {
  approvals
    .command("watch")
    .description("Live view of pending requests; approve or reject with a keypress")
    .option("--interval <seconds>", "how often to refresh besides the live updates (each refresh is a request of the key's hourly budget)", "30")
    .addHelpText(
      "after",
      `
On a terminal: ↑/↓ (or j/k, or 1-9) select, a approves (asks y/N), r rejects (asks for an optional
reason, then y/N), q quits and leaves the decisions made in the terminal's scrollback.

When stdin or stdout is not a terminal, or with --json, it reads one command per line instead:
  approve <id|#n>            approve (n = position, from 1, in the last full list: the one printed
                             at start or by "list"; requests that arrive later do not shift it)
  reject <id|#n> [reason…]   reject with an optional reason
  list                       print the pending requests again
  quit                       stop (end of input also stops)
and prints one line per event: "pending <id> <amount> <agent> <purpose>", "approved <id> card <card_id>",
"rejected <id>", "gone <id>" (decided elsewhere or expired), "error <id> <code>: <message>".
With --json every event is one JSON object per line. Exit code 1 if any command failed.`,
    )
    .action(async (o: { interval: string }, cmd: Command) => {
      const ctx = ctxOf(cmd);
      const interval = Math.max(0.2, Number(o.interval) || 30) * 1000;
      ctx.client(); // fail early (exit 3) without a key
      if (process.stdin.isTTY && process.stdout.isTTY && !ctx.out.json) await interactive(ctx, interval);
      else await scripted(ctx, interval);
    });
}

/** Line-oriented mode for pipes: commands on stdin, events on stdout. */
async function scripted(ctx: Ctx, interval: number): Promise<void> {
  const { out } = ctx;
  const known = new Map<string, Approval>();
  /** The last full list printed (at start, by "list"): what #n counts in. A refresh never shifts it. */
  let order: string[] = [];
  let failed = false;
  const emit = (event: string, fields: Record<string, unknown>, text: string) => {
    if (out.json) out.line(JSON.stringify({ event, ...fields }));
    else out.line(text);
  };
  const describe = (a: Approval) =>
    `pending ${a.id} ${out.money(a.amount_cents)} ${terminalSafe(a.agent_id ?? "-", true)} ${JSON.stringify(a.purpose ?? "")} expires ${relativeTime(a.expires_at)}`;

  const refresh = async (printAll = false) => {
    const list = await fetchPending(ctx);
    const ids = new Set(list.map((a) => a.id));
    for (const id of [...known.keys()]) {
      if (!ids.has(id)) {
        known.delete(id);
        emit("gone", { id }, `gone ${id}`);
      }
    }
    for (const a of list) {
      if (printAll || !known.has(a.id)) emit("pending", { approval: a }, describe(a));
      known.set(a.id, a);
    }
    if (printAll) order = list.map((a) => a.id);
  };

  /** An approval id, or #N of the last list (null: no such number). */
  const resolveId = (ref: string | undefined) => {
    if (!ref) return undefined;
    const m = /^#?(\d+)$/.exec(ref);
    if (m) return order[Number(m[1]) - 1] ?? null;
    return ref;
  };

  const run = async (line: string): Promise<boolean> => {
    const [verb, ref, ...rest] = line.trim().split(/\s+/);
    if (!verb || verb.startsWith("#")) return true;
    const id = resolveId(ref);
    if (id === null && ["approve", "a", "reject", "r"].includes(verb.toLowerCase()))
      return usage(`no request #${ref!.replace(/^#/, "")} in the list (it has ${order.length}; "list" shows them numbered)`), true;
    switch (verb.toLowerCase()) {
      case "quit":
      case "q":
      case "exit":
        return false;
      case "list":
      case "ls":
        await refresh(true);
        return true;
      case "approve":
      case "a":
        if (!id) return usage(`approve needs an id`), true;
        try {
          const card: any = await ctx.client().approvals.approve(id);
          known.delete(id);
          emit("approved", { id, card }, `approved ${id} card ${card.id} ${out.money(card.spending_limit_cents)}`);
        } catch (err) {
          failed = true;
          emit("error", { id, error: errFields(err) }, `error ${id} ${errText(err)}`);
        }
        return true;
      case "reject":
      case "r": {
        if (!id) return usage(`reject needs an id`), true;
        const reason = rest.join(" ");
        try {
          await (ctx.client().approvals.reject as any)(id, reason ? { reason } : {});
          known.delete(id);
          emit("rejected", { id, reason: reason || null }, `rejected ${id}${reason ? ` (${reason})` : ""}`);
        } catch (err) {
          failed = true;
          emit("error", { id, error: errFields(err) }, `error ${id} ${errText(err)}`);
        }
        return true;
      }
      default:
        return usage(`unknown command "${verb}" (approve <id>, reject <id> [reason], list, quit)`), true;
    }
  };
  const usage = (msg: string) => {
    failed = true;
    emit("error", { error: { code: "usage_error", message: msg } }, `error ${msg}`);
  };

  // Refreshes and commands run one at a time, so events come out in a consistent order.
  let chain: Promise<unknown> = Promise.resolve();
  const serial = <T>(fn: () => Promise<T>): Promise<T> => {
    const p = chain.then(fn);
    chain = p.catch(() => undefined);
    return p;
  };
  await serial(() => refresh(true));
  // One refresh queued at a time: a burst of changes costs one more request, not one each.
  let queued = false;
  const refreshSoon = () => {
    if (queued) return;
    queued = true;
    serial(() => ((queued = false), refresh())).catch((err) => out.err(`refresh failed: ${errText(err)}`));
  };
  const timer = setInterval(refreshSoon, interval);
  const unwatch = onApprovalEvents(ctx, refreshSoon, (err) => out.err(`live updates stopped (${errText(err)}); refreshing every ${interval / 1000} s`));
  try {
    const rl = createInterface({ input: process.stdin, terminal: false });
    for await (const line of rl) {
      if (!(await serial(() => run(line)))) break;
    }
    rl.close();
  } finally {
    clearInterval(timer);
    unwatch();
  }
  if (failed) process.exitCode = 1;
}

function errFields(err: unknown) {
  if (isApiError(err)) return { code: err.code, message: err.message, details: err.details, request_id: err.requestId };
  return { code: "error", message: err instanceof Error ? err.message : String(err) };
}

/** Full-screen mode on a terminal. */
async function interactive(ctx: Ctx, interval: number): Promise<void> {
  const { out } = ctx;
  const stdin = process.stdin;
  let list: Approval[] = [];
  let selected = 0;
  let message = "";
  let lastRefresh = 0;
  let busy = false;
  let mode:
    | { kind: "normal" }
    | { kind: "confirm"; id: string }
    | { kind: "reason"; id: string; text: string }
    | { kind: "confirm-reject"; id: string; reason: string | undefined } = { kind: "normal" };
  /** What was decided (or failed) in this session: printed after the full screen closes. */
  const log: string[] = [];
  const stamp = () => new Date().toTimeString().slice(0, 8);
  let finish!: () => void;
  const done = new Promise<void>((r) => (finish = r));

  const render = () => {
    const w = process.stdout.columns || 100;
    const lines: string[] = [];
    lines.push(
      `${out.style("cardctl approvals watch", "bold")}  ${out.style(`${list.length} pending · ${ctx.resolved.baseUrl} · refreshed ${relativeTime(new Date(lastRefresh).toISOString())}`, "dim")}`,
    );
    lines.push("");
    if (list.length === 0) lines.push(out.style("  No pending requests. Waiting…", "dim"));
    list.forEach((a, i) => {
      // purpose last: it is what a narrow terminal cuts
      const row = `${String(i + 1).padStart(2)}. ${a.id}  ${out.money(a.amount_cents).padStart(9)}  ${`expires ${relativeTime(a.expires_at)}`.padEnd(17)}  ${truncate(terminalSafe(a.agent_id ?? "", true), 16).padEnd(16)}  ${terminalSafe(a.purpose ?? "-", true)}`;
      const text = row.slice(0, w - 3);
      lines.push(i === selected ? `${out.style("›", "cyan")} ${out.style(text, "inverse")}` : `  ${text}`);
    });
    lines.push("");
    if (mode.kind === "confirm") {
      const id = mode.id;
      const a = list.find((x) => x.id === id);
      lines.push(out.style(`Approve ${id} for ${out.money(a?.amount_cents)}? This issues the card now. [y/N]`, "yellow"));
    } else if (mode.kind === "reason") lines.push(`Reject ${mode.id}. Reason (optional; Enter to continue, Esc to cancel): ${mode.text}`);
    else if (mode.kind === "confirm-reject") {
      const id = mode.id;
      const a = list.find((x) => x.id === id);
      lines.push(
        out.style(`Reject ${id} for ${out.money(a?.amount_cents)}${mode.reason ? ` (reason: ${mode.reason})` : ""}? No card will be issued. [y/N]`, "yellow"),
      );
    }
    else lines.push(out.style("↑/↓ select · a approve · r reject · q quit", "dim"));
    if (message) lines.push(message);
    process.stdout.write("\x1b[H\x1b[2J" + lines.map((line) => terminalSafe(line)).join("\n") + "\n");
  };

  const refresh = async () => {
    try {
      list = await fetchPending(ctx);
      lastRefresh = Date.now();
      if (selected >= list.length) selected = Math.max(0, list.length - 1);
    } catch (err) {
      message = out.style(`refresh failed: ${errText(err)}`, "red");
    }
    render();
  };

  const act = async (kind: "approve" | "reject", id: string, reason?: string) => {
    busy = true;
    message = out.style(`${kind === "approve" ? "Approving" : "Rejecting"} ${id}…`, "dim");
    render();
    try {
      if (kind === "approve") {
        const card: any = await ctx.client().approvals.approve(id);
        message = `${out.style("✓", "green")} Approved ${id}: card ${card.id} (•••• ${card.last_four}, ${out.money(card.spending_limit_cents)})`;
      } else {
        await (ctx.client().approvals.reject as any)(id, reason ? { reason } : {});
        message = `${out.style("✓", "green")} Rejected ${id}${reason ? ` (${reason})` : ""}`;
      }
      log.push(`${stamp()}  ${message}`);
    } catch (err) {
      message = out.style(`✗ ${errText(err)}`, "red");
      log.push(`${stamp()}  ${message} (${kind} ${id})`);
    } finally {
      busy = false;
    }
    await refresh();
  };

  const onKey = (str: string | undefined, key: { name?: string; ctrl?: boolean; sequence?: string }) => {
    if (key?.ctrl && key.name === "c") return finish();
    if (mode.kind === "confirm") {
      const id = mode.id;
      mode = { kind: "normal" };
      if (str === "y" || str === "Y") void act("approve", id);
      else {
        message = "Not approved.";
        render();
      }
      return;
    }
    if (mode.kind === "confirm-reject") {
      const { id, reason } = mode;
      mode = { kind: "normal" };
      if (str === "y" || str === "Y") void act("reject", id, reason);
      else {
        message = "Not rejected.";
        render();
      }
      return;
    }
    if (mode.kind === "reason") {
      if (key?.name === "escape") mode = { kind: "normal" };
      else if (key?.name === "return" || key?.name === "enter") {
        // As before an approve: a [y/N] before the reject is sent.
        mode = { kind: "confirm-reject", id: mode.id, reason: mode.text.trim() || undefined };
      } else if (key?.name === "backspace") mode.text = mode.text.slice(0, -1);
      else if (str && str >= " " && !key?.ctrl) mode.text += str;
      return render();
    }
    if (busy) return;
    const current = list[selected];
    switch (key?.name ?? str) {
      case "q":
      case "escape":
        return finish();
      case "up":
      case "k":
        selected = Math.max(0, selected - 1);
        return render();
      case "down":
      case "j":
        selected = Math.min(Math.max(0, list.length - 1), selected + 1);
        return render();
      case "a":
        if (current) mode = { kind: "confirm", id: current.id };
        return render();
      case "r":
        if (current) mode = { kind: "reason", id: current.id, text: "" };
        return render();
      default:
        if (str && /^[1-9]$/.test(str) && Number(str) <= list.length) {
          selected = Number(str) - 1;
          render();
        }
    }
  };

  emitKeypressEvents(stdin);
  stdin.setRawMode(true);
  stdin.resume();
  stdin.on("keypress", onKey);
  process.stdout.write("\x1b[?1049h\x1b[?25l");
  const restore = () => process.stdout.write("\x1b[?25h\x1b[?1049l");
  process.once("exit", restore);
  await refresh();
  const refreshIfIdle = () => {
    if (!busy && mode.kind === "normal") void refresh();
  };
  const timer = setInterval(refreshIfIdle, interval);
  const unwatch = onApprovalEvents(ctx, refreshIfIdle, (err) => {
    message = out.style(`live updates stopped (${errText(err)}); refreshing every ${interval / 1000} s`, "red");
    render();
  });
  try {
    await done;
  } finally {
    clearInterval(timer);
    unwatch();
    stdin.off("keypress", onKey);
    stdin.setRawMode(false);
    stdin.pause();
    restore();
    process.off("exit", restore);
  }
  // The full screen is gone with its messages: what was decided stays in the scrollback.
  if (log.length) {
    out.line(out.style(`cardctl approvals watch: ${log.length} decision${log.length === 1 ? "" : "s"} this session`, "bold"));
    for (const entry of log) out.line(`  ${entry}`);
  } else out.line(out.style("cardctl approvals watch: no decisions this session.", "dim"));
}
