import { useInfiniteQuery } from "@tanstack/react-query";
import { useState } from "react";
import { EVENT_TYPES } from "@cardctl/contract/event-types";
import { trpc } from "../api";
import { formatMoney } from "@cardctl/contract/money";
import { when } from "../format";
import { ErrorNote, Loaded } from "../ui";

type Event = Awaited<ReturnType<typeof trpc.events.list.query>>["data"][number];
type EventType = Event["type"];

const PAGE = 20;

const ACTORS: Record<Event["actor"]["type"], string> = { api_key: "API key", owner: "owner", processor: "the processor", system: "the system" };
const actor = (a: Event["actor"]) => `by ${ACTORS[a.type]}${a.id ? ` ${a.id}` : ""}`;

const money = (cents: unknown) => (typeof cents === "number" ? formatMoney(cents) : null);

/**
 * The event's object in a few words: its id (a hold's: its card's; an account's set-up: the
 * account's) and, when it has one, its amount (a hold's end: what was captured and released).
 */
function gist(e: Event): string {
  const o = e.data.object;
  const id = [o.id, o.card_id, o.account_id].find((v): v is string => typeof v === "string") ?? null;
  const amount =
    typeof o.captured_cents === "number" ? `${money(o.captured_cents)} captured, ${money(o.released_cents)} released` : money(o.amount_cents);
  return [id, amount].filter(Boolean).join(" · ");
}

/** The account's events of the last 30 days, newest first, with a type filter and "Load more". */
export function Events() {
  const [type, setType] = useState<EventType | "">("");
  const events = useInfiniteQuery({
    queryKey: ["events", type],
    queryFn: ({ pageParam }) => trpc.events.list.query({ limit: PAGE, ...(type ? { type } : {}), ...(pageParam ? { starting_after: pageParam } : {}) }),
    initialPageParam: "",
    getNextPageParam: (last) => (last.has_more ? last.data[last.data.length - 1]?.id : undefined),
  });
  const list = events.data?.pages.flatMap((p) => p.data);
  return (
    <section aria-labelledby="events-title">
      <h1 id="events-title">Events</h1>
      <p className="muted">Everything that changed in the account in the last 30 days, newest first. New events appear as they happen.</p>
      <label className="inline">
        Type
        <select value={type} onChange={(e) => setType(e.target.value as EventType | "")}>
          <option value="">All types</option>
          {EVENT_TYPES.map((t) => (
            <option key={t} value={t}>
              {t}
            </option>
          ))}
        </select>
      </label>
      {/* A failed "Load more" keeps the events shown; its error goes below them. */}
      <Loaded
        query={{ isPending: events.isPending, error: list ? null : events.error, data: list }}
        empty={(l) => l.length === 0 && (type ? "No events of this type." : "No events yet.")}
      >
        {(l) => (
          <ul className="items">
            {l.map((e) => (
              <EventItem key={e.id} event={e} />
            ))}
          </ul>
        )}
      </Loaded>
      {list && <ErrorNote error={events.isFetchNextPageError ? events.error : null} />}
      {events.hasNextPage && (
        <div className="actions">
          <button type="button" className="secondary" disabled={events.isFetchingNextPage} onClick={() => void events.fetchNextPage()}>
            {events.isFetchingNextPage ? "Loading…" : "Load more"}
          </button>
        </div>
      )}
    </section>
  );
}

function EventItem({ event: e }: { event: Event }) {
  const [open, setOpen] = useState(false);
  return (
    <li className="item" aria-label={`Event ${e.type}`}>
      <div className="row event-head">
        <code>{e.type}</code>
        <span className="muted">{when(e.created_at)}</span>
      </div>
      <p className="muted">
        {gist(e)}
        {gist(e) ? " · " : ""}
        {actor(e.actor)}
      </p>
      <button type="button" className="secondary" aria-expanded={open} onClick={() => setOpen(!open)}>
        {open ? "Hide data" : "Show data"}
      </button>
      {open && (
        <pre className="json" aria-label={`Data of ${e.id}`}>
          {JSON.stringify(e.data.object, null, 2)}
        </pre>
      )}
    </li>
  );
}
