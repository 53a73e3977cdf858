import { AppError, credentialOf, safeEqual, sha256, type Services } from "@cardctl/api";
import type { FastifyInstance } from "fastify";
import { sendError } from "./errors.js";
import { csrfError, sessionCookieName, sessionOf, signedOut } from "./owner-session.js";
import { isAdminPath, isApiPath, routedPath } from "./paths.js";
import { queryCarriesCredential } from "./secrets-in-urls.js";

/** Paths that need no credentials. */
const PUBLIC = /^\/(v1\/openapi\.json|docs|setup|health|v1\/webhooks\/)/;

/** GET /v1/events/stream, with or without a query. */
const EVENT_STREAM = /^\/v1\/events\/stream(\?|$)/;


/**
 * Authentication in two steps around rate limiting: credentials are resolved first (so limits can
 * be per key, or per IP for requests without a valid key), and a failure is answered after, so
 * 401s carry rate-limit headers and count against the caller's IP.
 */
export function registerAuth(app: FastifyInstance, services: Services, adminTokenHash: string, dashboardOrigin: string) {
  const sessionCookie = sessionCookieName(dashboardOrigin);
  app.addHook("onRequest", async (req) => {
    // On every path: a key in a URL is exposed (logs, proxies, browser history) whatever it reached.
    if (queryCarriesCredential(req.url)) {
      req.authError = new AppError(
        401,
        "unauthorized",
        "API keys are not accepted in the query string. Send the key in the header 'Authorization: Bearer <API_KEY>', and revoke the exposed key.",
      );
      return;
    }
    const url = routedPath(req);
    if (PUBLIC.test(url) || (!isApiPath(url) && !isAdminPath(url))) return;
    const secret = credentialOf(req.headers.authorization);
    // Hashed only where it decides something: on /admin, or to explain a rejected key on the API.
    const isAdminToken = () => secret !== undefined && safeEqual(sha256(secret), adminTokenHash);
    if (isAdminPath(url)) {
      req.isAdmin = isAdminToken();
      if (!req.isAdmin) req.authError = adminAuthError(req.headers.authorization, secret);
      return;
    }
    // The dashboard: an owner's session cookie authenticates /trpc and the event stream (its live
    // inbox; EventSource cannot send headers) when no API key is sent.
    if (!req.headers.authorization && (url.startsWith("/trpc/") || EVENT_STREAM.test(url)) && req.cookies[sessionCookie]) {
      const owner = await sessionOf(req, services, sessionCookie);
      if (!owner) req.authError = signedOut();
      else {
        req.authError = csrfError(req, dashboardOrigin, owner);
        // The mode the dashboard shows: the Cardctl-Mode header, or on the event stream `?mode=`
        // (EventSource cannot send headers; the stream checks the value).
        const asked = EVENT_STREAM.test(url) ? (req.query as { mode?: unknown }).mode : undefined;
        const mode = (asked ?? req.headers["cardctl-mode"]) === "live" ? "live" : "test";
        req.principal = { keyId: owner.ownerId, ownerId: owner.ownerId, sessionId: owner.sessionId, accountId: owner.accountId, mode, role: "full" };
      }
      return;
    }
    try {
      req.principal = await services.accounts.authenticate(req.headers.authorization);
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      // The admin token on the public API: say so, and where it belongs, instead of "malformed key".
      req.authError = isAdminToken()
        ? new AppError(
            401,
            "unauthorized",
            "This is the admin token; it only works on the operator API under /admin/v1. Send an API key (sk_test_… or sk_live_…) to /v1 and /trpc.",
          )
        : err;
    }
  });
}

/** Answers a failed authentication; registered after the rate limiter. */
export function registerAuthRejection(app: FastifyInstance) {
  app.addHook("preHandler", (req, reply, done) => {
    if (!req.authError) return done();
    // MCP clients learn how to authenticate from the challenge, as every other 401 of /mcp says it.
    if (routedPath(req) === "/mcp") reply.header("www-authenticate", MCP_CHALLENGE);
    sendError(req, reply, req.authError);
  });
}

/** The WWW-Authenticate challenge of /mcp's 401s. */
export const MCP_CHALLENGE = 'Bearer realm="cardctl"';

/**
 * Why /admin/v1 refused a request: no credentials at all, an API key where the admin token
 * belongs, or a wrong token. Bearer and Basic (`curl -u "$ADMIN_TOKEN:"`) are accepted, as for keys.
 */
function adminAuthError(authorization: string | undefined, secret: string | undefined): AppError {
  const how = "Send it as 'Authorization: Bearer <ADMIN_TOKEN>' (the server's ADMIN_TOKEN).";
  if (!authorization?.trim()) return new AppError(401, "unauthorized", `Missing admin token: the operator API under /admin/v1 needs it. ${how}`);
  if (secret && /^sk_(test|live)_/.test(secret))
    return new AppError(401, "unauthorized", `This is an API key; the operator API under /admin/v1 needs the admin token instead. ${how}`);
  return new AppError(401, "unauthorized", `Invalid admin token. ${how}`);
}
