/**
 * A request's flights (judge-service.ts): the ones it owns started — through the shared tier when there is
 * one, else computed here in a run slot, counted and transcribed — and the others joined, each settling its
 * item's slot when it lands.
 */
import { randomUUID } from 'node:crypto';
import { runJudgment } from '../../judge/run.js';
import type { Ticket } from '../admission/admission.js';
import type { FlightDeadline } from './flight-deadlines.js';
import { toTranscriptRecord } from '../observe/transcripts.js';
import type { Service, JudgeItem, JudgeRequest, StoredJudgment } from './judge-types.js';
import { shapeOf } from './judge-admission.js';
import { failedItem } from './judge-failures.js';
import type { Looked } from './judge-lookup.js';

/**
 * One flight: through the shared tier when there is one (`shared-flights.ts`), else computed here.
 * `miss` counts the judgments this process computes.
 */
async function compute(
  svc: Service,
  key: string,
  item: JudgeItem,
  signal: AbortSignal,
  deadline: FlightDeadline,
  admitted: Ticket | undefined,
  owner: Pick<JudgeRequest, 'requestId' | 'tenant'>,
): Promise<StoredJudgment> {
  const here = (ticket: Ticket): Promise<StoredJudgment> => {
    svc.lookups.miss.inc();
    return computeHere(svc, key, item, signal, deadline, ticket, owner.requestId);
  };
  const { sharedFlights } = svc;
  if (sharedFlights === undefined)
    return here(admitted ?? svc.options.admission.admit(shapeOf(item), 'normal', owner.tenant));
  const flight = await sharedFlights.run(key, shapeOf(item), signal, deadline, admitted, here, owner.tenant);
  if (flight.elsewhere) svc.fromElsewhere.add(flight.stored);
  return flight.stored;
}

/** Wait for a run slot, run, count, write the transcript. */
function computeHere(
  svc: Service,
  key: string,
  item: JudgeItem,
  signal: AbortSignal,
  deadline: FlightDeadline,
  ticket: Ticket,
  requestId: string | undefined,
): Promise<StoredJudgment> {
  const { router, metrics, admission, transcripts } = svc.options;
  return admission.run(
    ticket,
    signal,
    () =>
      runJudgment(item.graph.graph, item.input, {
        router,
        // Read again by the engine whenever it needs it: a joining retry moves it later.
        get deadline() {
          return deadline.at;
        },
        signal,
        // Its receivers are charged for its calls, which wait in the flow of a tenant still waiting for it.
        observer: svc.payers.observer(key, svc.observer),
        get flow() {
          return svc.payers.flow(key, ticket.flow);
        },
        limits: svc.options.candidateLimits,
        reasoningFormat: svc.options.reasoningFormat,
        urgent: ticket.lane === 'high',
        prepared: item.prepared,
      }),
    async (judgment) => {
      metrics.observeJudgment(item.graph.label, judgment);
      const stored: StoredJudgment = { id: randomUUID(), judgment };
      svc.options.onComputed?.(item, stored);
      if (transcripts !== undefined)
        await transcripts.write(
          toTranscriptRecord(stored.id, judgment, item.input, item.graph.label, router.name, requestId),
        );
      return stored;
    },
  );
}

/**
 * Starts the flights the request owns and joins the others, each settling its item's slot in
 * `looked.results` when it lands (`deadline` absolute, `startedAt` epoch ms).
 */
export function startFlights(
  svc: Service,
  request: JudgeRequest,
  looked: Looked,
  deadline: number,
  signal: AbortSignal,
  startedAt: number,
): Promise<void>[] {
  const { cache, deadlines } = svc;
  const { results, starters, elsewhere } = looked;
  const lane = request.priority ?? 'normal';
  const waits: Promise<void>[] = [];
  for (const [i, item] of request.items.entries()) {
    if (results[i] !== undefined) continue;
    const key = looked.keys[i] ?? '';
    const own = starters.get(key) === i;
    let flight: Promise<StoredJudgment> | undefined;
    if (own) {
      // Waited for elsewhere: not in this server's backlog until it is computed here (`compute` admits it
      // then, if the holder gives it up).
      const ticket =
        elsewhere?.running.has(key) === true
          ? undefined
          : svc.options.admission.admit(shapeOf(item), lane, request.tenant);
      svc.payers.enter(key, request.tenant, signal, true);
      flight = cache.run(
        key,
        (s) =>
          deadlines
            .run(key, deadline, (d) => compute(svc, key, item, s, d, ticket, request))
            .finally(() => svc.payers.settle(key)),
        signal,
      );
    } else {
      flight = cache.join(key, signal);
      if (flight !== undefined) svc.payers.enter(key, request.tenant, signal, false);
      // The flight now also answers this request: it may run until this request's deadline.
      if (flight !== undefined) deadlines.extend(key, deadline);
    }
    // No flight to join (e.g. the request was already aborted and let go of it): `complete` answers the
    // empty slot as a failure, never a reward.
    if (flight === undefined) continue;
    waits.push(
      flight.then(
        (stored) => {
          results[i] = {
            judgmentId: stored.id,
            judgment: stored.judgment,
            cached: !own || svc.fromElsewhere.has(stored),
          };
        },
        (err: unknown) => {
          results[i] = failedItem(svc, item, err, signal, startedAt);
        },
      ),
    );
  }
  return waits;
}
