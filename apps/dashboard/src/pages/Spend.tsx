import { useQuery } from "@tanstack/react-query";
import { trpc } from "../api";
import { formatMoney } from "@cardctl/contract/money";
import { Loaded } from "../ui";

type Day = Awaited<ReturnType<typeof trpc.spend.daily.query>>[number];
type Balance = Awaited<ReturnType<typeof trpc.balance.retrieve.query>>;

const DAYS = 30;

/** A UTC day (YYYY-MM-DD) as "Nov 3". */
const dayLabel = (date: string) => new Date(`${date}T00:00:00Z`).toLocaleDateString(undefined, { month: "short", day: "numeric", timeZone: "UTC" });
const count = (n: number, one: string) => `${n} ${one}${n === 1 ? "" : "s"}`;

/** What the account holds and spends: the spend summary (GET /v1/balance) and a chart of daily spend. */
export function Spend() {
  const balance = useQuery({ queryKey: ["spend", "balance"], queryFn: () => trpc.balance.retrieve.query() });
  const daily = useQuery({ queryKey: ["spend", "daily", DAYS], queryFn: () => trpc.spend.daily.query({ days: DAYS }) });
  return (
    <section aria-labelledby="spend-title">
      <h1 id="spend-title">Spend</h1>
      <h2 id="summary-title">Summary</h2>
      <Loaded query={balance}>{(b) => <Summary balance={b} />}</Loaded>
      <h2 id="daily-title">Daily spend, last {DAYS} days</h2>
      <p className="muted">Money settled per day (UTC): captures, less refunds.</p>
      <Loaded query={daily}>{(d) => <DailySpend days={d} />}</Loaded>
    </section>
  );
}

function Summary({ balance: b }: { balance: Balance }) {
  const yes = (v: boolean) => (v ? "Yes" : "No");
  const rows: [string, string][] = [
    ["Held on open cards", formatMoney(b.held_cents)],
    ["Open cards", String(b.open_cards)],
    ["Pending approvals", String(b.pending_approvals)],
    ["Uncollected", formatMoney(b.uncollected_cents)],
    ["Maximum per card", formatMoney(b.max_per_card_cents)],
    ["Approval required", yes(b.approval_required)],
    ["Setup complete", yes(b.setup_complete)],
  ];
  return (
    <dl className="facts" aria-labelledby="summary-title">
      {rows.map(([term, value]) => (
        <div key={term}>
          <dt>{term}</dt>
          <dd>{value}</dd>
        </div>
      ))}
    </dl>
  );
}

function DailySpend({ days }: { days: Day[] }) {
  const total = days.reduce((sum, d) => sum + d.spent_cents, 0);
  const transactions = days.reduce((sum, d) => sum + d.transactions, 0);
  const today = days[days.length - 1];
  const top = days.reduce<Day | undefined>((best, d) => (d.spent_cents > (best?.spent_cents ?? 0) ? d : best), undefined);
  const first = days[0];
  const summary =
    `Daily spend, ${dayLabel(first!.date)} to ${dayLabel(today!.date)}: ${formatMoney(total)} in all` +
    (top ? `, most on ${dayLabel(top.date)} (${formatMoney(top.spent_cents)})` : ", nothing spent") +
    `; today ${formatMoney(today!.spent_cents)}.`;
  return (
    <>
      <dl className="facts">
        <div>
          <dt>Today</dt>
          <dd>{formatMoney(today!.spent_cents)}</dd>
        </div>
        <div>
          <dt>Last {days.length} days</dt>
          <dd>
            {formatMoney(total)} <span className="muted">({count(transactions, "transaction")})</span>
          </dd>
        </div>
      </dl>
      <Chart days={days} label={summary} />
      <details className="chart-table">
        <summary>Daily spend as a table</summary>
        <table>
          <caption className="muted">Settled per UTC day, oldest first</caption>
          <thead>
            <tr>
              <th scope="col">Day</th>
              <th scope="col">Spent</th>
              <th scope="col">Transactions</th>
            </tr>
          </thead>
          <tbody>
            {days.map((d) => (
              <tr key={d.date}>
                <th scope="row">
                  <time dateTime={d.date}>{dayLabel(d.date)}</time>
                </th>
                <td>{formatMoney(d.spent_cents)}</td>
                <td>{d.transactions}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </details>
    </>
  );
}

const W = 300;
const H = 120;

/**
 * Bars of the days' spend, zero as the baseline (a day where refunds beat captures goes below it).
 * The SVG is one image to assistive technology, named by `label`; the table beside it has the numbers.
 */
function Chart({ days, label }: { days: Day[]; label: string }) {
  const high = Math.max(0, ...days.map((d) => d.spent_cents));
  const low = Math.min(0, ...days.map((d) => d.spent_cents));
  const range = high - low || 1;
  const y = (cents: number) => ((high - cents) / range) * H;
  const slot = W / days.length;
  const gap = Math.min(2, slot * 0.2);
  return (
    <div className="chart">
      <div className="chart-axis muted" aria-hidden="true">
        <span>{formatMoney(high)}</span>
        {low < 0 && <span>{formatMoney(low)}</span>}
      </div>
      <svg role="img" aria-label={label} viewBox={`0 0 ${W} ${H}`} preserveAspectRatio="none">
        {days.map((d, i) =>
          d.spent_cents === 0 ? null : (
            <rect
              key={d.date}
              className={d.spent_cents < 0 ? "bar negative" : "bar"}
              x={i * slot + gap / 2}
              width={slot - gap}
              y={Math.min(y(d.spent_cents), y(0))}
              height={Math.max(Math.abs(y(d.spent_cents) - y(0)), 0.5)}
            >
              <title>{`${dayLabel(d.date)}: ${formatMoney(d.spent_cents)}, ${count(d.transactions, "transaction")}`}</title>
            </rect>
          ),
        )}
        <line className="baseline" x1={0} x2={W} y1={y(0)} y2={y(0)} vectorEffect="non-scaling-stroke" />
      </svg>
      <div className="chart-axis muted" aria-hidden="true">
        <span>{dayLabel(days[0]!.date)}</span>
        <span>{dayLabel(days[days.length - 1]!.date)}</span>
      </div>
    </div>
  );
}
