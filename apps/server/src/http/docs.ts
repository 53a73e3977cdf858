import { buildOpenApiDocument } from "@cardctl/api";
import type { FastifyInstance } from "fastify";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

const ASSETS = ["swagger-ui.css", "swagger-ui-bundle.js", "swagger-ui-standalone-preset.js"];

/** The page's own script, served as a file so that the CSP allows no inline code. */
const INIT = 'window.ui = SwaggerUIBundle({ url: "/v1/openapi.json", dom_id: "#ui", persistAuthorization: true });\n';

/**
 * The docs page shares the dashboard's origin (its session cookie) and keeps what is typed into
 * Authorize in localStorage: no code but its own files, no framing by other sites. Swagger UI
 * sets inline styles, and shows its logo and the schemas' examples as data: images.
 */
const DOCS_HEADERS = {
  "content-security-policy":
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
};

/**
 * Routes that are never rate limited: health checks (load balancers probe them often, and a limited
 * IP must still see the server as up) and the API description with its docs page (static).
 */
export const unlimited = { config: { rateLimit: false } } as const;

/**
 * GET /v1/openapi.json, /docs (Swagger UI served from node_modules, no CDN) and /health (+ /healthz);
 * /setup is in setup.ts, the dashboard at / in dashboard.ts.
 */
export function registerDocs(app: FastifyInstance, publicUrl: string) {
  const doc = JSON.stringify(buildOpenApiDocument(publicUrl));
  const assetDir = dirname(createRequire(import.meta.url).resolve("swagger-ui-dist/package.json"));

  app.get("/v1/openapi.json", unlimited, async (_req, reply) => reply.type("application/json").send(doc));
  app.get("/health", unlimited, async () => ({ ok: true }));
  app.get("/healthz", unlimited, async () => ({ ok: true }));

  // /docs/ with its slash lands on the docs; a browser's icon request gets an empty answer instead of a JSON 404.
  app.get("/docs/", unlimited, async (_req, reply) => reply.redirect("/docs", 302));
  app.get("/favicon.ico", unlimited, async (_req, reply) => reply.code(204).header("Cache-Control", "public, max-age=86400").send());

  app.get("/docs", unlimited, async (_req, reply) =>
    reply.headers(DOCS_HEADERS).type("text/html").send(`<!doctype html>
<html><head><meta charset="utf-8"><title>cardctl API</title><link rel="stylesheet" href="/docs/swagger-ui.css"></head>
<body><div id="ui"></div><script src="/docs/swagger-ui-bundle.js"></script>
<script src="/docs/init.js"></script></body></html>`),
  );
  app.get<{ Params: { file: string } }>("/docs/:file", unlimited, async (req, reply) => {
    reply.headers(DOCS_HEADERS);
    if (req.params.file === "init.js") return reply.type("application/javascript").header("Cache-Control", "no-cache").send(INIT);
    if (!ASSETS.includes(req.params.file)) return reply.callNotFound();
    const type = req.params.file.endsWith(".css") ? "text/css" : "application/javascript";
    return reply.type(type).header("Cache-Control", "public, max-age=86400").send(await readFile(join(assetDir, req.params.file)));
  });
}
