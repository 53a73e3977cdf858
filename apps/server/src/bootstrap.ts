import { isUniqueViolation, randomToken, sha256, type Services } from "@cardctl/api";
import type { DataSource } from "typeorm";

export interface Bootstrap {
  adminTokenHash: string;
  /** Secrets made by this start, to print once; empty on every later start. */
  created: { adminToken?: string; demoAccountId?: string; demoApiKey?: string };
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
 * First start: an admin token (unless ADMIN_TOKEN is set) and a demo account whose setup is
 * complete in test mode, with one test API key. Only hashes are stored; secrets are returned once.
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
    const { secret } = await services.accounts.createKey(account.id, "test", "full", "demo");
    created.demoAccountId = account.id;
    created.demoApiKey = secret;
  }
  return { adminTokenHash, created };
}
