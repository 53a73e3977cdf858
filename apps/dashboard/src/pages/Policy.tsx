import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";
import { trpc } from "../api";
import { formatMoney } from "@cardctl/contract/money";
import { ErrorNote, Loaded } from "../ui";

type PolicyData = Awaited<ReturnType<typeof trpc.policies.retrieveDefault.query>>;

/** The account's default policy: whether every card needs approval, and the most one card may hold. */
export function Policy() {
  const policy = useQuery({ queryKey: ["policy"], queryFn: () => trpc.policies.retrieveDefault.query() });
  return (
    <section aria-labelledby="policy-title">
      <h1 id="policy-title">Policy</h1>
      <Loaded query={policy}>{(p) => <PolicyForm policy={p} />}</Loaded>
    </section>
  );
}

function PolicyForm({ policy }: { policy: PolicyData }) {
  const client = useQueryClient();
  // A field the owner has not touched (null) shows, and saves, the policy as it is now: a change
  // made elsewhere meanwhile (a live event reloads it) is neither hidden nor undone by a save.
  const [editedApproval, setApproval] = useState<boolean | null>(null);
  const [editedMax, setMax] = useState<string | null>(null);
  const approval = editedApproval ?? policy.approval_required;
  const max = editedMax ?? (policy.max_amount_cents / 100).toFixed(2);
  const save = useMutation({
    mutationFn: () => trpc.policies.updateDefault.mutate({ approval_required: approval, max_amount_cents: Math.round(Number(max) * 100) }),
    onSuccess: (p) => {
      client.setQueryData(["policy"], p);
      setApproval(null);
      setMax(null);
    },
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    save.mutate();
  };
  return (
    <form onSubmit={submit}>
      <p className="muted">
        Now: {policy.approval_required ? "every card needs your approval" : "cards are issued without approval"}, at most {formatMoney(policy.max_amount_cents)} a card.
      </p>
      <label className="check">
        <input type="checkbox" checked={approval} onChange={(e) => setApproval(e.target.checked)} />
        Require my approval for every card
      </label>
      <label>
        Maximum per card (USD)
        <input type="number" inputMode="decimal" min="0.01" max="500" step="0.01" required value={max} onChange={(e) => setMax(e.target.value)} />
      </label>
      <ErrorNote error={save.error} />
      {save.isSuccess && <p role="status">Policy saved.</p>}
      <button type="submit" disabled={save.isPending}>
        Save policy
      </button>
    </form>
  );
}
