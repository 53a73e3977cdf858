import { AppError, safeEqual, sha256, type Services } from "@cardctl/api";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { sendError } from "./errors.js";
import { queryCarriesCredential } from "./secrets-in-urls.js";

/** Paths that need no credentials. */
const PUBLIC = /^\/(v1\/openapi\.json|docs|setup|health|v1\/webhooks\/)/;

export const isApiPath = (url: string) => url.startsWith("/v1/") || url.startsWith("/trpc/");
export const isAdminPath = (url: string) => url.startsWith("/admin/");

/**
 * Authentication in two steps around rate limiting: credentials are resolved first (so limits can
 * be per key, or per IP for requests without a valid key), and a failure is answered after, so
 * 401s carry rate-limit headers and count against the caller's IP.
 */
export function registerAuth(app: FastifyInstance, services: Services, adminTokenHash: string) {
  app.addHook("onRequest", async (req) => {
    const url = req.url;
    // On every path: a key in a URL is exposed (logs, proxies, browser history) whatever it reached.
    if (queryCarriesCredential(url)) {
      req.authError = new AppError(
        401,
        "unauthorized",
        "API keys are not accepted in the query string. Send the key in the header 'Authorization: Bearer <API_KEY>', and revoke the exposed key.",
      );
      return;
    }
    if (PUBLIC.test(url) || (!isApiPath(url) && !isAdminPath(url))) return;
    if (isAdminPath(url)) {
      req.isAdmin = checkAdmin(req, adminTokenHash);
      if (!req.isAdmin) req.authError = new AppError(401, "unauthorized", "Invalid admin token. Send it as 'Authorization: Bearer <ADMIN_TOKEN>'.");
      return;
    }
    try {
      req.principal = await services.accounts.authenticate(req.headers.authorization);
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      req.authError = err;
    }
  });
}

/** Answers a failed authentication; registered after the rate limiter. */
export function registerAuthRejection(app: FastifyInstance) {
  app.addHook("preHandler", async (req, reply) => {
    if (req.authError) return sendError(req, reply, req.authError);
  });
}

function checkAdmin(req: FastifyRequest, adminTokenHash: string): boolean {
  // The auth scheme is case-insensitive (RFC 7235); the token is not.
  const match = /^[Bb][Ee][Aa][Rr][Ee][Rr]\s+(\S+)\s*$/.exec(req.headers.authorization ?? "");
  return !!match && safeEqual(sha256(match[1]!), adminTokenHash);
}
