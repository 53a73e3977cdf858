import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";
import { trpc, useList, useMode } from "../api";
import { when } from "../format";
import { Confirm, ErrorNote, Loaded, LoadMore, SecretOnce } from "../ui";

type Role = "full" | "agent";
type Created = Awaited<ReturnType<typeof trpc.apiKeys.create.mutate>>;

/** The account's API keys: create one (its secret shown once, never stored here), list, revoke. */
export function Keys() {
  const client = useQueryClient();
  const keys = useList(["api_keys"], (page) => trpc.apiKeys.list.query(page));
  const mode = useMode();
  const [name, setName] = useState("");
  const [role, setRole] = useState<Role>("agent");
  // The new key's secret lives in this component's state only, until "Done" or leaving the page.
  const [created, setCreated] = useState<Created | null>(null);
  const create = useMutation({
    mutationFn: () => trpc.apiKeys.create.mutate({ role, ...(name.trim() ? { name: name.trim() } : {}) }),
    onSuccess: (key) => {
      setCreated(key);
      setName("");
      void client.invalidateQueries({ queryKey: ["api_keys"] });
    },
  });
  const revoke = useMutation({
    mutationFn: (id: string) => trpc.apiKeys.revoke.mutate({ id }),
    onSuccess: () => client.invalidateQueries({ queryKey: ["api_keys"] }),
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    create.mutate();
  };

  return (
    <section aria-labelledby="keys-title">
      <h1 id="keys-title">API keys</h1>
      <form onSubmit={submit} className="card-form">
        <h2>New {mode}-mode key</h2>
        <label>
          Name
          <input value={name} maxLength={200} placeholder="shopping-agent" onChange={(e) => setName(e.target.value)} />
        </label>
        <label>
          Role
          <select value={role} onChange={(e) => setRole(e.target.value as Role)}>
            <option value="agent">agent: requests cards, cannot approve or change the policy</option>
            <option value="full">full: everything, like you</option>
          </select>
        </label>
        <ErrorNote error={create.error} />
        <button type="submit" disabled={create.isPending}>
          Create key
        </button>
      </form>
      {created && (
        <SecretOnce region="New key" label={`Secret of ${created.name ?? created.id}`} secret={created.secret} onDone={() => setCreated(null)}>
          <strong>Copy this secret now: it is shown only once.</strong> Give it to your agent; cardctl keeps only its hash.
        </SecretOnce>
      )}
      <h2>Keys</h2>
      <ErrorNote error={revoke.error} />
      <Loaded query={keys} empty={(k) => k.data.length === 0 && "No keys yet."}>
        {(k) => (
          <ul className="items">
            {k.data.map((key) => (
              <li key={key.id} className="item" aria-label={`Key ${key.name ?? key.id}`}>
                <div className="row">
                  <strong>{key.name ?? "unnamed key"}</strong>
                  <span className={`badge ${key.revoked_at ? "closed" : "open"}`}>{key.revoked_at ? "revoked" : "active"}</span>
                </div>
                <p>
                  <code>
                    {key.prefix}…{key.last4}
                  </code>{" "}
                  · {key.mode} · {key.role}
                </p>
                <p className="muted">
                  Created {when(key.created_at)}
                  {key.revoked_at ? ` · revoked ${when(key.revoked_at)}` : ""}
                </p>
                {!key.revoked_at && (
                  <Confirm
                    label="Revoke"
                    confirm={`Revoke key ${key.name ?? `${key.prefix}…${key.last4}`}`}
                    question={`Revoke the key ${key.name ?? `${key.prefix}…${key.last4}`}? Every request with it is refused from now on; this cannot be undone.`}
                    busy={revoke.isPending}
                    onConfirm={() => revoke.mutate(key.id)}
                  />
                )}
              </li>
            ))}
          </ul>
        )}
      </Loaded>
      <LoadMore list={keys} what="keys" />
    </section>
  );
}
