import SwaggerParser from "@apidevtools/swagger-parser";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dbKind, startServer, type TestServer } from "./harness.js";

/** GET /v1/openapi.json (generated from the router) and /docs (no CDN). */
describe(`OpenAPI document and docs (${dbKind})`, () => {
  let s: TestServer;
  let doc: any;
  /** The document with every $ref replaced by what it points to (named schemas are components). */
  let resolved: any;
  beforeAll(async () => {
    s = await startServer();
    const r = await s.request("GET", "/v1/openapi.json", { key: null });
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toMatch(/application\/json/);
    doc = r.body;
    resolved = await SwaggerParser.dereference(structuredClone(doc));
  });
  afterAll(() => s.close());

  const EXPECTED: [string, string][] = [
    ["post", "/v1/cards"],
    ["get", "/v1/cards"],
    ["get", "/v1/cards/{id}"],
    ["post", "/v1/cards/{id}/close"],
    ["get", "/v1/balance"],
    ["get", "/v1/api_keys/current"],
    ["get", "/v1/policies/default"],
    ["put", "/v1/policies/default"],
    ["post", "/v1/policies/check"],
    ["get", "/v1/approvals"],
    ["get", "/v1/approvals/{id}"],
    ["post", "/v1/approvals/{id}/approve"],
    ["post", "/v1/approvals/{id}/reject"],
    ["post", "/v1/test_helpers/cards/{id}/purchase"],
    ["get", "/v1/authorizations"],
    ["get", "/v1/transactions"],
    ["post", "/v1/test_helpers/cards/{id}/authorizations"],
    ["post", "/v1/test_helpers/authorizations/{id}/capture"],
    ["post", "/v1/test_helpers/authorizations/{id}/reverse"],
    ["post", "/v1/test_helpers/authorizations/{id}/expire"],
    ["post", "/v1/test_helpers/transactions/{id}/refund"],
    ["post", "/v1/test_helpers/cards/{id}/expire_hold"],
    ["get", "/v1/events"],
    ["get", "/v1/events/{id}"],
    ["post", "/v1/webhook_endpoints"],
    ["get", "/v1/webhook_endpoints"],
    ["get", "/v1/webhook_endpoints/{id}"],
    ["post", "/v1/webhook_endpoints/{id}"],
    ["post", "/v1/webhook_endpoints/{id}/rotate_secret"],
    ["delete", "/v1/webhook_endpoints/{id}"],
    ["get", "/v1/webhook_endpoints/{id}/deliveries"],
    ["post", "/v1/webhook_endpoints/{id}/deliveries/{delivery_id}/retry"],
    ["post", "/admin/v1/accounts"],
    ["get", "/admin/v1/accounts/{id}"],
    ["post", "/admin/v1/accounts/{id}/kyb"],
    ["post", "/admin/v1/accounts/{id}/payment_method"],
    ["post", "/admin/v1/accounts/{id}/cardholder"],
    ["post", "/admin/v1/accounts/{id}/owners"],
    ["post", "/admin/v1/accounts/{id}/keys"],
    ["get", "/admin/v1/accounts/{id}/keys"],
    ["post", "/admin/v1/keys/{id}/revoke"],
    ["get", "/admin/v1/payments"],
    ["get", "/admin/v1/cards/attention"],
    ["post", "/admin/v1/cards/{id}/retry_recovery"],
  ];

  it("is OpenAPI 3 and needs no key", () => {
    expect(doc.openapi).toMatch(/^3\./);
    expect(doc.info.title).toBeTypeOf("string");
    expect(doc.servers[0].url).toBe("http://cardctl.test");
  });

  it("has every path of spec section 4 and of the operator API", () => {
    for (const [method, path] of EXPECTED) expect(doc.paths?.[path]?.[method], `${method.toUpperCase()} ${path}`).toBeDefined();
    const documented = Object.entries(doc.paths).flatMap(([p, item]: [string, any]) => Object.keys(item).map((m) => `${m} ${p}`));
    expect(documented.sort()).toEqual(EXPECTED.map(([m, p]) => `${m} ${p}`).sort());
  });

  it("has the Error envelope schema, referenced by every operation's error responses", () => {
    const env = doc.components.schemas.Error;
    expect(env).toBeDefined();
    expect(env.required).toEqual(["error"]);
    const err = env.properties.error;
    expect(Object.keys(err.properties).sort()).toEqual(["code", "details", "message", "request_id"]);
    expect([...err.required].sort()).toEqual(["code", "message", "request_id"]);
    for (const [method, path] of EXPECTED) {
      const op = doc.paths[path][method];
      const shared = (r: any) => (r?.$ref ? doc.components.responses[r.$ref.replace("#/components/responses/", "")] : r);
      for (const status of ["400", "401", "404", "500"])
        expect(shared(op.responses[status])?.content?.["application/json"]?.schema?.$ref, `${method} ${path} ${status}`).toBe(
          "#/components/schemas/Error",
        );
    }
  });

  it("documents the real success statuses and schemas of card creation", () => {
    const create = resolved.paths["/v1/cards"].post;
    expect(Object.keys(create.responses)).toEqual(expect.arrayContaining(["201", "202", "400", "403"]));
    expect(create.responses["200"]).toBeUndefined();
    const created = create.responses["201"].content["application/json"].schema;
    expect(Object.keys(created.properties).sort()).toEqual(
      ["agent_id", "created_at", "expiration", "expires_at", "id", "last_four", "remaining_cents", "spending_limit_cents", "spent_cents", "status"].sort(),
    );
    const pending = create.responses["202"].content["application/json"].schema;
    expect(Object.keys(pending.properties).sort()).toEqual(["approval_id", "expires_at", "status"]);
    const body = create.requestBody.content["application/json"].schema;
    expect(body.required).toEqual(["amount_cents"]);
    expect(Object.keys(body.properties).sort()).toEqual(["agent_id", "amount_cents", "policy_override", "purpose"]);
    expect(JSON.stringify(body.properties.amount_cents)).toMatch(/50000/);
    expect(doc.paths["/v1/approvals/{id}/approve"].post.responses["201"]).toBeDefined();
    expect(doc.paths["/v1/approvals/{id}/approve"].post.responses["200"]).toBeUndefined();
  });

  it("documents list query parameters and the get-one response", () => {
    const params = resolved.paths["/v1/cards"].get.parameters.map((p: any) => `${p.in}:${p.name}`).sort();
    expect(params).toEqual(["query:agent_id", "query:limit", "query:starting_after", "query:status"]);
    const getOne = resolved.paths["/v1/cards/{id}"].get.responses["200"].content["application/json"].schema;
    expect(Object.keys(getOne.properties)).toEqual(expect.arrayContaining(["processor_card_id", "ephemeral_key_secret", "closed_at"]));
    expect(doc.components.securitySchemes.ApiKey).toMatchObject({ type: "http", scheme: "bearer" });
  });

  it("/docs is an HTML page with no external script or stylesheet, and its assets are served", async () => {
    const res = await fetch(`${s.url}/docs`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/text\/html/);
    expect(res.headers.get("request-id")).toMatch(/^req_/);
    const html = await res.text();
    expect(html).toMatch(/<html/i);
    const refs = [...html.matchAll(/<(?:script|link)[^>]*(?:src|href)="([^"]+)"/gi)].map((m) => m[1]!);
    expect(refs.length).toBeGreaterThanOrEqual(3);
    for (const ref of refs) {
      expect(ref, ref).not.toMatch(/^(https?:)?\/\//i);
      const asset = await fetch(new URL(ref, `${s.url}/docs`).toString());
      expect(asset.status, ref).toBe(200);
      // Swagger UI's files, and the page's own script, which loads the API description.
      if (ref === "/docs/init.js") expect(await asset.text()).toContain('url: "/v1/openapi.json"');
      else expect((await asset.arrayBuffer()).byteLength, ref).toBeGreaterThan(1000);
    }
    expect(html).not.toMatch(/(src|href)\s*=\s*["']?(https?:)?\/\//i);
    expect(html).not.toMatch(/@import\s+url\(\s*["']?https?:/i);
  });

  it("/docs keeps what is typed into its Authorize dialog across reloads", async () => {
    expect(await (await fetch(`${s.url}/docs/init.js`)).text()).toMatch(/persistAuthorization:\s*true/);
  });

  it("/docs runs no inline code and cannot be framed (it shares the dashboard's origin, and keeps keys typed into it)", async () => {
    const res = await fetch(`${s.url}/docs`);
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(csp).toMatch(/script-src 'self'(;|$)/);
    expect(csp).toContain("frame-ancestors 'none'");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(await res.text()).not.toMatch(/<script>(?!<\/script>)/);
  });

  it("/docs/ (with its slash) leads to the docs too", async () => {
    const res = await fetch(`${s.url}/docs/`, { redirect: "manual" });
    expect(res.status).toBe(302);
    expect(res.headers.get("location")).toBe("/docs");
    const followed = await fetch(`${s.url}/docs/`);
    expect(followed.status).toBe(200);
    expect(followed.headers.get("content-type")).toMatch(/text\/html/);
  });

  it("/favicon.ico answers 204 with no body (no JSON 404), and may be cached", async () => {
    const res = await fetch(`${s.url}/favicon.ico`);
    expect(res.status).toBe(204);
    expect(await res.text()).toBe("");
    expect(res.headers.get("cache-control")).toMatch(/max-age=\d+/);
  });

  it("/ (the dashboard, see dashboard.test.ts), /docs/ and /favicon.ico need no key and are not rate limited", async () => {
    for (const path of ["/", "/docs/", "/favicon.ico"]) {
      const res = await fetch(`${s.url}${path}`, { redirect: "manual" });
      expect(res.status, path).toBeLessThan(400);
      expect(res.headers.get("ratelimit-limit"), path).toBeNull();
    }
  });
});
