import { buildOpenApiDocument } from "@cardctl/api";
import type { FastifyInstance } from "fastify";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

const ASSETS = ["swagger-ui.css", "swagger-ui-bundle.js", "swagger-ui-standalone-preset.js"];

/**
 * Routes that are never rate limited: health checks (load balancers probe them often, and a limited
 * IP must still see the server as up) and the API description with its docs page (static).
 */
const unlimited = { config: { rateLimit: false } } as const;

/** GET /v1/openapi.json, /docs (Swagger UI served from node_modules, no CDN), /setup and /health (+ /healthz). */
export function registerDocs(app: FastifyInstance, publicUrl: string) {
  const doc = JSON.stringify(buildOpenApiDocument(publicUrl));
  const assetDir = dirname(createRequire(import.meta.url).resolve("swagger-ui-dist/package.json"));

  app.get("/v1/openapi.json", unlimited, async (_req, reply) => reply.type("application/json").send(doc));
  app.get("/health", unlimited, async () => ({ ok: true }));
  app.get("/healthz", unlimited, async () => ({ ok: true }));

  app.get("/docs", unlimited, async (_req, reply) =>
    reply.type("text/html").send(`<!doctype html>
<html><head><meta charset="utf-8"><title>cardctl API</title><link rel="stylesheet" href="/docs/swagger-ui.css"></head>
<body><div id="ui"></div><script src="/docs/swagger-ui-bundle.js"></script>
<script>window.ui = SwaggerUIBundle({ url: "/v1/openapi.json", dom_id: "#ui" });</script></body></html>`),
  );
  app.get<{ Params: { file: string } }>("/docs/:file", unlimited, async (req, reply) => {
    if (!ASSETS.includes(req.params.file)) return reply.callNotFound();
    const type = req.params.file.endsWith(".css") ? "text/css" : "application/javascript";
    return reply.type(type).header("Cache-Control", "public, max-age=86400").send(await readFile(join(assetDir, req.params.file)));
  });

  app.get("/setup", async (_req, reply) =>
    reply.type("text/html").send(`<!doctype html>
<html><head><meta charset="utf-8"><title>cardctl: finish account setup</title></head>
<body style="font-family: sans-serif; max-width: 40em; margin: 3em auto">
<h1>Finish account setup</h1>
<p>Before cards can be created, the account needs business verification (KYB) and a saved payment method,
and, where Stripe issues the cards, the cardholder they are issued to (a company or an individual, with a billing address).
The operator of this cardctl server completes them:</p>
<pre>cardctl accounts verify-kyb ACCOUNT_ID
cardctl accounts set-payment-method ACCOUNT_ID pm_…
cardctl accounts set-cardholder ACCOUNT_ID --type company --name "Acme" --line1 … --city … --postal-code … --country US</pre>
<p>or through the operator API: <code>POST /admin/v1/accounts/:id/kyb</code>, <code>POST /admin/v1/accounts/:id/payment_method</code>
and <code>POST /admin/v1/accounts/:id/cardholder</code>. A cardholder Stripe has disabled, or that misses requirements,
is completed in the Stripe Dashboard or by setting its details again.</p>
</body></html>`),
  );
}
