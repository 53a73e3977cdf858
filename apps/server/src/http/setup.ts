import type { Services } from "@cardctl/api";
import type { FastifyInstance } from "fastify";
import type { DashboardPage } from "./dashboard.js";

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
      what:
        "The account's payment method (a pm_… id), on which authorization holds are placed for each card. The account's owner can add it on the dashboard's Setup page instead.",
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

/** Whether the client asks for JSON (and not for a page): `Accept: application/json`. */
const wantsJson = (accept: string) => /application\/json/.test(accept) && !/text\/html/.test(accept);

/**
 * GET /setup, where every 403 setup_required's `setup_url` points. A browser gets the dashboard's
 * Setup page (the owner signs in, sees what is missing and adds the payment method); a client
 * asking for JSON (`Accept: application/json`: curl, an agent) gets the steps, with how the
 * operator does each through the operator API and the CLI.
 */
export function registerSetup(app: FastifyInstance, services: Services, publicUrl: string, dashboardPage: DashboardPage) {
  app.get("/setup", { config: { rateLimit: false } }, async (req, reply) => {
    reply.header("Vary", "Accept");
    if (!wantsJson(req.headers.accept ?? "")) return dashboardPage(reply);
    const list = steps(services);
    return reply.type("application/json").send({
      title: "Finish account setup",
      who:
        "The operator of this cardctl server, with its admin token: operator API (/admin/v1) or the cardctl CLI (--admin-token or CARDCTL_ADMIN_TOKEN). " +
        "The account's owner can add the payment method in the dashboard.",
      dashboard: {
        url: `${publicUrl}/setup`,
        what: "Open in a browser: the account's owner signs in and sees what is missing, and adds the payment method (a test card on the simulated processor, Stripe's card form on Stripe).",
      },
      steps: list.map((s) => ({
        ...s,
        api: { ...s.api, url: `${publicUrl}${s.api.path}`, auth: "Authorization: Bearer <admin token>" },
      })),
      check: {
        operator: { method: "GET", path: "/admin/v1/accounts/{id}", cli: "cardctl accounts get ACCOUNT_ID" },
        api_key: { method: "GET", path: "/v1/balance", field: "setup_complete" },
      },
    });
  });
}
