import { Option, type Command } from "commander";
import { ctxOf, type Ctx } from "../context.js";
import { UsageError } from "../errors.js";
import { formatMoney } from "@cardctl/sdk";
import { parseAmount } from "../money.js";
import { parseLimit } from "../options.js";
import { fetchList } from "../pages.js";
import { relativeTime, truncate } from "../output.js";
import { hints } from "../report.js";
import { cardRequestParams, printCard } from "./cards.js";

const APPROVAL_STATUSES = ["PENDING", "APPROVED", "REJECTED", "EXPIRED"];

export function printPolicy(ctx: Ctx, p: { approval_required: boolean; max_amount_cents: number }): void {
  ctx.out.kv([
    ["Approval required", p.approval_required ? ctx.out.style("yes", "yellow") : "no"],
    ["Max per card", ctx.out.money(p.max_amount_cents)],
  ]);
}

export function approvalRows(ctx: Ctx, list: any[]): string[][] {
  const { out } = ctx;
  return list.map((a) => [
    a.id,
    out.status(a.status),
    out.money(a.amount_cents),
    truncate(a.agent_id, 20),
    a.purpose ?? "-",
    relativeTime(a.created_at),
    a.status === "PENDING" ? relativeTime(a.expires_at) : (a.card_id ?? truncate(a.reason, 24)),
  ]);
}
export const APPROVAL_HEADERS = ["ID", "STATUS", "AMOUNT", "AGENT", "PURPOSE", "CREATED", "EXPIRES / RESULT"];

export function registerAccount(program: Command): void {
  program
    .command("balance")
    .description("Spend summary: held amount, open cards, pending approvals, policy, setup")
    .action(async (_o: unknown, cmd: Command) => {
      const ctx = ctxOf(cmd);
      const b: any = await ctx.out.spin("Fetching the balance", () => ctx.client().balance.retrieve());
      if (ctx.out.json) return ctx.out.printJson(b);
      const { out } = ctx;
      out.kv([
        ["Held", out.money(b.held_cents)],
        ["Open cards", String(b.open_cards)],
        ["Pending approvals", b.pending_approvals ? out.style(String(b.pending_approvals), "yellow") : "0"],
        ["Max per card", out.money(b.max_per_card_cents)],
        ["Approval required", b.approval_required ? "yes" : "no"],
        ["Setup complete", b.setup_complete ? out.style("yes", "green") : out.style("no", "red")],
        // Spent beyond cards' holds and refused by the payment method: the operator follows it up.
        ["Uncollected", b.uncollected_cents ? out.style(out.money(b.uncollected_cents), "red") : out.money(0)],
      ]);
    });

  const policy = program.command("policy").description("Read or change the default spending policy");
  policy
    .command("get")
    .description("Show the default policy")
    .action(async (_o: unknown, cmd: Command) => {
      const ctx = ctxOf(cmd);
      const p: any = await ctx.out.spin("Fetching the policy", () => ctx.client().policies.retrieveDefault());
      if (ctx.out.json) return ctx.out.printJson(p);
      printPolicy(ctx, p);
    });
  policy
    .command("set")
    .description("Change the default policy (needs a full key)")
    .option("--approval-required", "new cards need a human approval")
    .option("--no-approval-required", "new cards are issued without approval")
    // The spelling of `cards create` and `policy check`, accepted here too.
    .addOption(new Option("--require-approval").hideHelp())
    .addOption(new Option("--no-require-approval").hideHelp())
    .option("--max <dollars>", "maximum per card, 0.01..500.00")
    .action(async (o: { approvalRequired?: boolean; requireApproval?: boolean; max?: string }, cmd: Command) => {
      const ctx = ctxOf(cmd);
      const body: Record<string, unknown> = {};
      const required = o.approvalRequired ?? o.requireApproval;
      if (required !== undefined) body.approval_required = required;
      if (o.max !== undefined) body.max_amount_cents = parseAmount(o.max, "--max");
      if (o.max !== undefined) ctx.dollarFlags.max_amount_cents = { flag: "--max", input: o.max };
      if (Object.keys(body).length === 0) throw new UsageError("Nothing to change: give --approval-required, --no-approval-required or --max.");
      const p: any = await ctx.out.spin("Updating the policy", () => ctx.client().policies.updateDefault(body as any));
      if (ctx.out.json) return ctx.out.printJson(p);
      ctx.out.line(`${ctx.out.style("✓", "green")} Default policy updated.`);
      printPolicy(ctx, p);
    });

  policy
    .command("check")
    .description("Dry run of `cards create`: would a card be issued, need approval, or be denied? (exit 0 issue/approval, 1 denied)")
    .option("--amount <dollars>", "amount in dollars, e.g. 12.50")
    .option("--amount-cents <cents>", "amount in cents, e.g. 1250")
    .option("--agent <id>", "agent id, as on `cards create`")
    .option("--require-approval", "ask for a human approval even if the default policy does not")
    .option("--max <dollars>", "tighten the per-card maximum for this request, e.g. 20.00")
    .addHelpText(
      "after",
      "\nNothing is created: no card, approval or hold. Exit code 0 when the card would be issued or would\n" +
        "wait for approval, 1 when it would be denied (or on an API error), 2 on bad flags.\n\n" +
        "Examples:\n  cardctl policy check --amount 12.50\n  cardctl policy check --amount 12.50 --agent shopper --require-approval --json",
    )
    .action(async (o: Record<string, any>, cmd: Command) => {
      const ctx = ctxOf(cmd);
      const { out } = ctx;
      const params = cardRequestParams(ctx, o);
      const amount_cents = params.amount_cents as number;

      const res: any = await out.spin("Checking the policy", () => (ctx.client().policies.check as any)(params));
      if (res.decision === "denied") process.exitCode = 1;
      if (out.json) return out.printJson(res);
      const amount = formatMoney(amount_cents);
      if (res.decision === "issue") out.line(`${out.style("✓", "green")} A card for ${amount} would be issued now.`);
      else if (res.decision === "approval_required") out.line(`${out.style("!", "yellow")} A card for ${amount} would wait for a human's approval.`);
      else out.line(`${out.style("✗", "red")} A card for ${amount} would be denied.`);
      out.kv([
        ["Decision", out.style(res.decision, res.decision === "issue" ? "green" : res.decision === "denied" ? "red" : "yellow")],
        ["Approval required", res.effective_policy.approval_required ? out.style("yes", "yellow") : "no"],
        ["Max per card", out.money(res.effective_policy.max_amount_cents)],
      ]);
      if (res.reasons.length === 0) return;
      out.line("Reasons:");
      for (const r of res.reasons) {
        out.line(`  - ${r.code}: ${reasonText(r)}`);
        if (r.code === "setup_required") for (const h of hints(r.code, r.details)) out.line(`    ${h}`);
      }
    });

  const approvals = program.command("approvals").description("Review agents' card requests that need a human");
  approvals
    .command("list")
    .description("List approval requests (default: pending)")
    .option("--status <status>", `${APPROVAL_STATUSES.join(", ")}`, "PENDING")
    .option("--limit <n>", "page size, 1..100 (default 20)")
    .option("--all", "follow every page")
    .action(async (o: { status: string; limit?: string; all?: boolean }, cmd: Command) => {
      const ctx = ctxOf(cmd);
      const status = o.status.toUpperCase();
      if (!APPROVAL_STATUSES.includes(status)) throw new UsageError(`--status must be one of ${APPROVAL_STATUSES.join(", ")}.`);
      const params = { status, ...(o.limit !== undefined ? { limit: parseLimit(o.limit) } : {}) };
      const client = ctx.client();
      const page = await fetchList(ctx.out, "approvals", o, () => client.approvals.list(params as any));
      if (ctx.out.json) return ctx.out.printJson(page);
      ctx.out.table(APPROVAL_HEADERS, approvalRows(ctx, page.data), `No ${status.toLowerCase()} approvals.`, { shrink: ["PURPOSE", "AGENT"], drop: ["CREATED", "AGENT"] });
      if (page.has_more) ctx.out.hint("More approvals exist: use --all or a larger --limit.");
    });
  approvals
    .command("get")
    .argument("<id>", "approval id (appr_…)")
    .description("Show one approval request: what was asked, its status, and its card or reason")
    .action(async (id: string, _o: unknown, cmd: Command) => {
      const ctx = ctxOf(cmd);
      const { out } = ctx;
      const a: any = await ctx.client().approvals.retrieve(id);
      if (out.json) return out.printJson(a);
      const when = (iso: string) => `${relativeTime(iso)} ${out.style(`(${iso})`, "dim")}`;
      out.kv([
        ["ID", a.id],
        ["Status", out.status(a.status)],
        ["Amount", out.money(a.amount_cents)],
        ["Agent", a.agent_id ?? "-"],
        ["Purpose", a.purpose ?? "-"],
        ["Created", when(a.created_at)],
        ["Expires", when(a.expires_at)],
        ...(a.card_id ? ([["Card", a.card_id]] as Array<[string, string]>) : []),
        ...(a.reason ? ([["Reason", a.reason]] as Array<[string, string]>) : []),
      ]);
    });
  approvals
    .command("approve")
    .argument("<id>", "approval id (appr_…)")
    .description("Approve a pending request: the card is issued now")
    .action(async (id: string, _o: unknown, cmd: Command) => {
      const ctx = ctxOf(cmd);
      const card: any = await ctx.out.spin("Approving and issuing the card", () => ctx.client().approvals.approve(id));
      if (ctx.out.json) return ctx.out.printJson(card);
      ctx.out.line(`${ctx.out.style("✓", "green")} Approved ${id}. Card issued.`);
      printCard(ctx, card);
    });
  approvals
    .command("reject")
    .argument("<id>", "approval id (appr_…)")
    .option("--reason <text>", "why (recorded on the approval)")
    .description("Reject a pending request")
    .action(async (id: string, o: { reason?: string }, cmd: Command) => {
      const ctx = ctxOf(cmd);
      const res: any = await ctx.out.spin("Rejecting", () =>
        (ctx.client().approvals.reject as any)(id, o.reason !== undefined ? { reason: o.reason } : {}),
      );
      if (ctx.out.json) return ctx.out.printJson(res);
      ctx.out.line(`${ctx.out.style("✓", "green")} Rejected ${id}.`);
    });

  const test = program.command("test").description("Test-mode helpers (sk_test_ keys only)");
  test
    .command("purchase")
    .argument("<card>", "card id (card_…)")
    .requiredOption("--amount <dollars>", "purchase amount, e.g. 4.00")
    .option("--merchant <name>", "merchant name")
    .description("Simulate a purchase on a card (the first purchase makes a single-use card USED)")
    .action(async (cardId: string, o: { amount: string; merchant?: string }, cmd: Command) => {
      const ctx = ctxOf(cmd);
      const amount_cents = parseAmount(o.amount);
      ctx.dollarFlags.amount_cents = { flag: "--amount", input: o.amount };
      const body: Record<string, unknown> = { amount_cents };
      if (o.merchant !== undefined) body.merchant = o.merchant;
      const res: any = await ctx.out.spin("Simulating a purchase", () => ctx.client().testHelpers.purchase(cardId, body as any));
      if (!res.approved) process.exitCode = 1;
      if (ctx.out.json) return ctx.out.printJson(res);
      const { out } = ctx;
      if (res.approved) out.line(`${out.style("✓", "green")} Purchase of ${out.money(res.amount_cents)} approved.`);
      else out.line(`${out.style("✗", "red")} Purchase of ${out.money(res.amount_cents)} declined: ${res.decline_reason ?? "unknown reason"}.`);
      printCard(ctx, res.card);
    });
}

/** A policy check's reason in words, amounts in dollars. */
function reasonText(r: { code: string; message: string; details: Record<string, any> }): string {
  switch (r.code) {
    case "amount_over_max":
      return `${formatMoney(r.details.requested)} is over the maximum of ${formatMoney(r.details.max_amount_cents)} per card.`;
    case "approval_required":
      return r.details.source === "policy_override"
        ? "this request asks for a human's approval (--require-approval)."
        : "the default policy requires a human's approval for new cards.";
    case "setup_required":
      return `account setup is incomplete (${(r.details.missing ?? []).join(", ")} missing).`;
    default:
      return r.message;
  }
}
