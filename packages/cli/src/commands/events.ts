import type { Event } from "@cardctl/sdk";
import type { Command } from "commander";
import { ctxOf } from "../context.js";
import { parseLimit } from "../options.js";
import { fetchList } from "../pages.js";
import { relativeTime, terminalSafe, truncate, type Output } from "../output.js";

/** One line about what an event says happened, from its data.object (what agents wrote in it shown escaped). */
export const summarize = (out: Output, e: Pick<Event, "type" | "data">): string => terminalSafe(summary(out, e), true);

function summary(out: Output, e: Pick<Event, "type" | "data">): string {
  const o = e.data.object as Record<string, any>;
  const [kind] = e.type.split(".");
  switch (kind) {
    case "card":
      return `${o.id} ${out.money(o.amount_cents)} ${o.status}${o.agent_id ? ` ${o.agent_id}` : ""}`;
    case "approval":
      return `${o.id} ${out.money(o.amount_cents)} ${o.status}${o.agent_id ? ` ${o.agent_id}` : ""}${o.card_id ? ` → ${o.card_id}` : ""}${o.reason ? ` (${o.reason})` : ""}`;
    case "authorization":
      return `${o.id} ${out.money(o.amount_cents)} on ${o.card_id}${o.merchant?.name ? ` at ${o.merchant.name}` : ""}${o.decline_reason ? ` declined: ${o.decline_reason}` : ""}`;
    case "transaction":
      return `${o.id} ${o.type} ${out.money(o.amount_cents)} on ${o.card_id}`;
    case "hold":
      return `${o.card_id} captured ${out.money(o.captured_cents)}, released ${out.money(o.released_cents)}`;
    case "payment":
      return `${o.id} ${o.kind} ${out.money(o.amount_cents)} on ${o.card_id}${o.last_error ? `: ${o.last_error}` : ""}`;
    case "processor":
      return `${o.id} ${o.kind ?? o.status} ${o.last_error ?? o.recovery_error ?? ""}`.trim();
    case "api_key":
      return `${o.id} ${o.mode} ${o.role}${o.name ? ` ${o.name}` : ""}`;
    case "policy":
      return `max ${out.money(o.max_amount_cents)}, approval ${o.approval_required ? "required" : "not required"}`;
    default:
      return o.id ?? "";
  }
}

/** Who made an event happen, shortly: the key's id, `owner own_…`, `processor` or `system`. */
const actorOf = (e: Event) => (e.actor.type === "api_key" ? (e.actor.id ?? "key") : e.actor.id ? `${e.actor.type} ${e.actor.id}` : e.actor.type);

export function registerEvents(program: Command): void {
  const events = program.command("events").description("What happened on the account: cards, approvals, money, keys, policy (kept 30 days)");

  events
    .command("list")
    .description("List events, newest first")
    .option("--type <type>", "only events of this type, e.g. card.created")
    .option("--limit <n>", "page size, 1..100 (default 20)")
    .option("--all", "follow every page")
    .action(async (o: Record<string, any>, cmd: Command) => {
      const ctx = ctxOf(cmd);
      const { out } = ctx;
      const params: { type?: any; limit?: number } = {};
      if (o.type !== undefined) params.type = String(o.type);
      ctx.flagNames.type = "--type";
      if (o.limit !== undefined) params.limit = parseLimit(o.limit);
      const client = ctx.client();
      const page = await fetchList(out, "events", o, () => client.events.list(params));
      if (out.json) return out.printJson(page);
      out.table(
        ["ID", "TYPE", "SUMMARY", "WHEN"],
        page.data.map((e) => [e.id, e.type, truncate(summarize(out, e), 80), relativeTime(e.created_at)]),
        "No events.",
        { shrink: ["SUMMARY"] },
      );
      if (page.has_more) out.hint("More events exist: use --all or a larger --limit.");
    });

  events
    .command("get")
    .argument("<id>", "event id (evt_…)")
    .description("Show one event with the resource it carries")
    .action(async (id: string, _o: unknown, cmd: Command) => {
      const ctx = ctxOf(cmd);
      const { out } = ctx;
      const e = await out.spin("Fetching the event", () => ctx.client().events.get(id));
      if (out.json) return out.printJson(e);
      out.kv([
        ["ID", e.id],
        ["Type", e.type],
        ["Summary", summarize(out, e)],
        ["Created", `${relativeTime(e.created_at)} ${out.style(`(${e.created_at})`, "dim")}`],
        ["Mode", e.mode],
        ["By", actorOf(e)],
      ]);
      out.line("");
      out.line(out.style("data.object", "bold"));
      out.line(JSON.stringify(e.data.object, null, 2));
    });
}
