import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { trpc, useList } from "../api";
import { formatMoney } from "@cardctl/contract/money";
import { when } from "../format";
import { Confirm, ErrorNote, Loaded, LoadMore } from "../ui";
import { Reveal } from "./Reveal";

type Card = Awaited<ReturnType<typeof trpc.cards.list.query>>["data"][number];
const STATUSES = ["OPEN", "USED", "CLOSED"] as const;
type Status = (typeof STATUSES)[number];

/** The account's cards, newest first, with a status filter; a card's detail below its row. */
export function Cards() {
  const [status, setStatus] = useState<Status | "">("");
  const [openId, setOpenId] = useState<string | null>(null);
  const cards = useList(["cards", status], (page) => trpc.cards.list.query({ ...page, ...(status ? { status } : {}) }));
  return (
    <section aria-labelledby="cards-title">
      <h1 id="cards-title">Cards</h1>
      <label className="inline">
        Status
        <select value={status} onChange={(e) => setStatus(e.target.value as Status | "")}>
          <option value="">All</option>
          {STATUSES.map((s) => (
            <option key={s} value={s}>
              {s.charAt(0) + s.slice(1).toLowerCase()}
            </option>
          ))}
        </select>
      </label>
      <Loaded query={cards} empty={(c) => c.data.length === 0 && (status ? "No cards with this status." : "No cards yet.")}>
        {(c) => (
          <ul className="items">
            {c.data.map((card) => (
              <li key={card.id} className="item" aria-label={`Card ending ${card.last_four}`}>
                <div className="row">
                  <strong className="amount">{formatMoney(card.amount_cents)}</strong>
                  <span className={`badge ${card.status.toLowerCase()}`}>{card.status}</span>
                </div>
                <p>
                  •••• {card.last_four} · {card.agent_id ?? "unnamed agent"}
                  {card.purpose ? ` · ${card.purpose}` : ""}
                </p>
                <p className="muted">
                  Spent {formatMoney(card.spent_cents)} · {formatMoney(card.remaining_cents)} left · issued {when(card.created_at)}
                </p>
                <button type="button" className="secondary" aria-expanded={openId === card.id} onClick={() => setOpenId(openId === card.id ? null : card.id)}>
                  {openId === card.id ? "Hide details" : "Details"}
                </button>
                {openId === card.id && <CardDetail card={card} />}
              </li>
            ))}
          </ul>
        )}
      </Loaded>
      <LoadMore list={cards} what="cards" />
    </section>
  );
}

function CardDetail({ card }: { card: Card }) {
  const client = useQueryClient();
  const authorizations = useQuery({ queryKey: ["authorizations", card.id], queryFn: () => trpc.authorizations.list.query({ card_id: card.id, limit: 100 }) });
  const transactions = useQuery({ queryKey: ["transactions", card.id], queryFn: () => trpc.transactions.list.query({ card_id: card.id, limit: 100 }) });
  const close = useMutation({
    mutationFn: () => trpc.cards.close.mutate({ id: card.id }),
    onSuccess: () => client.invalidateQueries({ queryKey: ["cards"] }),
  });
  return (
    <div className="detail">
      <p className="muted">
        {card.id} · expires {when(card.expires_at)}
      </p>
      {card.status === "OPEN" && <Reveal card={card} />}
      {card.status === "OPEN" && (
        <>
          <ErrorNote error={close.error} />
          <Confirm
            label="Close card"
            confirm={`Close card ending ${card.last_four}`}
            question={`Close the card ending ${card.last_four}? It stops working at once and its ${formatMoney(card.remaining_cents)} hold is released.`}
            busy={close.isPending}
            onConfirm={() => close.mutate()}
          />
        </>
      )}
      <h2>Authorizations</h2>
      <Loaded query={authorizations} empty={(a) => a.data.length === 0 && "No authorizations."}>
        {(a) => (
          <ul className="lines">
            {a.data.map((x) => (
              <li key={x.id}>
                {formatMoney(x.amount_cents)} · {x.merchant.name ?? "unknown merchant"} · {x.approved ? x.status : `declined (${x.decline_reason ?? "no reason"})`} ·{" "}
                <span className="muted">{when(x.created_at)}</span>
              </li>
            ))}
          </ul>
        )}
      </Loaded>
      <h2>Transactions</h2>
      <Loaded query={transactions} empty={(t) => t.data.length === 0 && "No transactions."}>
        {(t) => (
          <ul className="lines">
            {t.data.map((x) => (
              <li key={x.id}>
                {x.type === "refund" ? "Refund" : "Capture"} {formatMoney(x.amount_cents)} · {x.merchant_name ?? "unknown merchant"} ·{" "}
                <span className="muted">{when(x.created_at)}</span>
              </li>
            ))}
          </ul>
        )}
      </Loaded>
    </div>
  );
}
