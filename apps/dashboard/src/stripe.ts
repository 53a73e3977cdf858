import { ApiError } from "./api";

/**
 * Stripe.js, the card processor's own browser library: the Setup page's Payment Element and a
 * card's reveal (Issuing Elements). Stripe requires it be loaded from js.stripe.com (never bundled
 * or self-hosted), so it is the dashboard's one script from another site, allowed by the pages'
 * CSP only when the server runs on Stripe; it is loaded only when a page needs it. Only what the
 * dashboard uses is typed here.
 */
export interface StripeElement {
  mount(el: HTMLElement): void;
  destroy(): void;
}
interface StripeElements {
  create(type: "payment", options?: Record<string, unknown>): StripeElement;
  create(
    type: "issuingCardNumberDisplay" | "issuingCardCvcDisplay" | "issuingCardExpiryDisplay",
    options: { issuingCard: string; nonce: string; ephemeralKeySecret: string; style?: Record<string, unknown> },
  ): StripeElement;
}
interface StripeError {
  type?: string;
  code?: string;
  message?: string;
}
export interface StripeClient {
  elements(options?: { clientSecret?: string; appearance?: Record<string, unknown> }): StripeElements;
  confirmSetup(options: {
    elements: StripeElements;
    redirect: "if_required";
    confirmParams: { return_url: string };
  }): Promise<{ error?: StripeError; setupIntent?: { id: string; status: string } }>;
  createEphemeralKeyNonce(options: { issuingCard: string }): Promise<{ nonce?: string; error?: StripeError }>;
}
type StripeFactory = (publishableKey: string) => StripeClient;

declare global {
  interface Window {
    Stripe?: StripeFactory;
  }
}

export const STRIPE_JS = "https://js.stripe.com/v3";
const LOAD_TIMEOUT_MS = 20_000;

const unavailable = () =>
  new ApiError(
    0,
    "stripe_js_unavailable",
    "Stripe's secure card form could not be loaded from js.stripe.com. Check your connection (and that no blocker stops js.stripe.com), then try again.",
  );

/** A Stripe error (a declined card, an incomplete form) as the dashboard shows errors. */
export const stripeError = (e: StripeError) => new ApiError(0, e.code ?? e.type ?? "stripe_error", e.message ?? "Stripe refused the card.");

let loading: Promise<StripeFactory> | null = null;

/** Loads Stripe.js once (a <script src> added to the page); fails with a clear message when it cannot. */
export function loadStripe(): Promise<StripeFactory> {
  if (window.Stripe) return Promise.resolve(window.Stripe);
  loading ??= new Promise<StripeFactory>((resolve, reject) => {
    const script = document.createElement("script");
    const done = (ok: boolean) => {
      clearTimeout(timer);
      if (ok && window.Stripe) return resolve(window.Stripe);
      // Try again from scratch next time.
      loading = null;
      script.remove();
      reject(unavailable());
    };
    const timer = setTimeout(() => done(false), LOAD_TIMEOUT_MS);
    script.src = STRIPE_JS;
    script.async = true;
    script.onload = () => done(true);
    script.onerror = () => done(false);
    document.head.appendChild(script);
  });
  return loading;
}

/** One Stripe client per publishable key, as Stripe recommends. */
const clients = new Map<string, StripeClient>();
export async function stripeClient(publishableKey: string): Promise<StripeClient> {
  const Stripe = await loadStripe();
  let client = clients.get(publishableKey);
  if (!client) clients.set(publishableKey, (client = Stripe(publishableKey)));
  return client;
}
