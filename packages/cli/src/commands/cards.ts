import type { ApprovalDecision, CardDetail } from "@cardctl/sdk";
import type { Command } from "commander";
import { closeSync, fchmodSync, openSync, writeSync } from "node:fs";
import { ctxOf, type Ctx } from "../context.js";
import { UsageError } from "../errors.js";
import { parseAmount, parseCents } from "../money.js";
import { parseDuration, parseLimit } from "../options.js";
import { fetchList } from "../pages.js";
import { relativeTime, truncate } from "../output.js";
import { confirmOrRefuse } from "../prompt.js";

const CARD_STATUSES = ["OPEN", "USED", "CLOSED", "PENDING_APPROVAL"];

/** Card fields common to the create, list and get shapes. */
export function printCard(ctx: Ctx, c: Record<string, any>): void {
  const { out } = ctx;
  const pairs: Array<[string, string]> = [
    ["ID", c.id],
    ["Status", out.status(c.status)],
    ["Card", `•••• ${c.last_four}  exp ${c.expiration}`],
    ["Limit", out.money(c.spending_limit_cents ?? c.amount_cents)],
    ["Remaining", out.money(c.remaining_cents)],
    ...(c.spent_cents !== undefined ? ([["Spent", out.money(c.spent_cents)]] as Array<[string, string]>) : []),
    ["Agent", c.agent_id ?? "-"],
  ];
  if ("purpose" in c) pairs.push(["Purpose", c.purpose ?? "-"]);
  pairs.push(["Created", `${relativeTime(c.created_at)} ${out.style(`(${c.created_at})`, "dim")}`]);
  if (c.expires_at && c.status === "OPEN") pairs.push(["Expires", `${relativeTime(c.expires_at)} ${out.style(`(${c.expires_at})`, "dim")}`]);
  if ("closed_at" in c) pairs.push(["Closed", c.closed_at ? relativeTime(c.closed_at) : "-"]);
  if (c.processor_card_id) pairs.push(["Processor id", c.processor_card_id]);
  if (c.ephemeral_key_secret) pairs.push(["Ephemeral key", out.style("(secret; shown with --json, for the processor's reveal library)", "dim")]);
  out.kv(pairs);
}

export function printPending(ctx: Ctx, p: { approval_id: string; expires_at: string }): void {
  const { out } = ctx;
  out.line(`${out.status("PENDING_APPROVAL")}: the policy requires a human approval.`);
  out.kv([
    ["Approval", p.approval_id],
    ["Expires", `${relativeTime(p.expires_at)} ${out.style(`(${p.expires_at})`, "dim")}`],
  ]);
  out.hint(`Approve with: cardctl approvals approve ${p.approval_id}   (or watch with: cardctl approvals watch)`);
}

/** "•••• •••• •••• 4242": a 16-digit card's groups, all but the last four hidden. */
export const maskNumber = (lastFour: string) => `•••• •••• •••• ${lastFour}`;
const groupDigits = (n: string) => n.replace(/(\d{4})(?=\d)/g, "$1 ");

/** Writes a secret to a file only its owner can read (0600), also when the file existed with a wider mode. */
function writeSecretFile(path: string, content: string): void {
  const fd = openSync(path, "w", 0o600);
  try {
    fchmodSync(fd, 0o600);
    writeSync(fd, content);
  } finally {
    closeSync(fd);
  }
}

export function registerCards(program: Command): void {
  const cards = program.command("cards").description("Create, list, inspect and close virtual cards");

  cards
    .command("create")
    .description("Request a single-use virtual card")
    .option("--amount <dollars>", "spending limit in dollars, e.g. 12.50")
    .option("--amount-cents <cents>", "spending limit in cents, e.g. 1250")
    .option("--agent <id>", "agent id to record on the card")
    .option("--purpose <text>", "what the card is for (≤ 500 chars)")
    .option("--require-approval", "require a human approval even if the default policy does not")
    .option("--max <dollars>", "tighten the per-card maximum for this request, e.g. 20.00")
    .option("--wait", "when approval is needed, wait for the decision (spinner) and print the card")
    .option("--timeout <duration>", "with --wait: give up after this long (e.g. 10m)", "15m")
    .option("--idempotency-key <key>", "reuse a key to make a retried request safe")
    .addHelpText(
      "after",
      "\nExamples:\n  cardctl cards create --amount 12.50 --agent shopper --purpose 'API credits'\n  cardctl cards create --amount-cents 1250 --require-approval --wait",
    )
    .action(async (o: Record<string, any>, cmd: Command) => {
      const ctx = ctxOf(cmd);
      const { out } = ctx;
      const params = cardRequestParams(ctx, o);
      const timeoutMs = parseDuration(o.timeout, "--timeout");
      if (o.purpose !== undefined) params.purpose = o.purpose;
      // An empty key (an unset $ORDER_ID) would silently drop the protection a retry relies on.
      const key: string | undefined = o.idempotencyKey;
      if (key !== undefined && (key.length < 1 || key.length > 199))
        throw new UsageError(`--idempotency-key must be 1 to 199 characters${key === "" ? " (it is empty: is the variable you meant to pass unset?)" : ` (it has ${key.length})`}.`);
      const reqOpts = key !== undefined ? { idempotencyKey: key } : undefined;
      ctx.retryWith = "--idempotency-key";

      const client = ctx.client();
      const created: any = await out.spin("Requesting a card", () => (client.cards.create as any)(params, reqOpts));
      if (created.status !== "PENDING_APPROVAL" || !o.wait) {
        if (out.json) return out.printJson(created);
        if (created.status === "PENDING_APPROVAL") return printPending(ctx, created);
        out.line(`${out.style("✓", "green")} Card issued.`);
        return printCard(ctx, created);
      }
      if (!out.json) printPending(ctx, created);
      const decided = await waitForDecision(ctx, created.approval_id, timeoutMs);
      if (out.json) return out.printJson(decided);
      out.line(`${out.style("✓", "green")} Approved. Card issued.`);
      printCard(ctx, decided);
    });

  cards
    .command("list")
    .description("List cards, newest first")
    .option("--status <status>", `filter: ${CARD_STATUSES.join(", ")}`)
    .option("--agent <id>", "filter by agent id")
    .option("--limit <n>", "page size, 1..100 (default 20)")
    .option("--all", "follow every page")
    .action(async (o: Record<string, any>, cmd: Command) => {
      const ctx = ctxOf(cmd);
      const { out } = ctx;
      const params: Record<string, unknown> = {};
      if (o.status !== undefined) {
        const s = String(o.status).toUpperCase();
        if (!CARD_STATUSES.includes(s)) throw new UsageError(`--status must be one of ${CARD_STATUSES.join(", ")}.`);
        params.status = s;
      }
      if (o.agent !== undefined) params.agent_id = o.agent;
      if (o.limit !== undefined) params.limit = parseLimit(o.limit);
      const client = ctx.client();
      const page = await fetchList(out, "cards", o, () => client.cards.list(params as any));
      if (out.json) return out.printJson(page);
      out.table(
        ["ID", "STATUS", "AMOUNT", "REMAINING", "CARD", "AGENT", "PURPOSE", "CREATED"],
        page.data.map((c) => [
          c.id,
          out.status(c.status),
          out.money(c.amount_cents),
          out.money(c.remaining_cents),
          `•••• ${c.last_four}`,
          truncate(c.agent_id, 20),
          c.purpose ?? "-",
          relativeTime(c.created_at),
        ]),
        "No cards.",
        { shrink: ["PURPOSE", "AGENT"], drop: ["CARD", "REMAINING"] },
      );
      if (page.has_more) out.hint("More cards exist: use --all or a larger --limit.");
    });

  cards
    .command("get")
    .argument("<id>", "card id (card_…)")
    .description("Show one card (the ephemeral key secret only with --json)")
    .action(async (id: string, _o: unknown, cmd: Command) => {
      const ctx = ctxOf(cmd);
      const client = ctx.client();
      // The card with its money lifecycle: every authorization and every transaction on it.
      const [card, authorizations, transactions] = await ctx.out.spin("Fetching the card", () =>
        Promise.all([client.cards.get(id), client.authorizations.list({ card_id: id, limit: 100 }).toArray(), client.transactions.list({ card_id: id, limit: 100 }).toArray()]),
      );
      if (ctx.out.json) return ctx.out.printJson({ ...card, authorizations, transactions });
      const { out } = ctx;
      printCard(ctx, card);
      out.line("");
      out.line(out.style("Authorizations", "bold"));
      out.table(
        ["ID", "Amount", "Decision", "Status", "Merchant", "When"],
        authorizations.map((a) => [
          a.id,
          out.money(a.amount_cents),
          a.approved ? out.style("approved", "green") : out.style(`declined: ${a.decline_reason ?? "-"}`, "red"),
          a.status,
          truncate([a.merchant.name, a.merchant.country].filter(Boolean).join(", ") || "-", 30),
          relativeTime(a.created_at),
        ]),
        "No authorizations.",
        { shrink: ["Merchant", "Decision"] },
      );
      out.line("");
      out.line(out.style("Transactions", "bold"));
      out.table(
        ["ID", "Type", "Amount", "Merchant", "When"],
        transactions.map((t) => [t.id, t.type, out.money(t.type === "refund" ? -t.amount_cents : t.amount_cents), truncate(t.merchant_name ?? "-", 30), relativeTime(t.created_at)]),
        "No transactions.",
        { shrink: ["Merchant"] },
      );
    });

  cards
    .command("reveal")
    .argument("<id>", "card id (card_…)")
    .option("--show", "print the full number and CVC (masked otherwise)")
    .option("--output-file <path>", "write the number, CVC and expiry as JSON to this file (mode 0600)")
    .description("Reveal a card's number and CVC, read straight from the card processor with an ephemeral key")
    .action(async (id: string, o: { show?: boolean; outputFile?: string }, cmd: Command) => {
      const ctx = ctxOf(cmd);
      const { out } = ctx;
      const card = await out.spin("Revealing the card", () => ctx.client().cards.reveal(id));
      const expiry = `${String(card.exp_month).padStart(2, "0")}/${card.exp_year}`;
      if (o.outputFile) writeSecretFile(o.outputFile, JSON.stringify({ id, ...card }, null, 2) + "\n");
      const saved = o.outputFile ? { output_file: o.outputFile } : {};
      if (out.json)
        return out.printJson(
          o.show ? { id, ...card, ...saved } : { id, number: maskNumber(card.last_four), cvc: "•••", exp_month: card.exp_month, exp_year: card.exp_year, last_four: card.last_four, ...saved },
        );
      out.kv([
        ["ID", id],
        ["Number", o.show ? groupDigits(card.number) : maskNumber(card.last_four)],
        ["CVC", o.show ? card.cvc : "•••"],
        ["Expires", expiry],
      ]);
      if (o.outputFile) out.hint(`Written to ${o.outputFile} (mode 0600). Delete it when done.`);
      if (!o.show) out.hint("Masked. Pass --show to print the number and CVC, or --output-file <path> to save them.");
    });

  cards
    .command("close")
    .argument("<id>", "card id (card_…)")
    .option("-y, --yes", "do not ask for confirmation")
    .description("Close a card: revoke it at the processor and release its hold (idempotent)")
    .action(async (id: string, o: { yes?: boolean }, cmd: Command) => {
      const ctx = ctxOf(cmd);
      const { out } = ctx;
      await confirmOrRefuse(o.yes, { what: `close ${id}`, question: `Close card ${id}? It cannot be used again.`, aborted: "Aborted; the card was not closed." });
      const res: any = await out.spin("Closing the card", () => ctx.client().cards.close(id));
      if (out.json) return out.printJson(res);
      out.line(`${out.style("✓", "green")} Card ${id} is ${out.status(res.status ?? "CLOSED")}.`);
    });
}

/**
 * Waits for an approval decision with a spinner. Returns the issued card; REJECTED / EXPIRED or a
 * timeout become an error (exit 1).
 */
export async function waitForDecision(ctx: Ctx, approvalId: string, timeoutMs: number): Promise<any> {
  const client = ctx.client();
  const controller = new AbortController();
  const onSig = () => controller.abort();
  process.once("SIGINT", onSig);
  try {
    const res = await ctx.out.spin(`Waiting for a human to approve ${approvalId} (Ctrl-C to stop waiting)`, () =>
      client.approvals.waitForDecision(approvalId, { timeoutMs, signal: controller.signal }),
    );
    return decisionToCard(res, approvalId);
  } finally {
    process.off("SIGINT", onSig);
  }
}

/** The SDK's decision → the card, or an error naming the outcome. */
function decisionToCard(res: ApprovalDecision, approvalId: string): CardDetail {
  if (res.status === "APPROVED") return res.card;
  throw new DecisionError(res.status, approvalId, res.approval.reason);
}

export class DecisionError extends Error {
  readonly code: string;
  readonly status = undefined;
  readonly details: Record<string, unknown>;
  constructor(readonly decision: string, approvalId: string, reason?: string | null) {
    super(`Approval ${approvalId} was ${decision.toLowerCase()}${reason ? `: ${reason}` : ""}; no card was issued.`);
    this.code = `approval_${decision.toLowerCase()}`;
    this.details = { approval_id: approvalId, status: decision, reason: reason ?? null };
  }
}

/**
 * The body of a card request from the flags both `cards create` and `policy check` take: the
 * amount (--amount dollars or --amount-cents), --agent, --require-approval and --max.
 */
export function cardRequestParams(ctx: Ctx, o: Record<string, any>): Record<string, unknown> {
  if (o.amount !== undefined && o.amountCents !== undefined) throw new UsageError("Give either --amount or --amount-cents, not both.");
  if (o.amount === undefined && o.amountCents === undefined) throw new UsageError("Give the amount: --amount 12.50 or --amount-cents 1250.");
  const amount_cents = o.amount !== undefined ? parseAmount(o.amount) : parseCents(o.amountCents);
  // The API's messages about these fields are shown in dollars, with the flag the user typed.
  if (o.amount !== undefined) ctx.dollarFlags.amount_cents = { flag: "--amount", input: o.amount };
  else ctx.centsTyped = true;
  if (o.max !== undefined) ctx.dollarFlags["policy_override.max_amount_cents"] = { flag: "--max", input: o.max };
  const policy_override: Record<string, unknown> = {};
  if (o.requireApproval) policy_override.approval_required = true;
  if (o.max !== undefined) policy_override.max_amount_cents = parseAmount(o.max, "--max");
  const params: Record<string, unknown> = { amount_cents };
  if (o.agent !== undefined) params.agent_id = o.agent;
  if (Object.keys(policy_override).length) params.policy_override = policy_override;
  return params;
}
