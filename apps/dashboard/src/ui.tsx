import { useEffect, useRef, useState, type ReactNode } from "react";
import { apiError } from "./api";

/** A query's states in one place: loading, error (with the API's message), empty, or the content. */
export function Loaded<T>(p: {
  query: { isPending: boolean; error: unknown; data: T | undefined };
  empty?: (data: T) => ReactNode | false;
  children: (data: T) => ReactNode;
}) {
  if (p.query.isPending) return <p role="status">Loading…</p>;
  if (p.query.error) return <ErrorNote error={p.query.error} />;
  const data = p.query.data as T;
  const empty = p.empty?.(data);
  return <>{empty ? <p className="empty">{empty}</p> : p.children(data)}</>;
}

/** A failure, announced to screen readers. */
export const ErrorNote = ({ error }: { error: unknown }) => (error ? <p role="alert" className="error">{apiError(error).message}</p> : null);

/**
 * A destructive action, asked twice: the first button (`label`: "Close card") opens an inline
 * confirmation whose button names what it acts on (`confirm`: "Close card ending 4242"), beside
 * Cancel. Focus moves to the confirming button, and back to the first one on Cancel or Escape.
 * `tone: "secondary"` shows the first button quieter, for an action that can be undone.
 */
export function Confirm(p: { label: string; confirm: string; question: string; busy?: boolean; onConfirm: () => void; tone?: "danger" | "secondary" }) {
  const [asking, setAsking] = useState(false);
  const first = useRef<HTMLButtonElement>(null);
  const yes = useRef<HTMLButtonElement>(null);
  const back = useRef(false);
  useEffect(() => {
    if (asking) yes.current?.focus();
    else if (back.current) first.current?.focus();
    back.current = false;
  }, [asking]);
  const cancel = () => {
    back.current = true;
    setAsking(false);
  };
  if (!asking)
    return (
      <button ref={first} type="button" className={p.tone ?? "danger"} disabled={p.busy} onClick={() => setAsking(true)}>
        {p.label}
      </button>
    );
  return (
    <div className="ask" role="group" aria-label={p.label} onKeyDown={(e) => e.key === "Escape" && cancel()}>
      <p>{p.question}</p>
      <div className="actions">
        <button ref={yes} type="button" className="danger" disabled={p.busy} onClick={p.onConfirm}>
          {p.confirm}
        </button>
        <button type="button" className="secondary" onClick={cancel}>
          Cancel
        </button>
      </div>
    </div>
  );
}

/** A list's "Load more" (see useList): shown while the API has more; how many are shown, for everyone. */
export function LoadMore(p: {
  list: { hasNextPage: boolean; isFetchingNextPage: boolean; fetchNextPage: () => unknown; nextPageError: unknown; data?: { data: unknown[] } };
  what: string;
}) {
  const shown = p.list.data?.data.length ?? 0;
  if (!p.list.hasNextPage) return null;
  return (
    <div className="more">
      <p className="muted">
        Showing the newest {shown} {p.what}.
      </p>
      <ErrorNote error={p.list.nextPageError} />
      <button type="button" className="secondary" disabled={p.list.isFetchingNextPage} onClick={() => void p.list.fetchNextPage()}>
        Load more
      </button>
    </div>
  );
}

/**
 * A secret the API returns once (a new key's, a new webhook endpoint's): read-only, with Copy and
 * Done. It lives in the caller's state only, until Done or leaving the page; nothing stores it.
 */
export function SecretOnce(p: { region: string; label: string; secret: string; children: ReactNode; onDone: () => void }) {
  const [copied, setCopied] = useState(false);
  const copy = () =>
    navigator.clipboard.writeText(p.secret).then(
      () => setCopied(true),
      () => setCopied(false),
    );
  return (
    <div className="secret" role="region" aria-label={p.region}>
      <p>{p.children}</p>
      <label>
        {p.label}
        <input readOnly value={p.secret} onFocus={(e) => e.target.select()} />
      </label>
      <div className="actions">
        <button type="button" onClick={copy}>
          Copy
        </button>
        <button type="button" className="secondary" onClick={p.onDone}>
          Done
        </button>
      </div>
      {copied && <p role="status">Copied to the clipboard.</p>}
    </div>
  );
}
