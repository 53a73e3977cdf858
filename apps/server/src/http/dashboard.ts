import fastifyStatic from "@fastify/static";
import type { FastifyInstance, FastifyReply } from "fastify";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { unlimited } from "./docs.js";

/** The dashboard's pages (its client-side routes, apps/dashboard/src/routes.ts): each answers index.html. */
const PAGES = ["/", "/invite", "/sign-in", "/cards", "/policy", "/keys"];

/**
 * Everything the pages load comes from this server (Vite's build has no inline script or style);
 * the invite token travels in the URL's fragment, and no page leaks its URL to another site.
 */
const PAGE_HEADERS = {
  "content-security-policy":
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
};

const NOT_BUILT =
  "The dashboard is not built. Run `npm run build` (or `npm start`, which builds it) in the repository, then restart the server.\n";

/**
 * The owners' dashboard (apps/dashboard, built by Vite to static files): its pages at PAGES, never
 * cached (they name the current assets), and its content-hashed assets under /assets/, cached for
 * a year. Without a build (a development checkout), the pages answer 503 saying how to build it.
 */
export async function registerDashboard(app: FastifyInstance) {
  const dist = join(dirname(createRequire(import.meta.url).resolve("@cardctl/dashboard/package.json")), "dist");
  // Read once: the build is fixed for the life of the process (a new build needs a restart).
  const index = existsSync(join(dist, "index.html")) ? await readFile(join(dist, "index.html")) : undefined;
  const page = (reply: FastifyReply) =>
    index
      ? reply.headers(PAGE_HEADERS).header("cache-control", "no-cache").type("text/html; charset=utf-8").send(index)
      : reply.code(503).type("text/plain; charset=utf-8").send(NOT_BUILT);
  for (const path of PAGES) app.get(path, unlimited, async (_req, reply) => page(reply));

  if (!index) return;
  await app.register(fastifyStatic, { root: dist, serve: false });
  app.get<{ Params: { "*": string } }>("/assets/*", unlimited, async (req, reply) =>
    reply.headers(PAGE_HEADERS).sendFile(join("assets", req.params["*"]), { immutable: true, maxAge: "365d" }),
  );
}
