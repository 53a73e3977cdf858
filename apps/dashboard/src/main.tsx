import { QueryClientProvider } from "@tanstack/react-query";
import { StrictMode, useEffect, useState } from "react";
import { createRoot } from "react-dom/client";
import { queryClient, signOut, useLiveEvents, useSession, type Session } from "./api";
import { Cards } from "./pages/Cards";
import { Inbox } from "./pages/Inbox";
import { Invite } from "./pages/Invite";
import { Keys } from "./pages/Keys";
import { Policy } from "./pages/Policy";
import { SignIn } from "./pages/SignIn";
import { navigate, onLinkClick, PAGES, usePath } from "./router";
import { ErrorNote } from "./ui";
import "./styles.css";

const NAV = [
  { path: PAGES.inbox, label: "Approvals", page: Inbox },
  { path: PAGES.cards, label: "Cards", page: Cards },
  { path: PAGES.policy, label: "Policy", page: Policy },
  { path: PAGES.keys, label: "API keys", page: Keys },
];

function App() {
  const path = usePath();
  const session = useSession();
  const signedOut = session.data === null;
  const open = path === PAGES.invite || path === PAGES.signIn;
  useEffect(() => {
    if (signedOut && !open) navigate(PAGES.signIn, { replace: true });
  }, [signedOut, open]);

  if (path === PAGES.invite) return <Invite />;
  if (path === PAGES.signIn) return <SignIn />;
  if (session.isPending) return <p role="status">Loading…</p>;
  if (session.error) return <ErrorNote error={session.error} />;
  return session.data ? <SignedIn session={session.data} path={path} /> : null;
}

function SignedIn({ session, path }: { session: Session; path: string }) {
  const live = useLiveEvents();
  const [error, setError] = useState<unknown>(null);
  const current = NAV.find((n) => n.path === path) ?? NAV[0]!;
  const Page = current.page;
  useEffect(() => {
    document.title = `${current.label} · cardctl`;
  }, [current.label]);
  const leave = () =>
    signOut().then(
      () => navigate(PAGES.signIn),
      (err: unknown) => setError(err),
    );
  return (
    <>
      <header className="top">
        <div className="who">
          <strong>cardctl</strong>
          <span>{session.owner.email}</span>
          <span className="muted">
            {session.owner.account_id} · test mode · <span role="status">{live ? "live updates on" : "connecting…"}</span>
          </span>
        </div>
        <button type="button" className="secondary" onClick={leave}>
          Sign out
        </button>
        <nav aria-label="Pages">
          {NAV.map((n) => (
            <a key={n.path} href={n.path} onClick={onLinkClick} aria-current={n === current ? "page" : undefined}>
              {n.label}
            </a>
          ))}
        </nav>
      </header>
      <main>
        <ErrorNote error={error} />
        <Page />
      </main>
    </>
  );
}

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <QueryClientProvider client={queryClient}>
      <App />
    </QueryClientProvider>
  </StrictMode>,
);
