import { generateOpenApiDocument, type OpenAPIObject } from "trpc-to-openapi";
import * as s from "@cardctl/contract";
import { adminRouter } from "./router/admin.js";
import { READ_ONLY_POSTS } from "./router/account.js";
import { appRouter } from "./router/index.js";
import { errorExample, ID_EXAMPLES, REQUEST_EXAMPLES, SUCCESS_EXAMPLES } from "./openapi-examples.js";

type Json = Record<string, any>;
const ref = (kind: "schemas" | "parameters" | "headers" | "responses", name: string) => ({ $ref: `#/components/${kind}/${name}` });

/**
 * Named component schemas. A schema listed here is written once under components/schemas and
 * referenced wherever a procedure uses it, so a generated client gets these names
 * (components["schemas"]["CardCreated"]). `Error` is the one error envelope of every failure.
 */
const SCHEMAS = {
  Error: s.errorEnvelopeSchema,
  CardCreated: s.cardCreated,
  PendingApproval: s.pendingApproval,
  CardListItem: s.cardListItem,
  CardDetail: s.cardDetail,
  Approval: s.approval,
  Policy: s.policy,
  Balance: s.balance,
  Authorization: s.authorization,
  Transaction: s.transaction,
  Account: s.account,
  ApiKey: s.apiKey,
  CreatedKey: s.createdKey,
  OperatorPayment: s.operatorPayment,
  AttentionCard: s.attentionCard,
  Event: s.event,
  WebhookEndpoint: s.webhookEndpoint,
  CreatedWebhookEndpoint: s.createdWebhookEndpoint,
  WebhookDelivery: s.webhookDelivery,
};

/** The API's keys and the operator's token: both `Authorization: Bearer …`, shown apart in /docs. */
const API_KEY = "ApiKey";
const ADMIN_TOKEN = "AdminToken";
const SECURITY_SCHEMES = {
  [API_KEY]: {
    type: "http",
    scheme: "bearer",
    bearerFormat: "sk_test_… or sk_live_…",
    description: "An API key of the account: `Authorization: Bearer sk_test_…` (test mode) or `sk_live_…` (live). The first start prints the demo account's test key; the operator API makes more.",
  },
  [ADMIN_TOKEN]: {
    type: "http",
    scheme: "bearer",
    bearerFormat: "adm_…",
    description: "The operator's ADMIN_TOKEN (printed at the first start): `Authorization: Bearer adm_…`. Only for /admin/v1.",
  },
} as const;

const HEADERS: Record<string, Json> = {
  "Request-Id": {
    required: true,
    description: "Identifier of this request, equal to error.request_id on errors; quote it when asking for help.",
    schema: { type: "string", pattern: "^req_" },
    example: "req_4NwZ8cTq1LmV6bRk3HsD9pYx",
  },
  "RateLimit-Limit": {
    description: "Requests allowed per hour for this API key (per client IP without a valid key). On every /v1 response.",
    schema: { type: "integer" },
    example: 1000,
  },
  "RateLimit-Remaining": { description: "Requests left in the current window.", schema: { type: "integer" }, example: 997 },
  "RateLimit-Reset": {
    description: "Unix timestamp (seconds) at which the window resets.",
    schema: { type: "integer" },
    example: 1793714709,
  },
  "Retry-After": { required: true, description: "Seconds to wait before retrying.", schema: { type: "integer" }, example: 1800 },
  "Idempotent-Replayed": {
    description: "`true` when this is the stored answer to an earlier request with the same Idempotency-Key.",
    schema: { type: "string", enum: ["true"] },
  },
};

const IDEMPOTENCY_KEY = {
  name: "Idempotency-Key",
  in: "header",
  required: false,
  description:
    "Optional. A repeat of a POST with the same key (per API key, for 24 hours) returns the original status and body " +
    "(with `Idempotent-Replayed: true`) and creates no second card or hold. The same key with a different body is " +
    "`422 idempotency_key_reused`; while the first request is still running, `409 idempotency_key_in_use`.",
  schema: { type: "string", minLength: 1, maxLength: 199 },
  example: "order-1042",
};

/** Success statuses other than 200, by "method path" (the generator documents every success as 200). */
const SUCCESS: Record<string, Record<string, { description: string; schema?: string }>> = {
  "post /v1/cards": {
    "201": { description: "Card issued: the policy allowed it, the hold is placed and the card minted", schema: "CardCreated" },
    "202": { description: "Approval required: an approval request is recorded; no card was made", schema: "PendingApproval" },
  },
  "post /v1/approvals/{id}/approve": { "201": { description: "Card issued" } },
  "post /v1/test_helpers/authorizations/{id}/capture": { "201": { description: "The capture transaction" } },
  "post /v1/test_helpers/transactions/{id}/refund": { "201": { description: "The refund transaction" } },
  "post /v1/webhook_endpoints": { "201": { description: "Endpoint created; the signing secret is shown this once" } },
  "post /admin/v1/accounts": { "201": { description: "Account created" } },
  "post /admin/v1/accounts/{id}/keys": { "201": { description: "Key created; the secret is shown this once" } },
  "post /admin/v1/accounts/{id}/owners": { "201": { description: "Invite created: send the link to the owner" } },
};

interface ErrorCase {
  code: string;
  message: string;
  details?: Record<string, unknown>;
}
const E = (code: string, message: string, details?: Record<string, unknown>): ErrorCase => ({ code, message, ...(details ? { details } : {}) });

/** The shared error responses (components/responses), by status: their codes and an example of each. */
const ERRORS: Record<string, { name: string; cases: ErrorCase[] }> = {
  "400": {
    name: "BadRequest",
    cases: [
      E("validation_error", "Invalid request: amount_cents must be an integer number of cents from 1 to 50000.", {
        issues: [{ path: "amount_cents", message: "amount_cents must be an integer number of cents from 1 to 50000" }],
      }),
      E("invalid_json", "The request body is not valid JSON."),
    ],
  },
  "401": { name: "Unauthorized", cases: [E("unauthorized", "Invalid or revoked API key. Send it as 'Authorization: Bearer <API_KEY>'.")] },
  "402": {
    name: "PaymentMethodDeclined",
    cases: [E("payment_method_declined", "The saved payment method was declined (card_declined).", { decline_code: "card_declined" })],
  },
  "403": { name: "Forbidden", cases: [E("forbidden", "This API key has the 'agent' role; this call needs a 'full' key.")] },
  "404": { name: "NotFound", cases: [E("not_found", "No such card.")] },
  "409": { name: "Conflict", cases: [E("idempotency_key_in_use", "A request with this Idempotency-Key is still running; retry shortly.")] },
  "413": { name: "PayloadTooLarge", cases: [E("payload_too_large", "The request body is larger than 100 kB.")] },
  "415": { name: "UnsupportedMediaType", cases: [E("unsupported_media_type", "Send request bodies as JSON with 'Content-Type: application/json'.")] },
  "422": { name: "IdempotencyKeyReused", cases: [E("idempotency_key_reused", "This Idempotency-Key was already used for a different request. Use a new key for a new request.")] },
  "429": {
    name: "RateLimited",
    cases: [E("rate_limited", "Rate limit of 1000 requests per hour exceeded; retry after 30 minutes.", { limit: 1000, retry_after_seconds: 1800 })],
  },
  "500": { name: "InternalError", cases: [E("internal_error", "An unexpected error occurred. Quote the request id when asking for help.")] },
  "502": { name: "ProcessorError", cases: [E("processor_error", "The card processor failed during mint: the processor did not answer.", { step: "mint" })] },
  "503": {
    name: "ProcessorNotConfigured",
    cases: [E("processor_not_configured", "No card processor is configured for live mode. Set PROCESSOR=stripe and STRIPE_LIVE_SECRET_KEY.")],
  },
};

/** Errors particular to one operation, by "method path": its own response for that status (/v1 409s add idempotency_key_in_use). */
const OPERATION_ERRORS: Record<string, Record<string, ErrorCase[]>> = {
  "post /v1/cards": {
    "403": [
      E("setup_required", "Account setup is incomplete: kyb and payment_method missing.", {
        missing: ["kyb", "payment_method"],
        setup_url: "http://127.0.0.1:4000/setup",
      }),
      E("policy_violation", "The amount 2500 cents exceeds the policy maximum of 2000 cents.", { max_amount_cents: 2000, requested: 2500 }),
    ],
  },
  "post /v1/approvals/{id}/approve": {
    "403": [
      E("setup_required", "Account setup is incomplete: payment_method missing.", { missing: ["payment_method"], setup_url: "http://127.0.0.1:4000/setup" }),
      E("policy_violation", "The amount 2500 cents exceeds the policy maximum of 2000 cents.", { max_amount_cents: 2000, requested: 2500 }),
      E("forbidden", "This API key has the 'agent' role; this call needs a 'full' key."),
    ],
    "409": [
      E("approval_not_pending", "Approval appr_3KfT8wQz1VnB6yHc2MsLd9Xa is APPROVED, not PENDING.", { status: "APPROVED" }),
    ],
  },
  "post /v1/cards/{id}/close": {
    "409": [
      E("card_not_open", "This card was already used; it is deactivated and cannot be closed.", { status: "USED" }),
    ],
  },
  "post /v1/test_helpers/authorizations/{id}/capture": {
    "409": [
      E("authorization_not_approved", "A declined authorization cannot be captured."),
      E("authorization_not_capturable", "Authorization auth_5RgN0pLs7VdK2qWm9TcB4xYe was reversed; it cannot be captured.", { status: "reversed" }),
    ],
  },
  "post /v1/test_helpers/authorizations/{id}/reverse": {
    "409": [E("authorization_not_pending", "Authorization auth_5RgN0pLs7VdK2qWm9TcB4xYe is closed, not pending.", { status: "closed" })],
  },
  "post /v1/test_helpers/authorizations/{id}/expire": {
    "409": [E("authorization_not_pending", "Authorization auth_5RgN0pLs7VdK2qWm9TcB4xYe is reversed, not pending.", { status: "reversed" })],
  },
  "post /v1/test_helpers/transactions/{id}/refund": {
    "409": [
      E("not_a_capture", "Only a capture can be refunded."),
      E("refund_exceeds_capture", "Only 300 of this capture can still be refunded.", { refundable_cents: 300 }),
    ],
  },
  "post /v1/approvals/{id}/reject": {
    "409": [
      E("approval_not_pending", "Approval appr_3KfT8wQz1VnB6yHc2MsLd9Xa is EXPIRED, not PENDING.", { status: "EXPIRED" }),
    ],
  },
  "post /v1/webhook_endpoints": {
    "409": [E("limit_exceeded", "An account has at most 16 webhook endpoints per mode; delete one first.", { limit: 16 })],
  },
  "post /admin/v1/cards/{id}/retry_recovery": {
    "409": [E("card_not_in_attention", "This card does not need attention: the recovery pass handles it.")],
  },
};

/** POSTs that only read (dry runs): no Idempotency-Key, no stored answers, no processor. */
const readOnly = (method: string, path: string) => method === "post" && (READ_ONLY_POSTS.rest as readonly string[]).includes(path);

/** The error statuses an operation can answer. */
function errorStatuses(method: string, path: string): string[] {
  const api = path.startsWith("/v1/");
  const post = method === "post" && !readOnly(method, path);
  const body = method === "post" || method === "put";
  const processor = post || path === "/v1/cards/{id}";
  // The two calls that place a hold on the saved payment method.
  const hold = post && (path === "/v1/cards" || path === "/v1/approvals/{id}/approve");
  return [
    "400",
    "401",
    ...(hold ? ["402"] : []),
    ...(api ? ["403"] : []),
    "404",
    ...((api && post) || OPERATION_ERRORS[`${method} ${path}`]?.["409"] ? ["409"] : []),
    ...(body ? ["413", "415"] : []),
    ...(api && post ? ["422"] : []),
    "429",
    "500",
    ...(processor ? ["502", "503"] : []),
  ];
}

/**
 * Headers of error responses: Request-Id always; RateLimit-* on /v1 (and on operator requests
 * refused for a wrong token, which are limited per IP); Retry-After on 429.
 */
const ERROR_HEADERS = {
  "Request-Id": ref("headers", "Request-Id"),
  "RateLimit-Limit": ref("headers", "RateLimit-Limit"),
  "RateLimit-Remaining": ref("headers", "RateLimit-Remaining"),
  "RateLimit-Reset": ref("headers", "RateLimit-Reset"),
};

function errorResponse(cases: ErrorCase[], status: string): Json {
  const example = (c: ErrorCase) => errorExample(c.code, c.message, c.details);
  const media: Json = { schema: ref("schemas", "Error") };
  if (cases.length === 1) media.example = example(cases[0]!);
  else media.examples = Object.fromEntries(cases.map((c) => [c.code, { summary: c.code, value: example(c) }]));
  const headers = status === "429" ? { ...ERROR_HEADERS, "Retry-After": ref("headers", "Retry-After") } : ERROR_HEADERS;
  return { description: cases.map((c) => c.code).join(", "), headers, content: { "application/json": media } };
}

const TAGS = [
  { name: "cards", description: "Single-use virtual cards: create (201, or 202 when approval is required), list, read, close" },
  { name: "approvals", description: "Requests waiting for a human: list, approve (issues the card), reject" },
  { name: "balance", description: "Spend summary" },
  { name: "api keys", description: "The key making the request: its account, mode and role" },
  { name: "policies", description: "The account's default spending policy" },
  { name: "authorizations", description: "Purchases the card network asked to authorize" },
  { name: "transactions", description: "Captures and refunds" },
  { name: "test helpers", description: "Stand-ins for the card network; test keys only" },
  {
    name: "events",
    description:
      "Every state change of the account, kept 30 days. Live: GET /v1/events/stream (Server-Sent Events, `?types=a,b`, `Last-Event-ID` resumes; not described here as it is not JSON)",
  },
  {
    name: "webhook endpoints",
    description:
      "Outgoing webhooks (full-role keys): events POSTed to your URL, signed per Standard Webhooks, retried with backoff for 3 days; deliveries and retries",
  },
  { name: "operator", description: "The operator API at /admin/v1 (admin token): accounts, setup, keys, payments and cards to follow up" },
];

/**
 * The OpenAPI 3.1 document of both REST surfaces, generated from the routers by trpc-to-openapi,
 * then completed with what the routers cannot say: the real success statuses (201, and 202 for a
 * card waiting for approval), the one error envelope (`Error`) on every error status, the
 * Idempotency-Key header of POSTs, the Request-Id and RateLimit-* response headers, and examples.
 * Each surface has its own security scheme (API key for /v1, admin token for /admin/v1).
 */
export function buildOpenApiDocument(baseUrl: string): OpenAPIObject {
  const common = { version: "1.0.0", baseUrl, defs: SCHEMAS };
  // trpc-to-openapi puts every scheme of `securitySchemes` on every protected operation, so each
  // surface is generated with its own one.
  const api = generateOpenApiDocument(appRouter, {
    ...common,
    title: "cardctl API",
    description:
      "Single-use virtual cards for AI agents. Authenticate /v1 with an API key (`Authorization: Bearer sk_test_…`, " +
      "scheme ApiKey) and the operator API /admin/v1 with the admin token (scheme AdminToken). Errors always have the " +
      "body `{error: {code, message, details?, request_id}}`.",
    securitySchemes: { [API_KEY]: SECURITY_SCHEMES[API_KEY] },
  });
  const admin = generateOpenApiDocument(adminRouter, {
    ...common,
    title: "cardctl operator API",
    securitySchemes: { [ADMIN_TOKEN]: SECURITY_SCHEMES[ADMIN_TOKEN] },
  });

  // trpc-to-openapi's default error responses register their own schemas (error.BAD_REQUEST, …, in
  // its {message, code, issues} shape, which this server never sends); every response they belonged
  // to is replaced below, so they go.
  const schemas = Object.fromEntries(
    Object.entries({ ...admin.components?.schemas, ...api.components?.schemas }).filter(([name]) => !name.startsWith("error.")),
  );
  const doc: OpenAPIObject = {
    openapi: api.openapi,
    info: api.info,
    servers: [{ url: baseUrl }],
    tags: TAGS,
    paths: {},
    components: {
      securitySchemes: { ...SECURITY_SCHEMES },
      parameters: { IdempotencyKey: IDEMPOTENCY_KEY },
      responses: Object.fromEntries(Object.entries(ERRORS).map(([status, { name, cases }]) => [name, errorResponse(cases, status)])),
      headers: HEADERS,
      schemas,
    } as Json,
  };
  for (const [prefix, paths] of [["/v1", api.paths], ["/admin/v1", admin.paths]] as const)
    for (const [path, item] of Object.entries(paths ?? {})) doc.paths![prefix + path] = item;

  for (const [path, item] of Object.entries(doc.paths!)) {
    const onApi = path.startsWith("/v1/");
    for (const [method, op] of Object.entries(item as Record<string, Json>)) {
      const key = `${method} ${path}`;
      // Every response has a Request-Id; /v1 ones count against the key's rate limit (the
      // operator's requests are not limited), and a POST's may be a stored answer.
      const success: Json = { "Request-Id": ref("headers", "Request-Id") };
      if (onApi) for (const h of ["RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"]) success[h] = ref("headers", h);
      const idempotent = onApi && method === "post" && !readOnly(method, path);
      if (idempotent) success["Idempotent-Replayed"] = ref("headers", "Idempotent-Replayed");

      const responses: Json = {};
      const ok = op.responses?.["200"];
      const statuses: Record<string, { description: string; schema?: string }> = SUCCESS[key] ?? {
        "200": { description: ok?.description ?? "Successful response" },
      };
      for (const [status, { description, schema }] of Object.entries(statuses)) {
        const example = SUCCESS_EXAMPLES[`${key} ${status}`];
        const media = { schema: schema ? ref("schemas", schema) : ok.content["application/json"].schema, ...(example ? { example } : {}) };
        responses[status] = { description, headers: success, content: { "application/json": media } };
      }
      for (const status of errorStatuses(method, path)) {
        // A /v1 POST's own conflicts come on top of the Idempotency-Key's (409 idempotency_key_in_use).
        const own = OPERATION_ERRORS[key]?.[status]?.concat(status === "409" && onApi ? ERRORS["409"]!.cases : []);
        responses[status] = own ? errorResponse(own, status) : ref("responses", ERRORS[status]!.name);
      }
      op.responses = responses;

      if (idempotent) op.parameters = [...(op.parameters ?? []), ref("parameters", "IdempotencyKey")];
      for (const param of op.parameters ?? []) {
        const prefix = param.in === "path" ? path.match(/\/(\w+)\/\{id\}/)?.[1] : undefined;
        const id = prefix && ID_EXAMPLES[{ cards: "card_", approvals: "appr_", authorizations: "auth_", transactions: "txn_", accounts: "acct_", keys: "key_", events: "evt_", webhook_endpoints: "we_" }[prefix] ?? ""];
        if (id) param.example = id;
      }
      const body = REQUEST_EXAMPLES[key];
      if (body && op.requestBody?.content?.["application/json"]) op.requestBody.content["application/json"].example = body;
    }
  }
  return doc;
}
