import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";
import { EVENT_TYPES } from "@cardctl/contract/event-types";
import { trpc, useMode } from "../api";
import { when } from "../format";
import { Confirm, ErrorNote, Loaded, SecretOnce } from "../ui";

type Endpoint = Awaited<ReturnType<typeof trpc.webhookEndpoints.list.query>>["data"][number];
type Delivery = Awaited<ReturnType<typeof trpc.webhookEndpoints.deliveries.query>>["data"][number];
type Created = Awaited<ReturnType<typeof trpc.webhookEndpoints.create.mutate>>;
/** What `events` takes: "*" or an event type (the create procedure's input). */
type EventChoice = Parameters<typeof trpc.webhookEndpoints.create.mutate>[0]["events"][number];
type EventType = Exclude<EventChoice, "*">;

/** What the endpoint forms edit: the URL, the description, and all events or the chosen types. */
interface Fields {
  url: string;
  description: string;
  all: boolean;
  chosen: EventType[];
}
const EMPTY: Fields = { url: "", description: "", all: true, chosen: [] };
const fieldsOf = (e: Endpoint): Fields => ({
  url: e.url,
  description: e.description ?? "",
  all: e.events.includes("*"),
  chosen: e.events.filter((t): t is EventType => t !== "*"),
});
const eventsOf = (f: Fields): EventChoice[] => (f.all ? ["*"] : f.chosen);

/** The account's webhook endpoints: add one (its signing secret shown once, never stored here), change, disable, rotate its secret, its deliveries and retries, delete. */
export function Webhooks() {
  const client = useQueryClient();
  const mode = useMode();
  const endpoints = useQuery({ queryKey: ["webhook_endpoints"], queryFn: () => trpc.webhookEndpoints.list.query({ limit: 100 }) });
  const [fields, setFields] = useState<Fields>(EMPTY);
  // The new endpoint's secret lives in this component's state only, until "Done" or leaving the page.
  const [created, setCreated] = useState<Created | null>(null);
  const create = useMutation({
    mutationFn: () =>
      trpc.webhookEndpoints.create.mutate({
        url: fields.url.trim(),
        events: eventsOf(fields),
        ...(fields.description.trim() ? { description: fields.description.trim() } : {}),
      }),
    onSuccess: (endpoint) => {
      setCreated(endpoint);
      setFields(EMPTY);
      void client.invalidateQueries({ queryKey: ["webhook_endpoints"] });
    },
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    create.mutate();
  };

  return (
    <section aria-labelledby="webhooks-title">
      <h1 id="webhooks-title">Webhooks</h1>
      <p className="muted">
        cardctl POSTs the account's {mode}-mode events to these URLs, signed as Standard Webhooks specifies: verify them with the endpoint's signing secret.
      </p>
      {/* noValidate: the API checks the URL (https, public address) and its message shows below. */}
      <form onSubmit={submit} className="card-form" noValidate>
        <h2>New endpoint</h2>
        <EndpointFields value={fields} onChange={setFields} scope="new" />
        <ErrorNote error={create.error} />
        <button type="submit" disabled={create.isPending}>
          Add endpoint
        </button>
      </form>
      {created && (
        <SecretOnce region="New endpoint" label={`Signing secret of ${created.url}`} secret={created.secret} onDone={() => setCreated(null)}>
          <strong>Copy this signing secret now: it is shown only once.</strong> Your receiver verifies each delivery with it (the{" "}
          <code>standardwebhooks</code> libraries take it as is).
        </SecretOnce>
      )}
      <h2>Endpoints</h2>
      <Loaded query={endpoints} empty={(e) => e.data.length === 0 && "No webhook endpoints yet."}>
        {(e) => (
          <ul className="items">
            {e.data.map((endpoint) => (
              <EndpointItem key={endpoint.id} endpoint={endpoint} />
            ))}
          </ul>
        )}
      </Loaded>
    </section>
  );
}

/** An endpoint's URL, description and event types; `scope` names its radio group (one per form on the page). */
function EndpointFields({ value, onChange, scope }: { value: Fields; onChange: (f: Fields) => void; scope: string }) {
  const set = (change: Partial<Fields>) => onChange({ ...value, ...change });
  const toggle = (type: EventType, on: boolean) => set({ chosen: on ? [...value.chosen, type] : value.chosen.filter((t) => t !== type) });
  return (
    <>
      <label>
        URL
        <input type="url" inputMode="url" value={value.url} maxLength={2048} placeholder="https://example.com/webhooks" onChange={(e) => set({ url: e.target.value })} />
      </label>
      <label>
        Description (optional)
        <input value={value.description} maxLength={500} placeholder="order system" onChange={(e) => set({ description: e.target.value })} />
      </label>
      <fieldset className="events">
        <legend>Events</legend>
        <label className="check">
          <input type="radio" name={`event-scope-${scope}`} checked={value.all} onChange={() => set({ all: true })} />
          All events
        </label>
        <label className="check">
          <input type="radio" name={`event-scope-${scope}`} checked={!value.all} onChange={() => set({ all: false })} />
          Only the events chosen below
        </label>
        {!value.all && (
          <div className="event-types">
            {EVENT_TYPES.map((type) => (
              <label key={type} className="check">
                <input type="checkbox" checked={value.chosen.includes(type)} onChange={(e) => toggle(type, e.target.checked)} />
                <code>{type}</code>
              </label>
            ))}
          </div>
        )}
      </fieldset>
    </>
  );
}

function EndpointItem({ endpoint }: { endpoint: Endpoint }) {
  const client = useQueryClient();
  const [open, setOpen] = useState(false);
  const refresh = () => client.invalidateQueries({ queryKey: ["webhook_endpoints"] });
  const remove = useMutation({ mutationFn: () => trpc.webhookEndpoints.delete.mutate({ id: endpoint.id }), onSuccess: refresh });
  const toggle = useMutation({
    mutationFn: () => trpc.webhookEndpoints.update.mutate({ id: endpoint.id, status: endpoint.status === "enabled" ? "disabled" : "enabled" }),
    onSuccess: refresh,
  });
  // The edit form's fields while it is open.
  const [editing, setEditing] = useState<Fields | null>(null);
  const save = useMutation({
    mutationFn: (f: Fields) =>
      trpc.webhookEndpoints.update.mutate({ id: endpoint.id, url: f.url.trim(), events: eventsOf(f), description: f.description.trim() || null }),
    onSuccess: () => {
      setEditing(null);
      void refresh();
    },
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (editing) save.mutate(editing);
  };
  // The new secret lives in this component's state only, until "Done" or leaving the page.
  const [rotated, setRotated] = useState<Created | null>(null);
  const rotate = useMutation({
    mutationFn: () => trpc.webhookEndpoints.rotateSecret.mutate({ id: endpoint.id }),
    onSuccess: (e) => {
      setRotated(e);
      void refresh();
    },
  });
  const events = endpoint.events.includes("*") ? "all events" : endpoint.events.join(", ");
  return (
    <li className="item webhook" aria-label={`Endpoint ${endpoint.url}`}>
      <div className="row">
        <strong className="url">{endpoint.url}</strong>
        <span className={`badge ${endpoint.status === "enabled" ? "open" : "closed"}`}>{endpoint.status}</span>
      </div>
      {endpoint.description && <p>{endpoint.description}</p>}
      <p>
        Events: <span className="events-list">{events}</span>
      </p>
      <p className="muted">
        Created {when(endpoint.created_at)} · {endpoint.id}
      </p>
      {endpoint.previous_secret_expires_at && <p className="muted">The previous signing secret also signs deliveries until {when(endpoint.previous_secret_expires_at)}.</p>}
      {endpoint.status === "disabled" && (
        <p className="muted">Disabled: nothing is sent to it. Enable it to receive the events that happen from then on; retrying a delivery enables it too.</p>
      )}
      {rotated && (
        <SecretOnce region="New signing secret" label={`New signing secret of ${endpoint.url}`} secret={rotated.secret} onDone={() => setRotated(null)}>
          <strong>Copy the new signing secret now: it is shown only once.</strong> Until {when(rotated.previous_secret_expires_at!)} each delivery is
          signed with both secrets, so your receiver keeps verifying while you switch it to this one.
        </SecretOnce>
      )}
      {editing && (
        <form onSubmit={submit} className="card-form" aria-label={`Edit ${endpoint.url}`} noValidate>
          <EndpointFields value={editing} onChange={setEditing} scope={endpoint.id} />
          <ErrorNote error={save.error} />
          <div className="actions">
            <button type="submit" disabled={save.isPending}>
              Save changes
            </button>
            <button type="button" className="secondary" onClick={() => setEditing(null)}>
              Cancel
            </button>
          </div>
        </form>
      )}
      <ErrorNote error={remove.error ?? toggle.error ?? rotate.error} />
      <div className="actions">
        <button type="button" className="secondary" aria-expanded={open} onClick={() => setOpen(!open)}>
          {open ? "Hide deliveries" : "Deliveries"}
        </button>
        {!editing && (
          <button
            type="button"
            className="secondary"
            onClick={() => {
              save.reset(); // the last attempt's refusal is not this one's
              setEditing(fieldsOf(endpoint));
            }}
          >
            Edit
          </button>
        )}
        {endpoint.status === "disabled" ? (
          <button type="button" className="secondary" disabled={toggle.isPending} onClick={() => toggle.mutate()}>
            Enable
          </button>
        ) : (
          <Confirm
            label="Disable"
            tone="secondary"
            confirm="Disable endpoint"
            question={`Disable ${endpoint.url}? Nothing more is sent to it and its pending deliveries fail; you can enable it again.`}
            busy={toggle.isPending}
            onConfirm={() => toggle.mutate()}
          />
        )}
        {/* Keyed by the last new secret: a rotation that succeeded closes the question. */}
        <Confirm
          key={rotated?.secret ?? "rotate"}
          label="Rotate secret"
          tone="secondary"
          confirm="Rotate secret"
          question="Make a new signing secret? For 24 hours deliveries carry a signature with each secret, so your receiver keeps verifying while you switch it over."
          busy={rotate.isPending}
          onConfirm={() => rotate.mutate()}
        />
        <Confirm
          label="Delete"
          confirm="Delete endpoint"
          question={`Delete the endpoint ${endpoint.url} and its deliveries? Nothing more is sent to it; this cannot be undone.`}
          busy={remove.isPending}
          onConfirm={() => remove.mutate()}
        />
      </div>
      {open && <Deliveries endpoint={endpoint} />}
    </li>
  );
}

/**
 * How soon to look again: while a delivery is pending, around its next attempt (within 1 to 30 s);
 * otherwise only when an event arrives (api.ts refetches deliveries on every event).
 */
function pollMs(deliveries: Delivery[] | undefined): number | false {
  const pending = deliveries?.filter((d) => d.status === "pending") ?? [];
  if (pending.length === 0) return false;
  // An attempt in flight shows its lease's end (about a minute away) as its next attempt, and ends
  // without an event: while one may be in flight, look every 5 s (an attempt lasts up to 10 s; an
  // owner's requests are rate limited); a retry far off, every 30 s.
  const soonest = Math.min(...pending.map((d) => (d.next_attempt_at ? Date.parse(d.next_attempt_at) : Date.now())));
  return soonest - Date.now() < 120_000 ? 5000 : 30_000;
}

function Deliveries({ endpoint }: { endpoint: Endpoint }) {
  const client = useQueryClient();
  const deliveries = useQuery({
    queryKey: ["webhook_deliveries", endpoint.id],
    queryFn: () => trpc.webhookEndpoints.deliveries.query({ id: endpoint.id, limit: 50 }),
    refetchInterval: (q) => pollMs(q.state.data?.data),
  });
  const retry = useMutation({
    mutationFn: (deliveryId: string) => trpc.webhookEndpoints.retry.mutate({ id: endpoint.id, delivery_id: deliveryId }),
    onSuccess: () => {
      void client.invalidateQueries({ queryKey: ["webhook_deliveries", endpoint.id] });
      // A retry enables a disabled endpoint again.
      void client.invalidateQueries({ queryKey: ["webhook_endpoints"] });
    },
  });
  return (
    <div className="detail">
      <h3>Recent deliveries</h3>
      <ErrorNote error={retry.error} />
      <Loaded query={deliveries} empty={(d) => d.data.length === 0 && "No deliveries yet: they appear when an event this endpoint takes happens."}>
        {(d) => (
          <ul className="lines deliveries">
            {d.data.map((x) => (
              <li key={x.id} aria-label={`Delivery of ${x.event_type}`}>
                <div className="row">
                  <code>{x.event_type}</code>
                  <span className={`badge ${x.status === "succeeded" ? "open" : x.status === "failed" ? "failed" : "pending"}`}>
                    {x.status === "succeeded" ? "delivered" : x.status}
                  </span>
                </div>
                <p className="muted">
                  {x.attempts} {x.attempts === 1 ? "attempt" : "attempts"}
                  {x.last_response_status !== null ? ` · last answer HTTP ${x.last_response_status}` : ""}
                  {x.last_error && x.last_error !== `HTTP ${x.last_response_status}` ? ` · ${x.last_error}` : ""}
                  {x.next_attempt_at ? ` · next attempt ${when(x.next_attempt_at)}` : ""} · {when(x.created_at)}
                </p>
                {x.status !== "succeeded" && (
                  <button type="button" className="secondary" disabled={retry.isPending} onClick={() => retry.mutate(x.id)}>
                    Retry
                  </button>
                )}
              </li>
            ))}
          </ul>
        )}
      </Loaded>
      {deliveries.data?.has_more && <p className="muted">Showing the newest 50 deliveries.</p>}
    </div>
  );
}
