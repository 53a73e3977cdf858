import type { Command } from "commander";
import { readConfig, writeConfig } from "../config.js";
import { ctxOf, type Ctx } from "../context.js";
import { UsageError } from "../errors.js";
import { relativeTime } from "../output.js";

/** "1 Main Street, Suite 2, Springfield, IL 62701, US" */
function formatAddress(b: any): string {
  const cityLine = [b.city, [b.state, b.postal_code].filter(Boolean).join(" ")].filter(Boolean).join(", ");
  return [b.line1, b.line2, cityLine, b.country].filter(Boolean).join(", ");
}

function printAccount(ctx: Ctx, a: any): void {
  const { out } = ctx;
  const c = a.cardholder;
  out.kv([
    ["ID", a.id],
    ["Name", a.name],
    ["KYB verified", a.kyb_verified ? out.style("yes", "green") : out.style("no", "yellow")],
    ["Payment method", a.payment_method ?? out.style("none", "yellow")],
    ["Cardholder", c ? `${c.name} (${c.type})` : out.style("none (needed before Stripe issues cards)", "yellow")],
    ...(c
      ? ([
          ["  Billing address", formatAddress(c.billing)],
          ["  Email", c.email ?? "-"],
          ["  Phone", c.phone_number ?? "-"],
          ...(c.type === "company" ? [["  Tax id", c.tax_id_last4 ? `••••${c.tax_id_last4}` : "-"]] : []),
        ] as Array<[string, string]>)
      : []),
    ["Created", relativeTime(a.created_at)],
  ]);
}

/** The cardholder's fields, as `accounts set-cardholder` takes them. */
const CARDHOLDER_FLAGS: Record<string, string> = {
  name: "--name",
  "billing.line1": "--line1",
  "billing.line2": "--line2",
  "billing.city": "--city",
  "billing.state": "--state",
  "billing.postal_code": "--postal-code",
  "billing.country": "--country",
  email: "--email",
  phone_number: "--phone",
  tax_id: "--tax-id",
};

const OPERATOR_HELP =
  "\nOperator commands call the operator API (/admin/v1) with the admin token: --admin-token or CARDCTL_ADMIN_TOKEN.";

export function registerOperator(program: Command): void {
  const accounts = program.command("accounts").description("Operator: create and set up accounts").addHelpText("after", OPERATOR_HELP);
  accounts
    .command("create")
    .requiredOption("--name <name>", "account name")
    .description("Create an account")
    .action(async (o: { name: string }, cmd: Command) => {
      const ctx = ctxOf(cmd);
      const a = await ctx.out.spin("Creating the account", () => ctx.admin("POST", "/accounts", { name: o.name }));
      if (ctx.out.json) return ctx.out.printJson(a);
      ctx.out.line(`${ctx.out.style("✓", "green")} Account created.`);
      printAccount(ctx, a);
    });
  accounts
    .command("get")
    .argument("<id>", "account id (acct_…)")
    .description("Show an account")
    .action(async (id: string, _o: unknown, cmd: Command) => {
      const ctx = ctxOf(cmd);
      const a = await ctx.out.spin("Fetching the account", () => ctx.admin("GET", `/accounts/${encodeURIComponent(id)}`));
      if (ctx.out.json) return ctx.out.printJson(a);
      printAccount(ctx, a);
    });
  accounts
    .command("invite")
    .argument("<id>", "account id (acct_…)")
    .requiredOption("--email <email>", "the owner's email")
    .description("Invite an owner to the dashboard: a one-time link (24 h) to set a password and sign in")
    .action(async (id: string, o: { email: string }, cmd: Command) => {
      const ctx = ctxOf(cmd);
      const invite = await ctx.out.spin("Inviting the owner", () =>
        ctx.admin("POST", `/accounts/${encodeURIComponent(id)}/owners`, { email: o.email }),
      );
      if (ctx.out.json) return ctx.out.printJson(invite);
      ctx.out.line(`${ctx.out.style("✓", "green")} Invited ${invite.email} to own ${invite.account_id}.`);
      ctx.out.kv([
        ["Invite link", invite.invite_url],
        ["Expires", `${relativeTime(invite.invite_expires_at)} (${invite.invite_expires_at})`],
      ]);
      ctx.out.hint("Send the link to the owner privately: it works once, for whoever opens it first.");
    });
  accounts
    .command("verify-kyb")
    .argument("<id>", "account id (acct_…)")
    .option("--unverified", "record that verification is NOT done (undo)")
    .description("Record business verification (kyb)")
    .action(async (id: string, o: { unverified?: boolean }, cmd: Command) => {
      const ctx = ctxOf(cmd);
      const a = await ctx.out.spin("Recording verification", () =>
        ctx.admin("POST", `/accounts/${encodeURIComponent(id)}/kyb`, { verified: !o.unverified }),
      );
      if (ctx.out.json) return ctx.out.printJson(a);
      printAccount(ctx, a);
    });
  accounts
    .command("set-payment-method")
    .argument("<id>", "account id (acct_…)")
    .argument("[payment_method]", "pm_… id")
    .option("--remove", "remove the saved payment method")
    .description("Save (or remove) the account's payment method")
    .action(async (id: string, pm: string | undefined, o: { remove?: boolean }, cmd: Command) => {
      const ctx = ctxOf(cmd);
      if (!pm && !o.remove) throw new UsageError("Give a payment method (pm_…) or --remove.");
      if (pm && o.remove) throw new UsageError("Give either a payment method or --remove, not both.");
      const a = await ctx.out.spin("Saving the payment method", () =>
        ctx.admin("POST", `/accounts/${encodeURIComponent(id)}/payment_method`, { payment_method: o.remove ? null : pm }),
      );
      if (ctx.out.json) return ctx.out.printJson(a);
      printAccount(ctx, a);
    });

  accounts
    .command("set-cardholder")
    .argument("<id>", "account id (acct_…)")
    .requiredOption("--type <type>", "company or individual")
    .requiredOption("--name <name>", "printed on cards: at most 24 letters (an individual's is \"First Last\")")
    .requiredOption("--line1 <line1>", "billing address, first line")
    .option("--line2 <line2>", "billing address, second line")
    .requiredOption("--city <city>", "billing address city")
    .option("--state <state>", "state, county or region (e.g. CA)")
    .requiredOption("--postal-code <code>", "postal or ZIP code")
    .requiredOption("--country <code>", "ISO 3166-1 alpha-2 country code, e.g. US")
    .option("--email <email>", "the cardholder's email")
    .option("--phone <number>", "the cardholder's phone number, e.g. +14155550123")
    .option("--tax-id <id>", "companies: the business id number (only its last 4 are shown again)")
    .description("Set who the account's cards are issued to (the Stripe cardholder; needed before Stripe issues cards)")
    .action(
      async (
        id: string,
        o: {
          type: string;
          name: string;
          line1: string;
          line2?: string;
          city: string;
          state?: string;
          postalCode: string;
          country: string;
          email?: string;
          phone?: string;
          taxId?: string;
        },
        cmd: Command,
      ) => {
        const ctx = ctxOf(cmd);
        // The API's complaints name the flags typed (--postal-code), not its fields (billing.postal_code).
        Object.assign(ctx.flagNames, CARDHOLDER_FLAGS);
        if (!["company", "individual"].includes(o.type)) throw new UsageError("--type must be company or individual.");
        if (o.taxId !== undefined && o.type !== "company") throw new UsageError("--tax-id is for company cardholders only.");
        const body: Record<string, unknown> = {
          type: o.type,
          name: o.name,
          billing: {
            line1: o.line1,
            ...(o.line2 !== undefined ? { line2: o.line2 } : {}),
            city: o.city,
            ...(o.state !== undefined ? { state: o.state } : {}),
            postal_code: o.postalCode,
            country: o.country.toUpperCase(),
          },
          ...(o.email !== undefined ? { email: o.email } : {}),
          ...(o.phone !== undefined ? { phone_number: o.phone } : {}),
          ...(o.taxId !== undefined ? { tax_id: o.taxId } : {}),
        };
        const a = await ctx.out.spin("Saving the cardholder", () => ctx.admin("POST", `/accounts/${encodeURIComponent(id)}/cardholder`, body));
        if (ctx.out.json) return ctx.out.printJson(a);
        ctx.out.line(`${ctx.out.style("✓", "green")} Cardholder saved. On Stripe, the next card is issued to it.`);
        printAccount(ctx, a);
      },
    );

  const keys = program.command("keys").description("Operator: create, list and revoke API keys").addHelpText("after", OPERATOR_HELP);
  keys
    .command("create")
    .requiredOption("--account <id>", "account id (acct_…)")
    .option("--mode <mode>", "test or live", "test")
    .option("--role <role>", "full or agent", "full")
    .option("--name <name>", "a label for the key")
    .option("--save-profile <profile>", "also store the new key (and account) as this profile")
    .description("Create an API key; the secret is shown this once")
    .action(async (o: { account: string; mode: string; role: string; name?: string; saveProfile?: string }, cmd: Command) => {
      const ctx = ctxOf(cmd);
      if (!["test", "live"].includes(o.mode)) throw new UsageError("--mode must be test or live.");
      if (!["full", "agent"].includes(o.role)) throw new UsageError("--role must be full or agent.");
      const body: Record<string, unknown> = { mode: o.mode, role: o.role };
      if (o.name !== undefined) body.name = o.name;
      const k: any = await ctx.out.spin("Creating the key", () => ctx.admin("POST", `/accounts/${encodeURIComponent(o.account)}/keys`, body));
      if (o.saveProfile) {
        const config = readConfig();
        config.profiles[o.saveProfile] = { api_key: k.secret, base_url: ctx.resolved.baseUrl, account_id: o.account };
        writeConfig(config);
      }
      if (ctx.out.json) return ctx.out.printJson(k);
      const { out } = ctx;
      out.line(`${out.style("✓", "green")} Key created. Copy the secret now: it is not shown again.`);
      out.kv([
        ["ID", k.id],
        ["Secret", out.style(k.secret, "bold")],
        ["Mode", k.mode],
        ["Role", k.role],
        ["Name", k.name ?? "-"],
      ]);
      if (o.saveProfile) out.hint(`Saved as profile ${o.saveProfile}.`);
    });
  keys
    .command("list")
    .requiredOption("--account <id>", "account id (acct_…)")
    .description("List an account's keys (no secrets)")
    .action(async (o: { account: string }, cmd: Command) => {
      const ctx = ctxOf(cmd);
      const res: any = await ctx.out.spin("Fetching keys", () => ctx.admin("GET", `/accounts/${encodeURIComponent(o.account)}/keys`));
      if (ctx.out.json) return ctx.out.printJson(res);
      const { out } = ctx;
      out.table(
        ["ID", "KEY", "MODE", "ROLE", "NAME", "CREATED", "REVOKED"],
        res.data.map((k: any) => [
          k.id,
          `${k.prefix}…${k.last4}`,
          k.mode,
          k.role,
          k.name ?? "-",
          relativeTime(k.created_at),
          k.revoked_at ? out.style(relativeTime(k.revoked_at), "red") : "-",
        ]),
        "No keys.",
      );
    });
  keys
    .command("revoke")
    .argument("<key_id>", "key id (key_…)")
    .description("Revoke a key, effective immediately")
    .action(async (id: string, _o: unknown, cmd: Command) => {
      const ctx = ctxOf(cmd);
      const res: any = await ctx.out.spin("Revoking", () => ctx.admin("POST", `/keys/${encodeURIComponent(id)}/revoke`));
      if (ctx.out.json) return ctx.out.printJson(res);
      ctx.out.line(`${ctx.out.style("✓", "green")} Key ${id} revoked.`);
    });

  const attention = program
    .command("attention")
    .description("Operator: cards whose processor follow-up (revoke, hold release) kept failing")
    .addHelpText("after", OPERATOR_HELP);
  attention
    .command("list")
    .option("--account <id>", "only this account's cards (acct_…)")
    .description("List the cards the recovery pass gave up on, newest first (at most 100)")
    .action(async (o: { account?: string }, cmd: Command) => {
      const ctx = ctxOf(cmd);
      const query = o.account === undefined ? "" : `?account_id=${encodeURIComponent(o.account)}`;
      const res: any = await ctx.out.spin("Fetching cards", () => ctx.admin("GET", `/cards/attention${query}`));
      if (ctx.out.json) return ctx.out.printJson(res);
      const { out } = ctx;
      out.table(
        ["ID", "ACCOUNT", "MODE", "STATUS", "HOLD", "ATTEMPTS", "LAST ERROR", "CREATED"],
        res.data.map((c: any) => [
          c.id,
          c.account_id,
          c.mode,
          out.status(c.status),
          c.hold_status,
          String(c.recovery_attempts),
          c.recovery_error ?? "-",
          relativeTime(c.created_at),
        ]),
        "No cards need attention.",
        { shrink: ["LAST ERROR"], drop: ["MODE", "HOLD", "CREATED", "ACCOUNT"] },
      );
      if (res.data.length > 0) out.hint("Once the cause is fixed: cardctl attention retry <card_id> (the full errors: --json).");
    });
  attention
    .command("retry")
    .argument("<card_id>", "card id (card_…)")
    .description("Hand a card that needs attention back to the recovery pass, due at its next run")
    .action(async (id: string, _o: unknown, cmd: Command) => {
      const ctx = ctxOf(cmd);
      const res: any = await ctx.out.spin("Handing the card back", () => ctx.admin("POST", `/cards/${encodeURIComponent(id)}/retry_recovery`));
      if (ctx.out.json) return ctx.out.printJson(res);
      ctx.out.line(`${ctx.out.style("✓", "green")} Card ${id} is back in the recovery queue: the next maintenance pass tries it again.`);
    });
}
