import { expect } from "vitest";
import type { Reply, RequestOptions, TestServer } from "./harness.js";

/** ISO 8601 UTC timestamp as the API writes it. */
export const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,3})?Z$/;

/** A card number anywhere in a response: 13 to 19 digits in a row. */
export const PAN_LIKE = /\d{13,19}/;

/** Asserts that an object has exactly these keys, no more and no fewer. */
export function expectKeys(obj: unknown, keys: string[]) {
  expect(obj, "expected an object").toBeTypeOf("object");
  expect(Object.keys(obj as object).sort()).toEqual([...keys].sort());
}

export const CREATED_CARD_KEYS = [
  "id",
  "status",
  "last_four",
  "expiration",
  "spending_limit_cents",
  "remaining_cents",
  "agent_id",
  "created_at",
  "expires_at",
  "spent_cents",
];
/** Spec 2.1 list item fields, plus remaining_cents (needed to observe USED, DESIGN 3.4). */
export const LIST_CARD_KEYS = ["id", "status", "last_four", "expiration", "amount_cents", "remaining_cents", "agent_id", "purpose", "created_at", "expires_at", "spent_cents"];
export const DETAIL_CARD_KEYS = [...LIST_CARD_KEYS, "closed_at", "processor_card_id", "ephemeral_key_secret", "reveal"];
/** Spec 2.2 plus reason and card_id (DESIGN 3.4). */
export const APPROVAL_KEYS = ["id", "amount_cents", "agent_id", "purpose", "status", "reason", "card_id", "expires_at", "created_at"];
export const BALANCE_KEYS = ["held_cents", "open_cards", "pending_approvals", "max_per_card_cents", "approval_required", "setup_complete", "uncollected_cents"];

/** Asserts the create response (spec 2.1) of a fresh card. */
export function expectCreatedCard(body: any, o: { amount: number; agent_id?: string | null }) {
  expectKeys(body, CREATED_CARD_KEYS);
  expect(body.id).toMatch(/^card_[A-Za-z0-9]+$/);
  expect(body.status).toBe("OPEN");
  expect(body.last_four).toMatch(/^\d{4}$/);
  expect(body.expiration).toMatch(/^(0[1-9]|1[0-2])\/\d{2}$/);
  expect(body.spending_limit_cents).toBe(o.amount);
  expect(body.remaining_cents).toBe(o.amount);
  expect(body.agent_id).toBe(o.agent_id ?? null);
  expect(body.created_at).toMatch(ISO);
  expect(body.expires_at).toMatch(ISO);
  expect(Date.parse(body.expires_at)).toBeGreaterThan(Date.parse(body.created_at));
  expect(body.spent_cents).toBe(0);
  // The expiration is in the future.
  const [mm, yy] = body.expiration.split("/").map(Number);
  expect(new Date(Date.UTC(2000 + yy, mm, 1)).getTime()).toBeGreaterThan(Date.now());
}

export function expectListCard(item: any) {
  expectKeys(item, LIST_CARD_KEYS);
  expect(item.id).toMatch(/^card_/);
  expect(["OPEN", "USED", "CLOSED"]).toContain(item.status);
  expect(item.last_four).toMatch(/^\d{4}$/);
  expect(item.expiration).toMatch(/^\d{2}\/\d{2}$/);
  expect(Number.isInteger(item.amount_cents)).toBe(true);
  expect(Number.isInteger(item.remaining_cents)).toBe(true);
  expect(item.created_at).toMatch(ISO);
}

export function expectApproval(a: any) {
  expectKeys(a, APPROVAL_KEYS);
  expect(a.id).toMatch(/^appr_[A-Za-z0-9]+$/);
  expect(Number.isInteger(a.amount_cents)).toBe(true);
  expect(["PENDING", "APPROVED", "REJECTED", "EXPIRED"]).toContain(a.status);
  expect(a.expires_at).toMatch(ISO);
  expect(a.created_at).toMatch(ISO);
}

/**
 * Wraps a test server so every response of `request` and `admin` is checked: it carries a
 * Request-Id, and its body holds no card number (13-19 digits in a row) anywhere.
 */
export function guarded(s: TestServer): TestServer {
  const check = (r: Reply, what: string) => {
    expect(r.headers.get("request-id"), `Request-Id on ${what}`).toMatch(/^req_[A-Za-z0-9_-]+$/);
    // The OpenAPI document and the docs page are schemas, not data (integer bounds are 2^53-1).
    if (/ \/(v1\/openapi\.json|docs)/.test(what)) return r;
    const text = typeof r.body === "string" ? r.body : JSON.stringify(r.body ?? "");
    expect(PAN_LIKE.test(text), `card-number-like digits in ${what}: ${text.slice(0, 300)}`).toBe(false);
    return r;
  };
  const request = async <T = any>(method: string, path: string, o?: RequestOptions) =>
    check(await s.request<T>(method, path, o), `${method} ${path}`) as Reply<T>;
  const admin = async <T = any>(method: string, path: string, body?: unknown) =>
    check(await s.admin<T>(method, path, body), `${method} /admin/v1${path}`) as Reply<T>;
  return { ...s, request, admin };
}

/** The tRPC transport: a mutation (POST with the input as body) or a query (GET ?input=). */
export function trpc(s: TestServer) {
  return {
    mutation: (proc: string, input: unknown, o: RequestOptions = {}) =>
      s.request("POST", `/trpc/${proc}`, input === undefined ? o : { ...o, body: input }),
    query: (proc: string, input: unknown, o: RequestOptions = {}) =>
      s.request("GET", `/trpc/${proc}${input === undefined ? "" : `?input=${encodeURIComponent(JSON.stringify(input))}`}`, o),
  };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The harness's PUBLIC_URL: the Origin of the dashboard's calls on a server of startServer. */
export const HARNESS_ORIGIN = "http://cardctl.test";

/**
 * An owner of `accountId` (invited now through the operator API), signed in as the dashboard signs
 * in: tRPC calls with the session's cookie, the dashboard's Origin and the CSRF token; `mode`
 * picks the session's mode (Cardctl-Mode, test by default). `origin`: the server's PUBLIC_URL.
 */
export async function ownerSession(s: TestServer, accountId: string, email: string, origin = HARNESS_ORIGIN) {
  const invite = await s.admin("POST", `/accounts/${accountId}/owners`, { email });
  const token = String(invite.body.invite_url).split("#")[1]!;
  const r = await s.request("POST", "/auth/invites/accept", { key: null, headers: { origin }, body: { token, password: "correct horse battery" } });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  const cookie = /^(cardctl_session=[^;]+)/.exec(r.headers.get("set-cookie") ?? "")![1]!;
  const as = (mode?: "test" | "live"): RequestOptions => ({
    key: null,
    headers: { origin, cookie, "x-csrf-token": r.body.csrf_token as string, ...(mode ? { "cardctl-mode": mode } : {}) },
  });
  const t = trpc(s);
  return {
    owner: r.body.owner as { id: string; email: string; account_id: string },
    /** The headers of the session's calls, for a call made by hand. */
    headers: (mode?: "test" | "live") => as(mode).headers!,
    query: (proc: string, input?: unknown, mode?: "test" | "live") => t.query(proc, input, as(mode)),
    mutation: (proc: string, input?: unknown, mode?: "test" | "live") => t.mutation(proc, input ?? {}, as(mode)),
  };
}
