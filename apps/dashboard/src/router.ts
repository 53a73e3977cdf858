import { useSyncExternalStore, type MouseEvent } from "react";

/** The dashboard's pages; the server answers index.html at each (apps/server/src/http/dashboard.ts). */
export const PAGES = { inbox: "/", invite: "/invite", signIn: "/sign-in", cards: "/cards", policy: "/policy", keys: "/keys", webhooks: "/webhooks", spend: "/spend", events: "/events", setup: "/setup" } as const;

const subscribe = (onChange: () => void) => {
  window.addEventListener("popstate", onChange);
  return () => window.removeEventListener("popstate", onChange);
};

/** The current path; re-renders on navigation. */
export const usePath = () => useSyncExternalStore(subscribe, () => window.location.pathname);

export function navigate(path: string, o: { replace?: boolean } = {}) {
  if (o.replace) window.history.replaceState(null, "", path);
  else window.history.pushState(null, "", path);
  window.dispatchEvent(new PopStateEvent("popstate"));
}

/** A link's click as a client-side navigation (a modified click still opens a new tab). */
export function onLinkClick(e: MouseEvent<HTMLAnchorElement>) {
  if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  e.preventDefault();
  navigate(e.currentTarget.getAttribute("href")!);
}
