import { isUniqueViolation, randomToken, sha256, type Services } from "@cardctl/api";
import type { DataSource } from "typeorm";

export interface Bootstrap {
  adminTokenHash: string;
  /** Secrets made by this start, to print once; empty on every later start. */
  created: { adminToken?: string; demoAccountId?: string; demoApiKey?: string; demoOwnerInviteUrl?: string };
}

/** Claims a one-time setting; false when another start (or instance) already did. */
async function claim(ds: DataSource, name: string, value: string): Promise<boolean> {
  try {
    await ds.query("INSERT INTO settings (name, value) VALUES (?, ?)", [name, value]);
    return true;
  } catch (err) {
    if (isUniqueViolation(err)) return false;
    throw err;
  }
}

/**
 * The demo account's cardholder where Stripe serves test mode (Stripe issues cards to a cardholder;
 * the simulated processor needs none). Test mode only, stored on the account like any operator's
 * details: GET /admin/v1/accounts/:id shows it, and the operator replaces it at will.
 */
const DEMO_CARDHOLDER = {
  type: "company",
  name: "Cardctl Demo",
  billing: { line1: "510 Townsend Street", city: "San Francisco", state: "CA", postal_code: "94103", country: "US" },
} as const;

const DEMO_OWNER_EMAIL = "owner@demo.example";

/**
 * First start: an admin token (unless ADMIN_TOKEN is set) and a demo account whose setup is
 * complete in test mode, with one test API key and an invite link for its owner (the dashboard).
 * Only hashes are stored; secrets are returned once.
 */
export async function bootstrap(ds: DataSource, services: Services, adminToken: string | undefined): Promise<Bootstrap> {
  const created: Bootstrap["created"] = {};
  let adminTokenHash: string;
  if (adminToken) adminTokenHash = sha256(adminToken);
  else {
    const token = `adm_${randomToken(40)}`;
    if (await claim(ds, "admin_token_sha256", sha256(token))) created.adminToken = token;
    const [row] = await ds.query("SELECT value FROM settings WHERE name = ?", ["admin_token_sha256"]);
    adminTokenHash = row.value;
  }
  if (await claim(ds, "demo_seeded_at", new Date().toISOString())) {
    const account = await services.accounts.create("Demo account");
    await services.accounts.setKyb(account.id, true);
    await services.accounts.setPaymentMethod(account.id, "pm_card_visa");
    if (services.accounts.setupNeeds("test").cardholder) await services.accounts.setCardholder(account.id, DEMO_CARDHOLDER);
    const { secret } = await services.accounts.createKey(account.id, "test", "full", "demo");
    created.demoAccountId = account.id;
    created.demoApiKey = secret;
    // The demo account's owner signs in to the dashboard through a one-time link (24 h).
    created.demoOwnerInviteUrl = (await services.owners.invite(account.id, DEMO_OWNER_EMAIL)).url;
  }
  return { adminTokenHash, created };
}
