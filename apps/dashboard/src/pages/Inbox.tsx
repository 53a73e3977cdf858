import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";
import { trpc, useList } from "../api";
import { formatMoney } from "@cardctl/contract/money";
import { when } from "../format";
import { ErrorNote, Loaded, LoadMore } from "../ui";

type Approval = Awaited<ReturnType<typeof trpc.approvals.list.query>>["data"][number];

/** The home page: requests awaiting the owner's decision, live (see useLiveEvents). */
export function Inbox() {
  const pending = useList(["approvals", "PENDING"], (page) => trpc.approvals.list.query({ status: "PENDING", ...page }));
  return (
    <section aria-labelledby="inbox-title">
      <h1 id="inbox-title">Approvals</h1>
      <p className="muted">Requests of your agents waiting for you. New ones appear here as they arrive.</p>
      <Loaded query={pending} empty={(p) => p.data.length === 0 && "Nothing to approve. You are all caught up."}>
        {(p) => (
          <ul className="items" aria-live="polite">
            {p.data.map((a) => (
              <Request key={a.id} approval={a} />
            ))}
          </ul>
        )}
      </Loaded>
      <LoadMore list={pending} what="requests" />
    </section>
  );
}

function Request({ approval: a }: { approval: Approval }) {
  const client = useQueryClient();
  const [rejecting, setRejecting] = useState(false);
  const [reason, setReason] = useState("");
  // Refused too (decided or expired meanwhile, elsewhere): the inbox is read again, so it shows what is.
  const done = () => client.invalidateQueries({ queryKey: ["approvals"] });
  const approve = useMutation({ mutationFn: () => trpc.approvals.approve.mutate({ id: a.id }), onSettled: done });
  const reject = useMutation({ mutationFn: () => trpc.approvals.reject.mutate({ id: a.id, ...(reason.trim() ? { reason: reason.trim() } : {}) }), onSettled: done });
  const busy = approve.isPending || reject.isPending;
  const submitReject = (e: FormEvent) => {
    e.preventDefault();
    reject.mutate();
  };

  return (
    <li className="item" aria-label={`Request of ${formatMoney(a.amount_cents)}${a.agent_id ? ` by ${a.agent_id}` : ""}`}>
      <div className="row">
        <strong className="amount">{formatMoney(a.amount_cents)}</strong>
        <span>{a.agent_id ?? "unnamed agent"}</span>
      </div>
      {a.purpose && <p>{a.purpose}</p>}
      <p className="muted">
        Asked {when(a.created_at)} · expires {when(a.expires_at)}
      </p>
      <ErrorNote error={approve.error ?? reject.error} />
      {rejecting ? (
        <form className="reject" onSubmit={submitReject}>
          <label>
            Reason (optional)
            <input value={reason} maxLength={500} onChange={(e) => setReason(e.target.value)} autoFocus />
          </label>
          <div className="actions">
            <button type="submit" className="danger" disabled={busy}>
              Reject
            </button>
            <button type="button" className="secondary" onClick={() => setRejecting(false)}>
              Cancel
            </button>
          </div>
        </form>
      ) : (
        <div className="actions">
          <button type="button" disabled={busy} onClick={() => approve.mutate()}>
            Approve
          </button>
          <button type="button" className="secondary" disabled={busy} onClick={() => setRejecting(true)}>
            Reject
          </button>
        </div>
      )}
    </li>
  );
}
