import { AppError, sha256 } from "@cardctl/api";
import { createCardctlMcpServer } from "@cardctl/mcp";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { MCP_CHALLENGE } from "./auth.js";
import { sendError } from "./errors.js";

/**
 * The MCP tools over Streamable HTTP at /mcp, for MCP clients that send `Authorization: Bearer
 * sk_…`. Stateless: each POST gets a server for its key, whose tools call the REST API in-process
 * (app.inject) with that key, so auth, rate limits, idempotency and errors are exactly the API's,
 * and the /mcp request itself is not counted on top. reveal_card answers with the ephemeral key and
 * the processor URL only: no card number passes through the service.
 */
export function registerMcp(app: FastifyInstance, publicUrl: string) {
  const ownOrigin = new URL(publicUrl).origin;
  /**
   * The calls running on this instance, by key and JSON-RPC id: stateless, a client's
   * notifications/cancelled comes in a POST of its own, whose fresh server knows no call; it ends
   * the call's own server here instead (closing it aborts the tool's signal: a wait stops polling).
   * Two clients sharing a key may use the same ids: a cancel that matches more than one call ends
   * none (each then ends at its own time), never another client's.
   */
  const running = new Map<string, Set<() => void>>();
  const callKey = (apiKey: string, id: unknown) => `${sha256(apiKey)}:${JSON.stringify(id)}`;
  app.post("/mcp", { config: { rateLimit: false } }, async (req, reply) => {
    // The transport spec's rule: a request a web page sent (it has an Origin) from another site is refused.
    const origin = req.headers.origin;
    if (origin !== undefined && origin !== ownOrigin)
      return refuse(req, reply, new AppError(403, "forbidden", `Origin ${origin} may not call /mcp: only this server's own (${ownOrigin}), or a client sending no Origin.`));
    const apiKey = bearer(req);
    if (!apiKey) return refuse(req, reply, new AppError(401, "unauthorized", "Send your API key as 'Authorization: Bearer <API_KEY>'."));
    const messages = (Array.isArray(req.body) ? req.body : [req.body]) as { id?: unknown; method?: unknown; params?: { requestId?: unknown } }[];
    // Before anything the API counts: a key at its rate limit can still cancel its own calls.
    for (const m of messages)
      if (m?.method === "notifications/cancelled" && m.params?.requestId !== undefined) {
        const ends = running.get(callKey(apiKey, m.params.requestId));
        if (ends?.size === 1) for (const end of ends) end();
      }
    let opened: Awaited<ReturnType<typeof createCardctlMcpServer>>;
    try {
      opened = await createCardctlMcpServer({
        api: { apiKey, baseUrl: publicUrl, fetch: injectFetch(app, req, publicUrl), maxRetries: 0 },
        reveal: { kind: "key", baseUrl: publicUrl },
      });
    } catch (err) {
      const e = err as { status?: number; code?: string; message?: string; details?: Record<string, unknown>; headers?: Headers };
      if (e.status === undefined) throw err;
      // The API's own refusal (401 unauthorized, 429 rate_limited), in its envelope, with its headers.
      e.headers?.forEach((v, k) => {
        if (k.startsWith("ratelimit-") || k === "retry-after") reply.header(k, v);
      });
      const details = e.details && Object.keys(e.details).length ? e.details : undefined;
      return refuse(req, reply, new AppError(e.status, e.code ?? "unauthorized", e.message ?? "", details));
    }
    const { server } = opened;
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    const calls = messages.filter((m) => m?.method === "tools/call" && m.id !== undefined).map((m) => callKey(apiKey, m.id));
    const end = () => {
      void transport.close();
      void server.close();
    };
    for (const call of calls) running.set(call, (running.get(call) ?? new Set()).add(end));
    reply.raw.on("close", () => {
      for (const call of calls) {
        const ends = running.get(call);
        ends?.delete(end);
        if (ends?.size === 0) running.delete(call);
      }
      end();
    });
    // Hijacked, the reply's headers (Request-Id, Cache-Control, HSTS) would not be sent: they go on the raw response.
    for (const [name, value] of Object.entries(reply.getHeaders())) if (value !== undefined) reply.raw.setHeader(name, value as string | number | string[]);
    reply.hijack();
    await server.connect(transport);
    await transport.handleRequest(req.raw, reply.raw, req.body);
  });
  // Stateless: no server-initiated stream (GET) and no session to end (DELETE). The API's error
  // envelope, as for any other refusal here (a JSON-RPC error's numeric code is no API error code).
  const notAllowed = () => new AppError(405, "method_not_allowed", "Method not allowed: send MCP messages with POST /mcp (stateless: no stream to GET, no session to DELETE).");
  for (const method of ["GET", "DELETE"] as const)
    app.route({ method, url: "/mcp", config: { rateLimit: false }, handler: (req, reply) => refuse(req, reply.header("allow", "POST"), notAllowed()) });
}

/** The API's error envelope (its request_id this request's); a 401 also says how to authenticate. */
function refuse(req: FastifyRequest, reply: FastifyReply, err: AppError) {
  if (err.status === 401) reply.header("www-authenticate", MCP_CHALLENGE);
  return sendError(req, reply, err);
}

/** The bearer token as sent; the API checks it. */
function bearer(req: FastifyRequest): string | undefined {
  const m = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? "");
  return m?.[1];
}

/**
 * A fetch that runs the request through this server (auth, rate limit and all) from the caller's
 * address. The SDK's URLs are under PUBLIC_URL, whose path (a proxy's prefix) this server does not see.
 */
function injectFetch(app: FastifyInstance, from: FastifyRequest, publicUrl: string) {
  const prefix = new URL(publicUrl).pathname.replace(/\/$/, "");
  return async (input: string, init: RequestInit): Promise<Response> => {
    const url = new URL(input);
    if (prefix && url.pathname.startsWith(`${prefix}/`)) url.pathname = url.pathname.slice(prefix.length);
    const signal = init.signal;
    signal?.throwIfAborted();
    const injected = app.inject({
      method: (init.method ?? "GET") as "GET",
      url: url.pathname + url.search,
      headers: { ...(init.headers as Record<string, string>), "user-agent": `cardctl-mcp (${from.headers["user-agent"] ?? "unknown client"})` },
      payload: typeof init.body === "string" ? init.body : undefined,
      remoteAddress: from.ip,
    });
    const res = await (signal
      ? Promise.race([injected, new Promise<never>((_, reject) => signal.addEventListener("abort", () => reject(signal.reason), { once: true }))])
      : injected);
    const headers = new Headers();
    for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) headers.set(k, Array.isArray(v) ? v.join(", ") : String(v));
    return new Response(res.statusCode === 204 ? null : res.payload, { status: res.statusCode, headers });
  };
}
