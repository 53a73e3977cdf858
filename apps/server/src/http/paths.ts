import type { FastifyRequest } from "fastify";

export const isApiPath = (url: string) => url.startsWith("/v1/") || url.startsWith("/trpc/");
export const isAdminPath = (url: string) => url.startsWith("/admin/");

/**
 * The path of the route a request reached, or its URL when none did (a 404): the router decodes
 * %-escapes before matching, so `/%761/cards` reaches `/v1/cards`, and its URL would not say /v1/.
 * What a request is (API, operator, public) is told by this, never by the raw URL.
 */
export const routedPath = (req: FastifyRequest) => req.routeOptions.url ?? req.url;
