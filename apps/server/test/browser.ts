import { existsSync, mkdirSync } from "node:fs";
import { createServer } from "node:net";
import { resolve } from "node:path";
import { chromium, type Browser, type BrowserContext, type Locator, type Page } from "playwright-core";
import { expect } from "vitest";
import { startServer, type TestServer } from "./harness.js";

/**
 * What the dashboard's browser tests share: Debian's chromium driven by playwright-core, a server on
 * a port known before it starts (PUBLIC_URL names it, as the session cookie's Origin check needs),
 * an owner signed in through an invite, and screenshots at 1280 and 375 px saved to
 * <repo>/.test-results/screenshots (CI keeps them as artifacts).
 */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
export const haveChromium = existsSync(CHROMIUM);
if (!haveChromium) console.warn(`dashboard browser tests skipped: no chromium at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)`);
const SCREENSHOTS = resolve(import.meta.dirname, "../../../.test-results/screenshots");
export const PASSWORD = "correct horse battery";

/** The dashboard's Content-Security-Policy: only this server; with Stripe, also what Stripe.js needs. */
export const BASE_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";
export const STRIPE_CSP =
  "default-src 'self'; script-src 'self' https://js.stripe.com https://*.js.stripe.com; style-src 'self'; img-src 'self' data:; " +
  "connect-src 'self' https://api.stripe.com; frame-src https://js.stripe.com https://*.js.stripe.com https://hooks.stripe.com; " +
  "frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/** A port free right now, so PUBLIC_URL can name the server's own address before it starts. */
const freePort = () =>
  new Promise<number>((done, fail) => {
    const probe = createServer().listen(0, "127.0.0.1", () => {
      const port = (probe.address() as { port: number }).port;
      probe.close(() => done(port));
    });
    probe.on("error", fail);
  });

/** A server whose PUBLIC_URL is its own address. */
export async function ownServer(env: Record<string, string> = {}) {
  const port = await freePort();
  return startServer({ PORT: String(port), PUBLIC_URL: `http://127.0.0.1:${port}`, ...env });
}

export interface Dashboard {
  browser: Browser;
  context: BrowserContext;
  page: Page;
  /** Console errors and uncaught exceptions of the page (CSP refusals among them); expected empty. */
  problems: string[];
  /** Screenshots of the current page at desktop and phone widths; the phone one must not scroll sideways. */
  shoot(name: string): Promise<void>;
  /** Opens an invite for `email` on the account, sets the password and waits for the approvals inbox. */
  signInByInvite(accountId: string, email: string): Promise<void>;
  close(): Promise<void>;
}

/** A browser with one page on the server `s`. */
export async function openDashboard(s: TestServer): Promise<Dashboard> {
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: s.url });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on("console", (msg) => {
    if (msg.type() === "error" && !/status of 40[134]/.test(msg.text())) problems.push(msg.text());
  });
  page.on("pageerror", (err) => problems.push(err.message));
  return {
    browser,
    context,
    page,
    problems,
    async shoot(name) {
      mkdirSync(SCREENSHOTS, { recursive: true });
      for (const width of [1280, 375]) {
        await page.setViewportSize({ width, height: 800 });
        await page.screenshot({ path: resolve(SCREENSHOTS, `${name}-${width}.png`), fullPage: true });
        expect(await page.evaluate(() => document.documentElement.scrollWidth), `${name} at ${width}px`).toBeLessThanOrEqual(width);
      }
      await page.setViewportSize({ width: 1280, height: 800 });
    },
    async signInByInvite(accountId, email) {
      const { invite_url } = (await s.admin("POST", `/accounts/${accountId}/owners`, { email })).body;
      await page.goto(invite_url);
      await page.getByLabel("New password").fill(PASSWORD);
      await page.getByLabel("Repeat password").fill(PASSWORD);
      await page.getByRole("button", { name: "Set password" }).click();
      await page.getByRole("heading", { name: "Approvals" }).waitFor();
    },
    close: () => browser.close(),
  };
}

/** Fails if `value` is kept in the page's browser storage: localStorage, sessionStorage or a readable cookie. */
export async function expectNotStored(page: Page, value: string) {
  const stored = await page.evaluate(() => JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }) + document.cookie);
  expect(stored).not.toContain(value);
}

/**
 * A secret just shown once (ui.tsx SecretOnce): Copy puts it on the clipboard (then the screenshot
 * `name`); it is kept in no browser storage, and gone from the page once Done is clicked and after a
 * reload, once `reloaded` (what the page shows when it is back) is there.
 */
export async function expectSecretOnce(d: Dashboard, secret: string, name: string, reloaded: Locator) {
  const { page } = d;
  await page.getByRole("button", { name: "Copy" }).click();
  await page.getByText("Copied to the clipboard.").waitFor();
  expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(secret);
  await d.shoot(name);
  await expectNotStored(page, secret);
  await page.getByRole("button", { name: "Done" }).click();
  expect(await page.content()).not.toContain(secret);
  await page.reload();
  await reloaded.waitFor();
  expect(await page.content()).not.toContain(secret);
}
