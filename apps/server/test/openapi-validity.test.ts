import SwaggerParser from "@apidevtools/swagger-parser";
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { OpenAPIV3_1 } from "openapi-types";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dbKind, startServer, type TestServer } from "./harness.js";

const SERVER_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const REDOCLY = resolve(SERVER_DIR, "../../node_modules/.bin/redocly");
const REDOCLY_CONFIG = join(SERVER_DIR, "redocly.yaml");

interface LintProblem {
  ruleId: string;
  severity: "error" | "warn";
  message: string;
  location: { pointer: string }[];
}

/** `redocly lint` of a document file with the repository's config; its JSON report. */
function redoclyLint(file: string): Promise<{ totals: { errors: number; warnings: number }; problems: LintProblem[] }> {
  return new Promise((done, fail) =>
    execFile(
      REDOCLY,
      ["lint", "--config", REDOCLY_CONFIG, "--lint-config", "error", "--format", "json", file],
      { env: { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true" }, maxBuffer: 32 * 1024 * 1024, timeout: 60_000 },
      // Exits 1 when it found errors: the report on stdout says which.
      (error, stdout, stderr) => {
        try {
          done(JSON.parse(stdout));
        } catch {
          fail(new Error(`redocly lint gave no report (${error?.message}): ${stderr}`));
        }
      },
    ),
  );
}

type Operation = OpenAPIV3_1.OperationObject & { responses: Record<string, any>; parameters?: any[] };

/** GET /v1/openapi.json as a generated client sees it: valid OpenAPI, lint-clean, every promise kept. */
describe(`OpenAPI document validity (${dbKind})`, () => {
  let s: TestServer;
  let doc: OpenAPIV3_1.Document;
  let ops: { method: string; path: string; op: Operation }[];
  beforeAll(async () => {
    s = await startServer();
    const res = await fetch(`${s.url}/v1/openapi.json`);
    expect(res.status).toBe(200);
    doc = (await res.json()) as OpenAPIV3_1.Document;
    // Operations with their responses resolved (error responses are shared under components/responses).
    const shared = doc.components!.responses as Record<string, any>;
    const resolve = (r: any) => (r.$ref ? shared[r.$ref.replace("#/components/responses/", "")] : r);
    ops = Object.entries(doc.paths!).flatMap(([path, item]) =>
      Object.entries(item as Record<string, Operation>).map(([method, op]) => ({
        method,
        path,
        op: { ...op, responses: Object.fromEntries(Object.entries(op.responses).map(([st, r]) => [st, resolve(r)])) },
      })),
    );
  });
  afterAll(() => s.close());

  it("is valid OpenAPI 3.1 for @apidevtools/swagger-parser (schema and every $ref)", async () => {
    expect(doc.openapi).toBe("3.1.0");
    const api = await SwaggerParser.validate(structuredClone(doc) as never);
    expect(Object.keys(api.paths ?? {}).length).toBe(Object.keys(doc.paths!).length);
  });

  it("has no errors under redocly lint (recommended rules, examples checked against their schemas)", async () => {
    const dir = await mkdtemp(join(tmpdir(), "cardctl-openapi-"));
    try {
      const file = join(dir, "openapi.json");
      await writeFile(file, JSON.stringify(doc, null, 2));
      const report = await redoclyLint(file);
      const errors = report.problems.filter((p) => p.severity === "error").map((p) => `${p.ruleId} at ${p.location[0]?.pointer}: ${p.message}`);
      expect(errors).toEqual([]);
      expect(report.totals.errors).toBe(0);
      // The one warning left on purpose (redocly.yaml): no license chosen yet.
      expect(report.problems.filter((p) => p.severity === "warn").map((p) => p.ruleId)).toEqual(["info-license"]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("defines the security schemes it uses: an API key for /v1, the admin token for /admin/v1", () => {
    const schemes = doc.components!.securitySchemes as Record<string, any>;
    expect(schemes.ApiKey).toMatchObject({ type: "http", scheme: "bearer" });
    expect(schemes.AdminToken).toMatchObject({ type: "http", scheme: "bearer" });
    expect(schemes.Authorization).toBeUndefined();
    for (const { method, path, op } of ops) {
      const expected = path.startsWith("/admin/v1/") ? "AdminToken" : "ApiKey";
      expect(op.security, `${method} ${path}`).toEqual([{ [expected]: [] }]);
    }
  });

  it("declares the optional Idempotency-Key header on every POST of /v1 (the read-only dry run aside)", () => {
    const param = (doc.components!.parameters as Record<string, any>).IdempotencyKey;
    expect(param).toMatchObject({ name: "Idempotency-Key", in: "header", required: false, schema: { type: "string", maxLength: 199 } });
    expect(param.description).toMatch(/Idempotent-Replayed/);
    const readOnly = ["/v1/policies/check"];
    const posts = ops.filter((o) => o.method === "post" && o.path.startsWith("/v1/") && !readOnly.includes(o.path));
    expect(posts.length).toBeGreaterThan(10);
    for (const { path, op } of posts)
      expect(op.parameters, path).toContainEqual({ $ref: "#/components/parameters/IdempotencyKey" });
    // POST /v1/policies/check writes nothing and ignores the header: no key, no stored answers, no 409/422.
    for (const { path, op } of ops.filter((o) => o.method === "post" && readOnly.includes(o.path))) {
      expect(op.parameters ?? [], path).not.toContainEqual({ $ref: "#/components/parameters/IdempotencyKey" });
      expect(Object.keys(op.responses), path).not.toEqual(expect.arrayContaining(["409"]));
      expect(Object.keys(op.responses), path).not.toEqual(expect.arrayContaining(["422"]));
      expect(op.responses["200"].headers["Idempotent-Replayed"], path).toBeUndefined();
    }
    // The operator API has no idempotency keys (they are scoped per API key).
    for (const { path, op } of ops.filter((o) => o.path.startsWith("/admin/")))
      expect(op.parameters ?? [], path).not.toContainEqual({ $ref: "#/components/parameters/IdempotencyKey" });
  });

  it("describes every error status with the one Error envelope, and keeps none of the generator's error schemas", () => {
    const schemas = doc.components!.schemas as Record<string, any>;
    expect(Object.keys(schemas).filter((n) => n.startsWith("error.") || n === "ErrorEnvelope")).toEqual([]);
    expect(JSON.stringify(doc)).not.toMatch(/Invalid input data error|Internal server error error/);
    expect(schemas.Error.required).toEqual(["error"]);
    expect(Object.keys(schemas.Error.properties.error.properties).sort()).toEqual(["code", "details", "message", "request_id"]);
    for (const { method, path, op } of ops) {
      const errors = Object.keys(op.responses).filter((st) => Number(st) >= 400);
      expect(errors, `${method} ${path}`).toEqual(expect.arrayContaining(["400", "401", "404", "429", "500"]));
      for (const status of errors) {
        const media = op.responses[status].content["application/json"];
        expect(media.schema, `${method} ${path} ${status}`).toEqual({ $ref: "#/components/schemas/Error" });
        const examples = media.example ? [media.example] : Object.values(media.examples).map((e: any) => e.value);
        for (const example of examples) expect(example.error.request_id).toMatch(/^req_/);
      }
    }
    const create = doc.paths!["/v1/cards"]!.post as Operation;
    expect(Object.keys(create.responses["403"].content["application/json"].examples).sort()).toEqual(["policy_violation", "setup_required"]);
    expect(create.responses["401"]).toEqual({ $ref: "#/components/responses/Unauthorized" });
  });

  it("describes card creation as 201 (card) or 202 (pending approval), each with its own schema", () => {
    const create = doc.paths!["/v1/cards"]!.post as Operation;
    expect(create.responses["200"]).toBeUndefined();
    expect(create.responses["201"].content["application/json"].schema).toEqual({ $ref: "#/components/schemas/CardCreated" });
    expect(create.responses["202"].content["application/json"].schema).toEqual({ $ref: "#/components/schemas/PendingApproval" });
    const approve = doc.paths!["/v1/approvals/{id}/approve"]!.post as Operation;
    expect(Object.keys(approve.responses).filter((st) => st < "300")).toEqual(["201"]);
    expect(approve.responses["201"].content["application/json"].schema).toEqual({ $ref: "#/components/schemas/CardCreated" });
    const pending = (doc.components!.schemas as any).PendingApproval;
    expect(pending.properties.status).toMatchObject({ const: "PENDING_APPROVAL" });
  });

  it("documents Request-Id on every response and RateLimit-* on every /v1 response, as the server sends them", async () => {
    for (const { method, path, op } of ops)
      for (const [status, response] of Object.entries(op.responses)) {
        const names = Object.keys(response.headers ?? {});
        expect(names, `${method} ${path} ${status}`).toContain("Request-Id");
        if (path.startsWith("/v1/"))
          expect(names, `${method} ${path} ${status}`).toEqual(expect.arrayContaining(["RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"]));
        if (status === "429") expect(names).toContain("Retry-After");
      }
    const headers = doc.components!.headers as Record<string, any>;
    expect(headers["RateLimit-Reset"].description).toMatch(/unix timestamp/i);
    // What the documentation promises is what a response carries.
    const res = await fetch(`${s.url}/v1/balance`, { headers: { authorization: `Bearer ${s.apiKey}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get("request-id")).toMatch(new RegExp(headers["Request-Id"].schema.pattern));
    expect(Number(res.headers.get("ratelimit-limit"))).toBeGreaterThan(0);
    expect(Number(res.headers.get("ratelimit-remaining"))).toBeGreaterThanOrEqual(0);
    const reset = Number(res.headers.get("ratelimit-reset"));
    expect(reset).toBeGreaterThan(Date.now() / 1000);
    expect(reset).toBeLessThanOrEqual(Date.now() / 1000 + 3601);
  });

  it("has a realistic example for every success response and request body", () => {
    for (const { method, path, op } of ops) {
      const successes = Object.entries(op.responses).filter(([st]) => st.startsWith("2"));
      expect(successes.length, `${method} ${path}`).toBeGreaterThan(0);
      for (const [status, response] of successes)
        expect(response.content["application/json"].example, `${method} ${path} ${status}`).toBeDefined();
      const body = (op.requestBody as any)?.content?.["application/json"];
      if (body && Object.keys(body.schema.properties ?? {}).length) expect(body.example, `${method} ${path} body`).toBeDefined();
      for (const param of op.parameters ?? []) if (param.in === "path") expect(param.example, `${method} ${path} ${param.name}`).toMatch(/^[a-z]+_[A-Za-z0-9]{24}$/);
    }
    const text = JSON.stringify(doc.paths);
    expect(text).not.toMatch(/"example":\s*-?9007199254740991/);
    const created = (doc.paths!["/v1/cards"]!.post as Operation).responses["201"].content["application/json"].example;
    expect(created).toMatchObject({ id: expect.stringMatching(/^card_/), spending_limit_cents: 2500, remaining_cents: 2500, status: "OPEN" });
    const pending = (doc.paths!["/v1/cards"]!.post as Operation).responses["202"].content["application/json"].example;
    expect(pending.approval_id).toMatch(/^appr_/);
  });
});
