// Types only: no server code reaches the bundle.
import type { AppRouter } from "@cardctl/api";
import { QueryCache, QueryClient, useInfiniteQuery, useQuery, useQueryClient, type InfiniteData } from "@tanstack/react-query";
import { createTRPCClient, httpLink, TRPCClientError } from "@trpc/client";
import { useEffect, useState, useSyncExternalStore } from "react";

/** The signed-in owner, as GET /auth/session answers. */
export interface Session {
  owner: { id: string; email: string; account_id: string; session_expires_at: string };
  csrf_token: string;
}

/**
 * The session's CSRF token, sent with every change. Kept in memory only: the session itself is an
 * HttpOnly cookie, and no API key or other secret is ever stored by the dashboard.
 */
let csrfToken = "";

export type Mode = "test" | "live";
const MODE_KEY = "cardctl.mode";
const modeListeners = new Set<() => void>();

/**
 * Test or live data: the owner's choice, sent as the Cardctl-Mode header of every tRPC call (and as
 * `?mode=` on the event stream). Remembered in sessionStorage (not a secret) so a reload keeps it;
 * a new tab starts in test mode.
 */
let mode: Mode = (() => {
  try {
    return sessionStorage.getItem(MODE_KEY) === "live" ? "live" : "test";
  } catch {
    return "test";
  }
})();

/** The mode the dashboard shows; re-renders when it changes. */
export const useMode = () =>
  useSyncExternalStore(
    (onChange) => {
      modeListeners.add(onChange);
      return () => modeListeners.delete(onChange);
    },
    () => mode,
  );

/**
 * Switches between test and live data. Every cached answer is of the other mode, so all of them
 * (but the session) are reset: the pages show "Loading…" and fetch this mode's, never a mix.
 */
export function setMode(next: Mode) {
  if (next === mode) return;
  mode = next;
  try {
    if (next === "test") sessionStorage.removeItem(MODE_KEY);
    else sessionStorage.setItem(MODE_KEY, next);
  } catch {
    // Storage refused (private mode): the choice lasts until the page is reloaded.
  }
  void queryClient.resetQueries({ predicate: (q) => q.queryKey[0] !== "session" });
  for (const onChange of modeListeners) onChange();
}

/** The API's error, from either client: status, code and message of its envelope. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** The API error behind any failure (the tRPC client's, a fetch's), for messages and sign-in redirects. */
export function apiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof TRPCClientError) {
    const meta = err.meta as { response?: Response; responseJSON?: { error?: { code?: string; message?: string } } } | undefined;
    const body = meta?.responseJSON?.error;
    if (body?.code && body.message) return new ApiError(meta?.response?.status ?? 500, body.code, body.message);
  }
  return new ApiError(0, "network_error", "The server could not be reached. Check your connection and try again.");
}

/**
 * Sends a change (`send` reads the current CSRF token); refused as csrf_failed, the session cookie
 * changed under this tab (the owner signed in again in another one): the session is read again and,
 * if it is still this owner's, the change is sent once more with its token. Another owner's session
 * is shown as it is (the pages reload) and the change is not repeated on their account.
 */
async function withCurrentCsrf(send: () => Promise<Response>): Promise<Response> {
  const res = await send();
  if (res.status !== 403) return res;
  const code: unknown = await res
    .clone()
    .json()
    .then((j: { error?: { code?: unknown } }) => j?.error?.code)
    .catch(() => undefined);
  if (code !== "csrf_failed") return res;
  const before = queryClient.getQueryData<Session | null>(["session"]);
  const now = await fetch("/auth/session", { credentials: "same-origin" }).catch(() => null);
  if (!now?.ok) return res;
  const session = remember((await now.json()) as Session);
  if (session.owner.id === before?.owner.id) return send();
  void queryClient.resetQueries({ predicate: (q) => q.queryKey[0] !== "session" });
  return res;
}

/** The same tRPC router agents use, on the owner's session (the cookie goes along: same origin). */
export const trpc = createTRPCClient<AppRouter>({
  links: [
    httpLink({
      url: "/trpc",
      headers: () => ({ "cardctl-mode": mode }),
      fetch: (url, init) =>
        withCurrentCsrf(() => {
          const headers = new Headers(init?.headers);
          headers.set("x-csrf-token", csrfToken);
          return fetch(url, { ...init, headers, credentials: "same-origin" });
        }),
    }),
  ],
});

/** A JSON call to the session routes under /auth. */
async function auth<T>(method: "GET" | "POST", path: string, body?: unknown): Promise<T | null> {
  const send = () =>
    fetch(`/auth${path}`, {
      method,
      credentials: "same-origin",
      headers: { ...(body === undefined ? {} : { "content-type": "application/json" }), "x-csrf-token": csrfToken },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  const res = await (method === "POST" ? withCurrentCsrf(send) : send()).catch((err: unknown) => {
    throw apiError(err);
  });
  if (res.status === 204) return null;
  const json = await res.json().catch(() => ({}));
  if (!res.ok) throw new ApiError(res.status, json?.error?.code ?? "error", json?.error?.message ?? `The server answered ${res.status}.`);
  return json as T;
}

const remember = (s: Session) => {
  csrfToken = s.csrf_token;
  queryClient.setQueryData(["session"], s);
  return s;
};

export const signIn = async (email: string, password: string) => remember((await auth<Session>("POST", "/sign-in", { email, password }))!);
export const acceptInvite = async (token: string, password: string) =>
  remember((await auth<Session>("POST", "/invites/accept", { token, password }))!);
export async function signOut() {
  await auth("POST", "/sign-out");
  csrfToken = "";
  // The next owner in this tab starts in test mode.
  setMode("test");
  queryClient.clear();
  queryClient.setQueryData(["session"], null);
}

/** The current session, or null when signed out. */
export function useSession() {
  return useQuery({
    queryKey: ["session"],
    queryFn: async () => {
      try {
        return remember((await auth<Session>("GET", "/session"))!);
      } catch (err) {
        if (apiError(err).status === 401) return null;
        throw err;
      }
    },
    staleTime: Number.POSITIVE_INFINITY,
  });
}

export const queryClient: QueryClient = new QueryClient({
  // A session that ended (expired, signed out elsewhere) sends the owner to sign in.
  queryCache: new QueryCache({
    onError: (err) => {
      if (apiError(err).status === 401) queryClient.setQueryData(["session"], null);
    },
  }),
  defaultOptions: {
    queries: {
      // A 4xx will not change by asking again.
      retry: (count, err) => count < 2 && apiError(err).status >= 500,
    },
  },
});

/**
 * The lists an event's kind changes (approval.created → the approvals), refreshed when one
 * arrives. A settlement or refund moves its card's spent and left too, and a hold's end its card.
 */
const LISTS: Record<string, string[]> = {
  approval: ["approvals"],
  card: ["cards"],
  authorization: ["authorizations"],
  transaction: ["transactions", "cards"],
  hold: ["cards"],
  policy: ["policy"],
  api_key: ["api_keys"],
  webhook_endpoint: ["webhook_endpoints"],
  account: ["setup"],
};
/** What any event changes: the spend summary and chart, and webhook deliveries (one per endpoint taking it). The events list takes it as it comes. */
const EVERY_EVENT = ["spend", "webhook_deliveries"];
/** An event's deliveries are written by a delivery worker moments after it (well within a second): looked at again then. */
const DELIVERIES_WRITTEN_MS = 1000;
/**
 * A list is read again for events at most once in this window, and once more at its end if more
 * came: an owner's requests count against a rate limit as a key's do, and a busy account sends
 * several events a second.
 */
const REFETCH_WINDOW_MS = 500;

/** The longest wait before opening the stream again after the server refused it. */
const MAX_REOPEN_MS = 30_000;

type EventItem = { id: string; type: string };
type EventPages = InfiniteData<{ data: EventItem[]; has_more: boolean }>;

/** The event, put at the top of each loaded events list it belongs in (all types, or its own), once. */
function prependEvent(client: QueryClient, event: EventItem) {
  for (const [key, data] of client.getQueriesData<EventPages>({ queryKey: ["events"] })) {
    const type = key[1];
    const first = data?.pages[0];
    if (!data || !first || (type && type !== event.type) || data.pages.some((p) => p.data.some((e) => e.id === event.id))) continue;
    client.setQueryData<EventPages>(key, { ...data, pages: [{ ...first, data: [event, ...first.data] }, ...data.pages.slice(1)] });
  }
}

/**
 * The account's events, live (GET /v1/events/stream on the session cookie): a new request shows
 * in the inbox without a reload. Each event is added to the events list as it comes; the lists it
 * changes are read again (at most once per REFETCH_WINDOW_MS each). On each (re)connection the
 * lists are refetched, for what happened while disconnected. Answers whether the stream is
 * connected. EventSource reconnects by itself after a network error, but closes for good on an
 * error answer (401, 429, a proxy's 502): it is then opened again, with backoff, and the pages'
 * reads are refetched once (a 401 there leads to sign-in).
 */
export function useLiveEvents(): boolean {
  const client = useQueryClient();
  const mode = useMode();
  const [live, setLive] = useState(false);
  useEffect(() => {
    // The mode's events only: a new stream when it changes. EventSource cannot send headers.
    setLive(false);
    let stream: EventSource;
    let reopen: ReturnType<typeof setTimeout> | undefined;
    let refused = 0;
    const timers = new Set<ReturnType<typeof setTimeout>>();
    const later = (fn: () => void, ms: number) => {
      const t = setTimeout(() => {
        timers.delete(t);
        fn();
      }, ms);
      timers.add(t);
    };
    // Lists read in the current window, and those an event changed since (read at its end).
    const windowOpen = new Set<string>();
    const changed = new Set<string>();
    const refetch = (list: string) => {
      if (windowOpen.has(list)) return void changed.add(list);
      windowOpen.add(list);
      void client.invalidateQueries({ queryKey: [list] });
      later(() => {
        windowOpen.delete(list);
        if (changed.delete(list)) refetch(list);
      }, REFETCH_WINDOW_MS);
    };
    const open = () => {
      stream = new EventSource(`/v1/events/stream?mode=${mode}`);
      stream.onopen = () => {
        refused = 0;
        setLive(true);
        for (const list of new Set(["events", ...Object.values(LISTS).flat(), ...EVERY_EVENT])) void client.invalidateQueries({ queryKey: [list] });
      };
      stream.onerror = () => {
        setLive(false);
        if (stream.readyState !== EventSource.CLOSED) return;
        if (refused === 0) void client.invalidateQueries();
        reopen = setTimeout(open, Math.min(MAX_REOPEN_MS, 1000 * 2 ** refused++));
      };
      stream.onmessage = onMessage;
    };
    const onMessage = (msg: MessageEvent<string>) => {
      const event = JSON.parse(msg.data) as EventItem;
      prependEvent(client, event);
      // A read of the list under way was answered without the event and would put the list back as
      // it was: it is read again (invalidating cancels that read).
      if (client.isFetching({ queryKey: ["events"] }) > 0) refetch("events");
      for (const list of [...(LISTS[event.type.split(".")[0]!] ?? []), ...EVERY_EVENT]) refetch(list);
      later(() => refetch("webhook_deliveries"), DELIVERIES_WRITTEN_MS);
    };
    open();
    return () => {
      clearTimeout(reopen);
      for (const t of timers) clearTimeout(t);
      stream.close();
    };
  }, [client, mode]);
  return live;
}

/** The most a list call returns at once. */
const PAGE_SIZE = 100;

/**
 * One of the API's lists (newest first, `has_more` and a `starting_after` cursor), loaded 100 at a
 * time: `data` is every item loaded so far; `fetchNextPage` ("Load more") asks for the next 100.
 * A refetch (an event, a reconnection) reloads as many pages as are shown. A failed "Load more"
 * keeps the list on screen: its error is `nextPageError`, not `error`.
 */
export function useList<T extends { id: string }>(queryKey: readonly unknown[], fetchPage: (page: { limit: number; starting_after?: string }) => Promise<{ data: T[]; has_more: boolean }>) {
  const q = useInfiniteQuery({
    queryKey,
    queryFn: ({ pageParam }) => fetchPage({ limit: PAGE_SIZE, ...(pageParam ? { starting_after: pageParam } : {}) }),
    initialPageParam: "",
    getNextPageParam: (last) => (last.has_more ? last.data.at(-1)?.id : undefined),
    select: (d) => ({ data: d.pages.flatMap((p) => p.data), has_more: d.pages.at(-1)?.has_more ?? false }),
  });
  return {
    ...q,
    error: q.isFetchNextPageError ? null : q.error,
    nextPageError: q.isFetchNextPageError ? q.error : null,
  };
}

