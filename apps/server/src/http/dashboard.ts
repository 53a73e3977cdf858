import fastifyStatic from "@fastify/static";
import type { FastifyInstance, FastifyReply } from "fastify";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { unlimited } from "./docs.js";

/**
 * The dashboard's pages (its client-side routes, apps/dashboard/src/routes.ts): each answers
 * index.html. /setup too, for browsers (http/setup.ts: JSON for other clients).
 */
const PAGES = ["/", "/invite", "/sign-in", "/cards", "/policy", "/keys", "/webhooks", "/spend", "/events"];

/**
 * Everything the pages load comes from this server (Vite's build has no inline script or style);
 * the invite token travels in the URL's fragment, and no page leaks its URL to another site.
 * With Stripe configured, and only then, the one exception: Stripe.js, which Stripe requires be
 * loaded from js.stripe.com, with the frames and API calls it makes (Stripe's integration security
 * guide lists these): the Setup page's Payment Element and a card's reveal (Issuing Elements).
 */
function pageHeaders(o: { stripe: boolean }) {
  const stripe = (sources: string) => (o.stripe ? ` ${sources}` : "");
  return {
    "content-security-policy":
      `default-src 'self'; script-src 'self'${stripe("https://js.stripe.com https://*.js.stripe.com")}; style-src 'self'; img-src 'self' data:; ` +
      `connect-src 'self'${stripe("https://api.stripe.com")}; ${o.stripe ? "frame-src https://js.stripe.com https://*.js.stripe.com https://hooks.stripe.com; " : ""}` +
      "frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
  };
}

/** Sends the dashboard's index.html (a client-side page), or 503 when the dashboard is not built. */
export type DashboardPage = (reply: FastifyReply) => FastifyReply;

const NOT_BUILT =
  "The dashboard is not built. Run `npm run build` (or `npm start`, which builds it) in the repository, then restart the server.\n";

/**
 * The owners' dashboard (apps/dashboard, built by Vite to static files): its pages at PAGES, never
 * cached (they name the current assets), and its content-hashed assets under /assets/, cached for
 * a year. Without a build (a development checkout), the pages answer 503 saying how to build it.
 */
export async function registerDashboard(app: FastifyInstance, o: { stripe: boolean } = { stripe: false }): Promise<DashboardPage> {
  const PAGE_HEADERS = pageHeaders(o);
  const dist = join(dirname(createRequire(import.meta.url).resolve("@cardctl/dashboard/package.json")), "dist");
  // Read once: the build is fixed for the life of the process (a new build needs a restart).
  const index = existsSync(join(dist, "index.html")) ? await readFile(join(dist, "index.html")) : undefined;
  const page: DashboardPage = (reply) =>
    index
      ? reply.headers(PAGE_HEADERS).header("cache-control", "no-cache").type("text/html; charset=utf-8").send(index)
      : reply.code(503).type("text/plain; charset=utf-8").send(NOT_BUILT);
  for (const path of PAGES) app.get(path, unlimited, async (_req, reply) => page(reply));

  if (!index) return page;
  await app.register(fastifyStatic, { root: dist, serve: false });
  app.get<{ Params: { "*": string } }>("/assets/*", unlimited, async (req, reply) =>
    reply.headers(PAGE_HEADERS).sendFile(join("assets", req.params["*"]), { immutable: true, maxAge: "365d" }),
  );
  return page;
}
