import type { Services } from "@cardctl/api";
import type { FastifyInstance } from "fastify";

/** One set-up item, named as in a 403 setup_required's `details.missing`. */
interface SetupStep {
  id: "kyb" | "payment_method" | "cardholder";
  title: string;
  what: string;
  /** Whether card creation needs it in each mode, with this server's processors. */
  required: { test: boolean; live: boolean };
  api: { method: "POST"; path: string; body: Record<string, unknown> };
  cli: string;
}

const CARDHOLDER_BODY = {
  type: "company",
  name: "Acme Robotics",
  billing: { line1: "1 Main Street", city: "San Francisco", state: "CA", postal_code: "94103", country: "US" },
};

function steps(services: Services): SetupStep[] {
  const cardholder = { test: services.accounts.setupNeeds("test").cardholder, live: services.accounts.setupNeeds("live").cardholder };
  return [
    {
      id: "kyb",
      title: "Business verification (KYB)",
      what: "The operator records that the account's business has been verified.",
      required: { test: true, live: true },
      api: { method: "POST", path: "/admin/v1/accounts/{id}/kyb", body: { verified: true } },
      cli: "cardctl accounts verify-kyb ACCOUNT_ID",
    },
    {
      id: "payment_method",
      title: "Payment method saved",
      what: "The account's payment method (a pm_… id), on which authorization holds are placed for each card.",
      required: { test: true, live: true },
      api: { method: "POST", path: "/admin/v1/accounts/{id}/payment_method", body: { payment_method: "pm_card_visa" } },
      cli: "cardctl accounts set-payment-method ACCOUNT_ID pm_card_visa",
    },
    {
      id: "cardholder",
      title: "Cardholder on Stripe",
      what:
        "Who the cards are issued to (a company or an individual, with a billing address); cardctl creates the Stripe Issuing cardholder from it. " +
        "Needed where Stripe issues the cards (PROCESSOR=stripe). A cardholder Stripe has disabled, or that misses requirements, is completed in the Stripe Dashboard or by setting its details again.",
      required: cardholder,
      api: { method: "POST", path: "/admin/v1/accounts/{id}/cardholder", body: CARDHOLDER_BODY },
      cli: 'cardctl accounts set-cardholder ACCOUNT_ID --type company --name "Acme Robotics" --line1 "1 Main Street" --city "San Francisco" --state CA --postal-code 94103 --country US',
    },
  ];
}

const escape = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

function html(publicUrl: string, list: SetupStep[]): string {
  const needed = (r: SetupStep["required"]) =>
    r.test && r.live ? "needed in test and live mode" : r.test ? "needed in test mode" : r.live ? "needed in live mode" : "not needed with this server's processors";
  const items = list
    .map(
      (s) => `<li id="${s.id}"><h2>${escape(s.title)} <small>(<code>${s.id}</code>, ${needed(s.required)})</small></h2>
<p>${escape(s.what)}</p>
<pre>cardctl --base-url ${escape(publicUrl)} ${escape(s.cli.replace(/^cardctl /, ""))}</pre>
<pre>curl -X ${s.api.method} ${escape(publicUrl)}${escape(s.api.path.replace("{id}", "ACCOUNT_ID"))} \\
  -H "Authorization: Bearer $ADMIN_TOKEN" -H "Content-Type: application/json" \\
  -d '${escape(JSON.stringify(s.api.body))}'</pre></li>`,
    )
    .join("\n");
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>cardctl: finish account setup</title>
<style>body{font-family:system-ui,sans-serif;max-width:46em;margin:2em auto;padding:0 1em;line-height:1.45}pre{background:#f4f4f4;padding:.6em;overflow-x:auto}h2{font-size:1.15em}small{font-weight:normal;color:#555}</style>
</head><body>
<h1>Finish account setup</h1>
<p>An API call answered <code>403 setup_required</code>: the account is not set up yet. Its <code>details.missing</code> names the
steps left, from the list below. Cards can be created once they are done.</p>
<p><strong>Who does this:</strong> the operator of this cardctl server (the person holding its admin token), through the
operator API (<code>/admin/v1</code>) or the <code>cardctl</code> command-line tool (<code>--admin-token</code> or
<code>CARDCTL_ADMIN_TOKEN</code>). If that is not you, send them the account's id (<code>acct_…</code>) and this page.</p>
<ol>
${items}
</ol>
<h2>Check</h2>
<p><code>cardctl accounts get ACCOUNT_ID</code> or <code>GET /admin/v1/accounts/ACCOUNT_ID</code> shows each item;
with the account's API key, <code>GET /v1/balance</code> answers <code>"setup_complete": true</code> once nothing is missing.</p>
<p>This page as JSON: <code>curl -H "Accept: application/json" ${escape(publicUrl)}/setup</code>. API reference: <a href="/docs">/docs</a>.</p>
</body></html>`;
}

/**
 * GET /setup, where every 403 setup_required's `setup_url` points: what the account still needs
 * and how the operator does it. HTML for a browser; JSON for `Accept: application/json`.
 */
export function registerSetup(app: FastifyInstance, services: Services, publicUrl: string) {
  app.get("/setup", { config: { rateLimit: false } }, async (req, reply) => {
    const list = steps(services);
    const accept = req.headers.accept ?? "";
    reply.header("Vary", "Accept");
    if (/application\/json/.test(accept) && !/text\/html/.test(accept)) {
      return reply.type("application/json").send({
        title: "Finish account setup",
        who: "The operator of this cardctl server, with its admin token: operator API (/admin/v1) or the cardctl CLI (--admin-token or CARDCTL_ADMIN_TOKEN).",
        steps: list.map((s) => ({
          ...s,
          api: { ...s.api, url: `${publicUrl}${s.api.path}`, auth: "Authorization: Bearer <admin token>" },
        })),
        check: {
          operator: { method: "GET", path: "/admin/v1/accounts/{id}", cli: "cardctl accounts get ACCOUNT_ID" },
          api_key: { method: "GET", path: "/v1/balance", field: "setup_complete" },
        },
      });
    }
    return reply.type("text/html; charset=utf-8").send(html(publicUrl, list));
  });
}
