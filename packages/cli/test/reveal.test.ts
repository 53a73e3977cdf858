import { mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServer, type TestServer } from "../../../apps/server/test/harness.js";
import { run, tempConfigDir } from "./helpers.js";

let s: TestServer;
let env: Record<string, string>;
const cli = (args: string[], extra: Record<string, string | undefined> = {}) => run(args, { env: { ...env, ...extra } });

/** The processor's own record of a card's number and CVC (simulated processor, or the fake Stripe). */
async function atProcessor(cardId: string): Promise<{ number: string; cvc: string }> {
  const [row] = await s.query("SELECT processor_card_id FROM cards WHERE id = ?", [cardId]);
  if (s.fake) return s.fake.cardSecrets.get(row.processor_card_id)!;
  const [card] = await s.query("SELECT number, cvc FROM sim_cards WHERE id = ?", [row.processor_card_id]);
  return { number: String(card.number), cvc: String(card.cvc) };
}

beforeAll(async () => {
  s = await startServer();
  env = { CARDCTL_BASE_URL: s.url, CARDCTL_API_KEY: s.apiKey, CARDCTL_CONFIG_DIR: tempConfigDir() };
});
afterAll(async () => {
  await s?.close();
});

describe("cards reveal", () => {
  let cardId: string;
  let lastFour: string;
  let secret: { number: string; cvc: string };

  beforeAll(async () => {
    const r = await cli(["cards", "create", "--amount", "5", "--json"]);
    expect(r.code).toBe(0);
    ({ id: cardId, last_four: lastFour } = r.json());
    secret = await atProcessor(cardId);
    expect(secret.number.endsWith(lastFour)).toBe(true);
  });

  it("is masked by default: •••• •••• •••• last four, CVC •••", async () => {
    const r = await cli(["cards", "reveal", cardId]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`ID\\s+${cardId}`));
    expect(r.stdout).toMatch(new RegExp(`Number\\s+•••• •••• •••• ${lastFour}`));
    expect(r.stdout).toMatch(/CVC\s+•••/);
    expect(r.stdout).toMatch(/Expires\s+\d{2}\/\d{4}/);
    expect(r.stdout + r.stderr).not.toContain(secret.number);
    expect(r.stdout).not.toContain(secret.number.slice(0, 12));
    expect(r.stderr).toContain("--show");
  });

  it("--show prints the number (in groups of four) and the CVC", async () => {
    const r = await cli(["cards", "reveal", cardId, "--show"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`Number\\s+${secret.number.replace(/(\d{4})(?=\d)/g, "$1 ")}`));
    expect(r.stdout).toMatch(new RegExp(`CVC\\s+${secret.cvc}`));
  });

  it("--json is masked too unless --show", async () => {
    const masked = await cli(["cards", "reveal", cardId, "--json"]);
    expect(masked.code).toBe(0);
    expect(masked.json()).toMatchObject({ id: cardId, number: `•••• •••• •••• ${lastFour}`, cvc: "•••", last_four: lastFour, exp_month: expect.any(Number), exp_year: expect.any(Number) });
    expect(masked.stdout).not.toContain(secret.number);
    const shown = await cli(["cards", "reveal", cardId, "--json", "--show"]);
    expect(shown.json()).toMatchObject({ id: cardId, number: secret.number, cvc: secret.cvc, last_four: lastFour });
  });

  it("--output-file writes the JSON with mode 0600 (also over an existing, wider file); stdout stays masked", async () => {
    const dir = mkdtempSync(join(tmpdir(), "cardctl-reveal-"));
    for (const existing of [false, true]) {
      const file = join(dir, existing ? "existing.json" : "card.json");
      if (existing) writeFileSync(file, "old", { mode: 0o644 });
      const r = await cli(["cards", "reveal", cardId, "--output-file", file]);
      expect(r.code).toBe(0);
      expect(r.stdout).not.toContain(secret.number);
      expect(r.stderr).toContain("0600");
      expect(statSync(file).mode & 0o777).toBe(0o600);
      const saved = JSON.parse(readFileSync(file, "utf8"));
      expect(saved).toEqual({ id: cardId, number: secret.number, cvc: secret.cvc, exp_month: expect.any(Number), exp_year: expect.any(Number), last_four: lastFour });
    }
  });

  it("an unknown card: not found, exit code non-zero", async () => {
    const r = await cli(["cards", "reveal", "card_doesnotexist000000000"]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/not.found|No such|not_found/i);
  });
});
