import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useEffect, useRef, useState, type FormEvent, type ReactNode } from "react";
import { trpc } from "../api";
import { navigate, PAGES } from "../router";
import { stripeClient, stripeError, type StripeClient, type StripeElement } from "../stripe";
import { ErrorNote, Loaded } from "../ui";

type Status = Awaited<ReturnType<typeof trpc.setup.status.query>>;
type Item = Status["missing"][number];

const ITEM: Record<Item, string> = { kyb: "business verification (KYB)", payment_method: "a payment method", cardholder: "the cardholder" };
const listed = (items: string[]) => (items.length < 2 ? items.join("") : `${items.slice(0, -1).join(", ")} and ${items.at(-1)}`);
const MODE = { test: "Test mode", live: "Live mode" } as const;
const PROCESSOR = { simulated: "simulated processor", stripe: "Stripe" } as const;

/** The simulated processor's test cards (setup.saveTestCard). */
const TEST_CARDS = [
  { id: "pm_card_visa", label: "Visa test card ending 4242", what: "holds succeed: agents get their cards" },
  { id: "pm_card_decline", label: "Declining test card", what: "every hold is declined: to see how agents are refused" },
] as const;

/**
 * /setup, where a 403 setup_required's `setup_url` leads: what the account has and still needs
 * (KYB and the cardholder are the operator's to set), and the payment method, added here by the
 * owner: a test card on the simulated processor, or a card through Stripe's Payment Element.
 */
export function Setup() {
  const status = useQuery({ queryKey: ["setup"], queryFn: () => trpc.setup.status.query() });
  return (
    <section aria-labelledby="setup-title">
      <h1 id="setup-title">Setup</h1>
      <Loaded query={status}>{(st) => <SetupState st={st} />}</Loaded>
    </section>
  );
}

function SetupState({ st }: { st: Status }) {
  const current = st.modes.find((m) => m.mode === st.mode)!;
  const needsCardholder = st.cardholder.needed || st.modes.some((m) => m.missing.includes("cardholder"));
  return (
    <>
      {st.setup_complete ? (
        <p role="status" className="done-note">
          Setup complete: agents can get cards in {st.mode} mode.
        </p>
      ) : current.processor === null ? (
        <p role="status" className="error">
          No card processor serves {st.mode} mode on this server: cards cannot be made in it. The operator configures Stripe for it.
        </p>
      ) : (
        <p role="status">
          Not finished: {listed(st.missing.map((i) => ITEM[i]))} still missing in {st.mode} mode. Agents asking for a card are refused until then.
        </p>
      )}
      <ul className="items">
        <Step title="Business verification (KYB)" done={st.kyb_verified} doneText="Verified" missingText="Not verified">
          <p className="muted">
            Set by the operator of this cardctl server once your business is verified; it cannot be changed here. If it is missing, send the operator
            your account id, <code>{st.account_id}</code>.
          </p>
        </Step>
        {needsCardholder && (
          <Step title="Cardholder on Stripe" done={st.cardholder.set} doneText="Set" missingText="Not set">
            {st.cardholder.name && (
              <p>
                {st.cardholder.name} ({st.cardholder.type})
              </p>
            )}
            <p className="muted">Who Stripe issues the cards to, with a billing address. Set by the operator (cardctl accounts set-cardholder).</p>
          </Step>
        )}
        <Step title="Payment method" done={st.payment_method !== null} doneText="Saved" missingText="Missing">
          {st.payment_method && (
            <p>
              <code>{st.payment_method}</code> holds each card's amount until it is spent.
            </p>
          )}
          <ul className="lines" aria-label="Payment method by mode">
            {st.modes.map((m) => (
              <li key={m.mode}>
                {MODE[m.mode]}: {m.processor === null ? "no card processor on this server" : `${PROCESSOR[m.processor]}, ${m.missing.includes("payment_method") ? "no payment method yet" : "payment method saved"}`}
                {m.processor !== null && m.missing.length === 0 ? " · ready for cards" : ""}
              </li>
            ))}
          </ul>
          {st.collect === "test_cards" && <TestCards current={st.payment_method} />}
          {st.collect === "stripe" && <StripeCard publishableKey={st.stripe_publishable_key} saved={st.payment_method !== null} />}
        </Step>
      </ul>
    </>
  );
}

function Step(p: { title: string; done: boolean; doneText: string; missingText: string; children: ReactNode }) {
  return (
    <li className="item" aria-label={`${p.title}: ${p.done ? p.doneText : p.missingText}`}>
      <div className="row">
        <h2 className="step-title">{p.title}</h2>
        <span className={`badge ${p.done ? "done" : "missing"}`}>{p.done ? p.doneText : p.missingText}</span>
      </div>
      {p.children}
    </li>
  );
}

/** The simulated processor (test mode): the owner picks one of its test cards. */
function TestCards({ current }: { current: string | null }) {
  const client = useQueryClient();
  const [choice, setChoice] = useState<string>(current ?? TEST_CARDS[0].id);
  const save = useMutation({
    mutationFn: (pm: (typeof TEST_CARDS)[number]["id"]) => trpc.setup.saveTestCard.mutate({ payment_method: pm }),
    onSuccess: (st) => client.setQueryData(["setup"], st),
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    save.mutate(choice as (typeof TEST_CARDS)[number]["id"]);
  };
  return (
    <form onSubmit={submit} className="test-cards">
      <fieldset className="choices">
        <legend>Test card</legend>
        <p className="muted">This server's test mode runs on the simulated processor: no real card is charged. Pick how it treats holds.</p>
        {TEST_CARDS.map((c) => (
          <label key={c.id} className="check">
            <input type="radio" name="test-card" value={c.id} checked={choice === c.id} onChange={() => setChoice(c.id)} />
            <span>
              {c.label} <span className="muted">({c.what})</span>
            </span>
          </label>
        ))}
      </fieldset>
      <ErrorNote error={save.error} />
      {save.isSuccess && !save.isPending && (
        <p role="status" className="done-note">
          Saved.
        </p>
      )}
      <button type="submit" disabled={save.isPending}>
        Save test card
      </button>
    </form>
  );
}

/** Back from a redirect of Stripe's (a bank's page): ?setup_intent=seti_…&redirect_status=… */
function returnedIntent(): string | null {
  const q = new URLSearchParams(window.location.search);
  return q.get("redirect_status") ? q.get("setup_intent") : null;
}

/**
 * Stripe: the card is entered in Stripe's Payment Element (Stripe.js, in Stripe's frames: the
 * number never reaches this page or the server). A SetupIntent from the server, confirmed here,
 * then `setup.complete`, which reads the intent from Stripe and saves its payment method only if it
 * succeeded for this account.
 */
function StripeCard({ publishableKey, saved }: { publishableKey: string | null; saved: boolean }) {
  const client = useQueryClient();
  const [phase, setPhase] = useState<"closed" | "loading" | "open" | "saving">("closed");
  const [error, setError] = useState<unknown>(null);
  const [done, setDone] = useState(false);
  const box = useRef<HTMLDivElement>(null);
  const form = useRef<{ stripe: StripeClient; elements: ReturnType<StripeClient["elements"]>; element: StripeElement } | null>(null);

  const complete = async (intent: string) => {
    const st = await trpc.setup.complete.mutate({ setup_intent: intent });
    client.setQueryData(["setup"], st);
    setDone(true);
  };

  useEffect(() => {
    const intent = returnedIntent();
    if (!intent) return;
    navigate(PAGES.setup, { replace: true });
    setPhase("saving");
    complete(intent).then(
      () => setPhase("closed"),
      (err: unknown) => {
        setError(err);
        setPhase("closed");
      },
    );
    // Once, on arrival.
  }, []);
  useEffect(() => () => form.current?.element.destroy(), []);

  async function open() {
    setError(null);
    setDone(false);
    setPhase("loading");
    try {
      // Stripe.js first: when it cannot load, no SetupIntent is made for nothing.
      await stripeClient(publishableKey!);
      const intent = await trpc.setup.createSetupIntent.mutate();
      const stripe = await stripeClient(intent.publishable_key);
      const dark = window.matchMedia("(prefers-color-scheme: dark)").matches;
      const elements = stripe.elements({ clientSecret: intent.client_secret, appearance: { theme: dark ? "night" : "stripe" } });
      const element = elements.create("payment");
      element.mount(box.current!);
      form.current = { stripe, elements, element };
      setPhase("open");
    } catch (err) {
      setError(err);
      setPhase("closed");
    }
  }

  async function submit(e: FormEvent) {
    e.preventDefault();
    const f = form.current;
    if (!f) return;
    setError(null);
    setPhase("saving");
    try {
      const result = await f.stripe.confirmSetup({
        elements: f.elements,
        redirect: "if_required",
        confirmParams: { return_url: `${window.location.origin}${PAGES.setup}` },
      });
      if (result.error || !result.setupIntent) throw stripeError(result.error ?? {});
      await complete(result.setupIntent.id);
      f.element.destroy();
      form.current = null;
      setPhase("closed");
    } catch (err) {
      setError(err);
      setPhase("open");
    }
  }

  if (!publishableKey)
    return (
      <p role="alert" className="error">
        Stripe's card form is not available: the operator has not set this mode's Stripe publishable key (STRIPE_TEST_PUBLISHABLE_KEY or
        STRIPE_LIVE_PUBLISHABLE_KEY).
      </p>
    );
  return (
    <form onSubmit={submit} className="card-form-stripe" aria-label="Card for holds">
      <p className="muted">Your card is entered in Stripe's secure form: its number goes to Stripe only, never to this server.</p>
      <div ref={box} className="stripe-box" hidden={phase === "closed" || phase === "loading"} />
      <ErrorNote error={error} />
      {done && (
        <p role="status" className="done-note">
          Card saved.
        </p>
      )}
      {phase === "closed" || phase === "loading" ? (
        <button type="button" disabled={phase === "loading"} onClick={() => void open()}>
          {saved ? "Replace card" : "Add card"}
        </button>
      ) : (
        <button type="submit" disabled={phase === "saving"}>
          Save card
        </button>
      )}
    </form>
  );
}
