import { QueryClientProvider } from "@tanstack/react-query";
import { StrictMode, useEffect, useState } from "react";
import { createRoot } from "react-dom/client";
import { queryClient, setMode, signOut, useLiveEvents, useMode, useSession, type Mode, type Session } from "./api";
import { Cards } from "./pages/Cards";
import { Events } from "./pages/Events";
import { Inbox } from "./pages/Inbox";
import { Invite } from "./pages/Invite";
import { Keys } from "./pages/Keys";
import { Policy } from "./pages/Policy";
import { Setup } from "./pages/Setup";
import { SignIn, signInPath } from "./pages/SignIn";
import { Webhooks } from "./pages/Webhooks";
import { Spend } from "./pages/Spend";
import { navigate, onLinkClick, PAGES, usePath } from "./router";
import { ErrorNote } from "./ui";
import "./styles.css";

const NAV = [
  { path: PAGES.inbox, label: "Approvals", page: Inbox },
  { path: PAGES.cards, label: "Cards", page: Cards },
  { path: PAGES.spend, label: "Spend", page: Spend },
  { path: PAGES.policy, label: "Policy", page: Policy },
  { path: PAGES.keys, label: "API keys", page: Keys },
  { path: PAGES.webhooks, label: "Webhooks", page: Webhooks },
  { path: PAGES.events, label: "Events", page: Events },
  { path: PAGES.setup, label: "Setup", page: Setup },
];

function App() {
  const path = usePath();
  const session = useSession();
  const signedOut = session.data === null;
  const open = path === PAGES.invite || path === PAGES.signIn;
  useEffect(() => {
    if (signedOut && !open) navigate(signInPath(path), { replace: true });
  }, [signedOut, open, path]);

  if (path === PAGES.invite) return <Invite />;
  if (path === PAGES.signIn) return <SignIn />;
  if (session.isPending) return <p role="status">Loading…</p>;
  if (session.error) return <ErrorNote error={session.error} />;
  return session.data ? <SignedIn session={session.data} path={path} /> : null;
}

function SignedIn({ session, path }: { session: Session; path: string }) {
  const live = useLiveEvents();
  const mode = useMode();
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
      <header className={`top ${mode}`}>
        <div className="who">
          <strong>cardctl</strong>
          <span>{session.owner.email}</span>
          <span className="muted">
            {session.owner.account_id} · <span role="status">{live ? "live updates on" : "connecting…"}</span>
          </span>
        </div>
        <ModeSwitch mode={mode} />
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
        {/* A new page per mode: nothing of the other mode's (a new key's secret, a filter) stays. */}
        <Page key={mode} />
      </main>
    </>
  );
}

/** Test or live data for every page (see setMode); live is marked in the header's colour too. */
function ModeSwitch({ mode }: { mode: Mode }) {
  return (
    <fieldset className="mode">
      <legend>Mode</legend>
      {(["test", "live"] as const).map((m) => (
        <label key={m}>
          <input type="radio" name="mode" value={m} checked={mode === m} onChange={() => setMode(m)} />
          {m === "test" ? "Test" : "Live"}
        </label>
      ))}
    </fieldset>
  );
}

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <QueryClientProvider client={queryClient}>
      <App />
    </QueryClientProvider>
  </StrictMode>,
);
