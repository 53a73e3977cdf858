import { AppError, describeIssues, ownerView, safeEqual, validationError, type OwnerPrincipal, type Services } from "@cardctl/api";
import * as s from "@cardctl/contract";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { z } from "zod";
import { clientAddress } from "./client-address.js";
import { sendError } from "./errors.js";

/**
 * The session cookie's name for PUBLIC_URL (or its origin): over https with the `__Host-` prefix,
 * which browsers keep only for a Secure, Path=/ cookie without a Domain, so no other host (a
 * sibling subdomain) can set or shadow it. Plain http (a local set-up) cannot carry the prefix.
 */
export const sessionCookieName = (publicUrl: string) => (publicUrl.startsWith("https:") ? "__Host-cardctl_session" : "cardctl_session");
/** Sign-in and invite attempts per client IP per 15 minutes (each email is also blocked after 5 failures in a row). */
const SIGN_IN_ATTEMPTS = 20;

/**
 * Owners' dashboard sessions (DESIGN 3.9): sign-in, invites, sign-out under /auth, a server-side
 * session behind an HttpOnly, SameSite=Lax cookie (parsed by @fastify/cookie, registered before
 * auth; Secure and `__Host-` when PUBLIC_URL is https, see sessionCookieName). A session
 * authenticates /trpc for the dashboard; every state-changing request of a session must come from
 * PUBLIC_URL's origin (Origin header) and carry the session's CSRF token (X-CSRF-Token).
 */
export function registerOwnerSessions(app: FastifyInstance, services: Services, publicUrl: string) {
  const origin = new URL(publicUrl).origin;
  const secure = publicUrl.startsWith("https:");
  const cookie = sessionCookieName(publicUrl);
  const limited = { rateLimit: { max: SIGN_IN_ATTEMPTS, timeWindow: 15 * 60 * 1000 } };

  const setSession = (reply: FastifyReply, token: string) =>
    reply.setCookie(cookie, token, { httpOnly: true, sameSite: "lax", secure, path: "/" });
  const answer = (owner: OwnerPrincipal) => ({ owner: ownerView(owner), csrf_token: owner.csrfToken });

  app.post("/auth/sign-in", { config: limited }, async (req, reply) => {
    if (!fromOurOrigin(req, origin)) return sendError(req, reply, crossOrigin());
    const input = parse(s.signInInput, req.body);
    const session = await services.owners.signIn(input.email, input.password, clientAddress(req.ip));
    setSession(reply, session.token);
    return answer(session.owner);
  });

  app.post("/auth/invites/accept", { config: limited }, async (req, reply) => {
    if (!fromOurOrigin(req, origin)) return sendError(req, reply, crossOrigin());
    const input = parse(s.acceptInviteInput, req.body);
    const session = await services.owners.acceptInvite(input.token, input.password);
    setSession(reply, session.token);
    return answer(session.owner);
  });

  app.get("/auth/session", async (req, reply) => {
    const owner = await sessionOf(req, services, cookie);
    if (!owner) return sendError(req, reply, signedOut());
    return answer(owner);
  });

  app.post("/auth/sign-out", async (req, reply) => {
    const owner = await sessionOf(req, services, cookie);
    if (owner) {
      const refused = csrfError(req, origin, owner);
      if (refused) return sendError(req, reply, refused);
      await services.owners.signOut(owner.sessionId);
    }
    reply.clearCookie(cookie, { path: "/", secure });
    return reply.code(204).send();
  });
}

/** The owner behind the request's session cookie (named `cookie`), or null. */
export async function sessionOf(req: FastifyRequest, services: Services, cookie: string): Promise<OwnerPrincipal | null> {
  const token = req.cookies[cookie];
  return token && /^[A-Za-z0-9]{20,100}$/.test(token) ? services.owners.authenticate(token) : null;
}

/**
 * Why a session's request may not change anything, or undefined: reads pass; a state change needs
 * the Origin of PUBLIC_URL (a cross-site form or script cannot send it) and the session's CSRF token.
 */
export function csrfError(req: FastifyRequest, origin: string, owner: OwnerPrincipal): AppError | undefined {
  if (req.method === "GET" || req.method === "HEAD") return undefined;
  if (!fromOurOrigin(req, origin)) return crossOrigin();
  const token = req.headers["x-csrf-token"];
  if (typeof token !== "string" || !safeEqual(token, owner.csrfToken))
    return new AppError(403, "csrf_failed", "Missing or wrong X-CSRF-Token: send the csrf_token of GET /auth/session with every change.");
  return undefined;
}

const fromOurOrigin = (req: FastifyRequest, origin: string) => req.headers.origin === origin;
const crossOrigin = () => new AppError(403, "csrf_failed", "This request did not come from the dashboard's own origin (Origin header).");
export const signedOut = () => new AppError(401, "unauthorized", "Not signed in, or the session ended: sign in again.");

function parse<T>(schema: z.ZodType<T>, body: unknown): T {
  const r = schema.safeParse(body);
  if (r.success) return r.data;
  throw validationError(describeIssues(r.error));
}
