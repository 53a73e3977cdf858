import type { FastifyRequest } from "fastify";

export const isApiPath = (url: string) => url.startsWith("/v1/") || url.startsWith("/trpc/");
export const isAdminPath = (url: string) => url.startsWith("/admin/");

/**
 * The path of the route a request reached, or its URL when none did (a 404): the router decodes
 * %-escapes before matching, so `/%761/cards` reaches `/v1/cards`, and its URL would not say /v1/.
 * What a request is (API, operator, public) is told by this, never by the raw URL.
 */
export const routedPath = (req: FastifyRequest) => req.routeOptions.url ?? req.url;

/**
 * The request's path as routing read it: its route's, with the parameters routing decoded
 * (`/%761/cards/c%5F1/close` is `/v1/cards/c_1/close`), so one request is one request however its
 * URL is escaped; the URL's path when no route matched.
 */
export function requestPath(req: FastifyRequest): string {
  const route = req.routeOptions.url;
  if (route === undefined) return req.url.split("?")[0]!;
  const params = req.params as Record<string, string>;
  return route.replace(/:(\w+)/g, (_, name: string) => params[name] ?? "");
}
