import { useQuery } from "@tanstack/react-query";
import { useEffect, useRef, useState } from "react";
import { ApiError, trpc } from "../api";
import { stripeClient, stripeError, type StripeElement } from "../stripe";
import { ErrorNote } from "../ui";

/** A card's number, CVC and expiry, as the processor answers them; kept in this component's memory only. */
interface Details {
  number: string;
  cvc: string;
  exp_month: number;
  exp_year: number;
}

/** "4242424242424242" → "4242 4242 4242 4242" */
const grouped = (n: string) => n.replace(/(\d{4})(?=\d)/g, "$1 ");

/**
 * A card's Reveal (DESIGN: the service never carries a PAN): the number comes straight from the
 * processor, read with the card's ephemeral key from GET /v1/cards/:id (`cards.get`). On the
 * simulated processor the page reads its client endpoint (on this server, outside /v1 and /trpc)
 * and shows number, CVC and expiry until Hide; on Stripe, Stripe.js's Issuing Elements show them
 * in Stripe's own frames, with an ephemeral key made for their nonce. Nothing is stored: no query
 * cache, no storage; Hide (or closing the details) forgets it.
 */
export function Reveal({ card }: { card: { id: string; last_four: string } }) {
  const setup = useQuery({ queryKey: ["setup"], queryFn: () => trpc.setup.status.query() });
  const [details, setDetails] = useState<Details | null>(null);
  const [stripeShown, setStripeShown] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const number = useRef<HTMLDivElement>(null);
  const cvc = useRef<HTMLDivElement>(null);
  const expiry = useRef<HTMLDivElement>(null);
  const elements = useRef<StripeElement[]>([]);

  const processor = setup.data?.modes.find((m) => m.mode === setup.data.mode)?.processor ?? null;
  const hide = () => {
    for (const e of elements.current) e.destroy();
    elements.current = [];
    setStripeShown(false);
    setDetails(null);
  };
  useEffect(() => () => elements.current.forEach((e) => e.destroy()), []);

  /** The simulated processor: its client endpoint, authorised by the card's ephemeral key alone. */
  async function fromSimulated() {
    const c = await trpc.cards.get.query({ id: card.id });
    const res = await fetch(`${c.reveal.url}?expand[]=number&expand[]=cvc`, {
      headers: { authorization: `Bearer ${c.ephemeral_key_secret}` },
      credentials: "omit",
      cache: "no-store",
    });
    const body = (await res.json().catch(() => null)) as Partial<Details> & { error?: { message?: string } };
    if (!res.ok) throw new ApiError(res.status, "reveal_refused", body?.error?.message ?? `The processor answered ${res.status}.`);
    const d = { number: String(body.number ?? ""), cvc: String(body.cvc ?? ""), exp_month: Number(body.exp_month), exp_year: Number(body.exp_year) };
    if (!/^\d{12,19}$/.test(d.number) || d.number.slice(-4) !== card.last_four)
      throw new ApiError(0, "reveal_mismatch", `The processor's answer is not the card ending ${card.last_four}.`);
    setDetails(d);
  }

  /**
   * Stripe: Issuing Elements. The nonce needs the Issuing card's id, which cards.get gives; then an
   * ephemeral key made for that nonce (cards.get with `nonce`), which the elements use in Stripe's frames.
   */
  async function fromStripe() {
    const key = setup.data?.stripe_publishable_key;
    if (!key) throw new ApiError(0, "stripe_not_configured", "Revealing needs Stripe.js: the operator sets this mode's Stripe publishable key (STRIPE_TEST_PUBLISHABLE_KEY or STRIPE_LIVE_PUBLISHABLE_KEY).");
    const stripe = await stripeClient(key);
    const { processor_card_id: issuingCard } = await trpc.cards.get.query({ id: card.id });
    const { nonce, error: nonceError } = await stripe.createEphemeralKeyNonce({ issuingCard });
    if (!nonce) throw stripeError(nonceError ?? {});
    const c = await trpc.cards.get.query({ id: card.id, nonce });
    const dark = window.matchMedia("(prefers-color-scheme: dark)").matches;
    const style = { base: { fontSize: "16px", color: dark ? "#e8eaee" : "#1b1d21", fontFamily: "system-ui, sans-serif" } };
    const made = stripe.elements();
    const options = { issuingCard, nonce, ephemeralKeySecret: c.ephemeral_key_secret, style };
    elements.current = [
      made.create("issuingCardNumberDisplay", options),
      made.create("issuingCardCvcDisplay", options),
      made.create("issuingCardExpiryDisplay", options),
    ];
    setStripeShown(true);
    elements.current[0]!.mount(number.current!);
    elements.current[1]!.mount(cvc.current!);
    elements.current[2]!.mount(expiry.current!);
  }

  async function reveal() {
    setBusy(true);
    setError(null);
    try {
      if (processor === "stripe") await fromStripe();
      else await fromSimulated();
    } catch (err) {
      hide();
      setError(err);
    } finally {
      setBusy(false);
    }
  }

  const shown = details !== null || stripeShown;
  return (
    <div className="reveal">
      <ErrorNote error={error} />
      {details && (
        <dl className="facts revealed" aria-label={`Details of the card ending ${card.last_four}`}>
          <div>
            <dt>Number</dt>
            <dd aria-label="Card number">{grouped(details.number)}</dd>
          </div>
          <div>
            <dt>CVC</dt>
            <dd aria-label="CVC">{details.cvc}</dd>
          </div>
          <div>
            <dt>Expires</dt>
            <dd aria-label="Expiry">
              {String(details.exp_month).padStart(2, "0")}/{String(details.exp_year % 100).padStart(2, "0")}
            </dd>
          </div>
        </dl>
      )}
      <dl className="facts revealed" hidden={!stripeShown} aria-label={`Details of the card ending ${card.last_four}`}>
        <div>
          <dt>Number</dt>
          <dd ref={number} />
        </div>
        <div>
          <dt>CVC</dt>
          <dd ref={cvc} />
        </div>
        <div>
          <dt>Expires</dt>
          <dd ref={expiry} />
        </div>
      </dl>
      {shown ? (
        <button type="button" className="secondary" onClick={hide}>
          Hide
        </button>
      ) : (
        <button type="button" className="secondary" disabled={busy || setup.isPending} onClick={() => void reveal()}>
          {busy ? "Revealing…" : "Reveal"}
        </button>
      )}
      {shown && <p className="muted">Treat these as a secret: anyone with them can spend the card's balance.</p>}
    </div>
  );
}
