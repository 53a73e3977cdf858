import { generateOpenApiDocument, type OpenAPIObject } from "trpc-to-openapi";
import { z } from "zod";
import { adminRouter } from "./router/admin.js";
import { appRouter } from "./router/index.js";
import { cardCreated, errorEnvelopeSchema, pendingApproval } from "@cardctl/contract";

const ERROR_REF = { $ref: "#/components/schemas/ErrorEnvelope" };

/** Success statuses other than 200, by "METHOD path" (the generator documents every success as 200). */
const SUCCESS: Record<string, Record<string, { description: string; schema?: z.ZodType }>> = {
  "post /v1/cards": {
    "201": { description: "Card issued", schema: cardCreated },
    "202": { description: "Approval required; no card was made", schema: pendingApproval },
  },
  "post /v1/approvals/{id}/approve": { "201": { description: "Card issued" } },
  "post /v1/test_helpers/authorizations/{id}/capture": { "201": { description: "The capture transaction" } },
  "post /v1/test_helpers/transactions/{id}/refund": { "201": { description: "The refund transaction" } },
  "post /admin/v1/accounts": { "201": { description: "Account created" } },
  "post /admin/v1/accounts/{id}/keys": { "201": { description: "Key created; the secret is shown this once" } },
};

const ERRORS: Record<string, string> = {
  "400": "validation_error or invalid_json",
  "401": "unauthorized",
  "403": "setup_required, policy_violation or forbidden",
  "404": "not_found",
  "409": "approval_not_pending, card_not_open or idempotency_key_in_use",
  "422": "idempotency_key_reused",
  "429": "rate_limited",
  "500": "internal_error",
  "502": "processor_error",
  "503": "processor_not_configured",
};

/**
 * The OpenAPI 3 document of both REST surfaces, generated from the routers, with the service's
 * real success statuses and its one error envelope on every operation.
 */
export function buildOpenApiDocument(baseUrl: string): OpenAPIObject {
  const common = { version: "1.0.0", baseUrl, defs: { ErrorEnvelope: errorEnvelopeSchema } };
  const api = generateOpenApiDocument(appRouter, {
    ...common,
    title: "cardctl API",
    description: "Single-use virtual cards for AI agents. Authenticate with 'Authorization: Bearer sk_test_…'.",
    securitySchemes: { bearer: { type: "http", scheme: "bearer", description: "API key sk_test_… or sk_live_…" } },
  });
  const admin = generateOpenApiDocument(adminRouter, { ...common, title: "cardctl operator API" });
  const doc: OpenAPIObject = { ...api, servers: [{ url: baseUrl }], paths: {} };
  const withPrefix = (paths: OpenAPIObject["paths"], prefix: string) => {
    for (const [path, item] of Object.entries(paths ?? {})) doc.paths![prefix + path] = item;
  };
  withPrefix(api.paths, "/v1");
  withPrefix(admin.paths, "/admin/v1");
  for (const [path, item] of Object.entries(doc.paths!)) {
    for (const [method, op] of Object.entries(item as Record<string, any>)) {
      const responses: Record<string, any> = {};
      const ok = op.responses?.["200"];
      const extra = SUCCESS[`${method} ${path}`];
      if (extra) {
        for (const [status, { description, schema }] of Object.entries(extra))
          responses[status] = { ...ok, description, ...(schema ? { content: { "application/json": { schema: z.toJSONSchema(schema, { target: "openapi-3.0" }) } } } : {}) };
      } else responses["200"] = ok;
      for (const [status, description] of Object.entries(ERRORS))
        responses[status] = { description, content: { "application/json": { schema: ERROR_REF } } };
      op.responses = responses;
    }
  }
  return doc;
}
