import { useState, type FormEvent } from "react";
import { signIn } from "../api";
import { navigate, PAGES } from "../router";
import { ErrorNote } from "../ui";

/**
 * Pages a signed-out visitor comes back to once signed in: every page of a signed-in owner (a
 * bookmark, a link to Cards, the API's `setup_url` in every 403 setup_required). The inbox is
 * where sign-in leads anyway.
 */
const RETURN_TO: readonly string[] = Object.values(PAGES).filter((p) => p !== PAGES.signIn && p !== PAGES.invite && p !== PAGES.inbox);

/** Where a signed-out visitor of `path` is sent: sign-in, with the way back when `path` is one to return to. */
export const signInPath = (path: string) =>
  RETURN_TO.includes(path) ? `${PAGES.signIn}?next=${encodeURIComponent(path + window.location.search)}` : PAGES.signIn;

/** The page to open after signing in: `?next=` when it is one to return to (on this site), else the inbox. */
function afterSignIn(): string {
  const next = new URLSearchParams(window.location.search).get("next");
  if (!next) return PAGES.inbox;
  const url = new URL(next, window.location.origin);
  return url.origin === window.location.origin && RETURN_TO.includes(url.pathname) ? url.pathname + url.search : PAGES.inbox;
}

/** /sign-in: email and password of an owner who accepted an invite. */
export function SignIn() {
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);

  async function submit(e: FormEvent) {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await signIn(email, password);
      navigate(afterSignIn(), { replace: true });
    } catch (err) {
      setError(err);
      setBusy(false);
    }
  }

  return (
    <main className="narrow">
      <h1>Sign in to cardctl</h1>
      <form onSubmit={submit}>
        <label>
          Email
          <input type="email" autoComplete="username" required value={email} onChange={(e) => setEmail(e.target.value)} />
        </label>
        <label>
          Password
          <input type="password" autoComplete="current-password" required value={password} onChange={(e) => setPassword(e.target.value)} />
        </label>
        <ErrorNote error={error} />
        <button type="submit" disabled={busy}>
          Sign in
        </button>
      </form>
      <p className="muted">No account yet? The operator invites you: ask for a link (cardctl accounts invite).</p>
    </main>
  );
}
