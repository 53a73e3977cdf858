import type { ReactNode } from "react";
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
