import { useState, type FormEvent } from "react";
import { signIn } from "../api";
import { navigate, PAGES } from "../router";
import { ErrorNote } from "../ui";

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
      navigate(PAGES.inbox, { replace: true });
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
