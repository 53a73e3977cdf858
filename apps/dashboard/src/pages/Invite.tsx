import { useState, type FormEvent } from "react";
import { acceptInvite, ApiError } from "../api";
import { navigate, PAGES } from "../router";
import { ErrorNote } from "../ui";

/** /invite#inv_…: the operator's one-time link. The owner sets a password and is signed in. */
export function Invite() {
  // The token is in the fragment, which browsers never send to a server.
  const [token] = useState(() => window.location.hash.slice(1));
  const [password, setPassword] = useState("");
  const [repeat, setRepeat] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);

  async function submit(e: FormEvent) {
    e.preventDefault();
    if (password !== repeat) return setError(new ApiError(0, "passwords_differ", "The two passwords differ: type the same one twice."));
    setBusy(true);
    setError(null);
    try {
      await acceptInvite(token, password);
      navigate(PAGES.inbox, { replace: true });
    } catch (err) {
      setError(err);
      setBusy(false);
    }
  }

  if (!/^inv_[A-Za-z0-9]+$/.test(token))
    return (
      <main className="narrow">
        <h1>Invite link incomplete</h1>
        <p role="alert" className="error">
          This link has no invite token. Open the whole link the operator sent you (it ends with #inv_…), or ask for a new one.
        </p>
      </main>
    );
  return (
    <main className="narrow">
      <h1>Welcome to cardctl</h1>
      <p>Choose a password to finish your invite. You will use it with your email to sign in.</p>
      <form onSubmit={submit}>
        <label>
          New password
          <input type="password" autoComplete="new-password" minLength={10} maxLength={200} required value={password} onChange={(e) => setPassword(e.target.value)} />
        </label>
        <label>
          Repeat password
          <input type="password" autoComplete="new-password" required value={repeat} onChange={(e) => setRepeat(e.target.value)} />
        </label>
        <p className="muted">At least 10 characters.</p>
        <ErrorNote error={error} />
        <button type="submit" disabled={busy}>
          Set password
        </button>
      </form>
    </main>
  );
}
