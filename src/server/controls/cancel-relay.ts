/**
 * WORKERS>1: `POST /v1/cancel` reaches every worker. The worker that got the cancel runs it on its own
 * registry and asks the primary to relay it; the primary sends it to every other live worker, sums their
 * outcomes (a worker that does not answer within RELAY_TIMEOUT_MS counts 0) and answers. Across replicas
 * (several pods) nothing is relayed (docs/operator-controls.md).
 */
import type { Worker } from 'node:cluster';

import { z } from 'zod';

import type { CancelOutcome, CancelRegistry, CancelSelector } from './cancel.js';

const Selector = z.strictObject({
  requestIds: z.array(z.string()).optional(),
  tag: z.string().optional(),
  /** The cancelling tenant: the other workers cancel its requests only. */
  tenant: z.string().optional(),
});
/** Worker → primary: relay this cancel to the others. */
const RelayRequest = z.strictObject({
  type: z.literal('reward:cancel-request'),
  id: z.number(),
  selector: Selector,
});
/** Primary → worker: run this cancel here. */
const RelayAsk = z.strictObject({ type: z.literal('reward:cancel-ask'), id: z.number(), selector: Selector });
/** Worker → primary: what it cancelled. */
const RelayDone = z.strictObject({
  type: z.literal('reward:cancel-done'),
  id: z.number(),
  judgments: z.number(),
  requests: z.number(),
});
/** Primary → the asking worker: the others' sum. */
const RelayResult = z.strictObject({
  type: z.literal('reward:cancel-result'),
  id: z.number(),
  judgments: z.number(),
  requests: z.number(),
  workers: z.number(),
});

/** A worker's answer to a relayed cancel; past it the worker counts 0. */
export const RELAY_TIMEOUT_MS = 2000;

export type RelayOutcome = CancelOutcome & { workers: number };

/** The worker side, handed to `buildApp`: `relay` asks the others, `serve` answers the primary's asks. */
export interface CancelRelay {
  relay(selector: CancelSelector): Promise<RelayOutcome>;
  serve(registry: CancelRegistry): void;
}

const toSelector = (s: z.infer<typeof Selector>): CancelSelector => ({
  requestIds: s.requestIds,
  tag: s.tag,
  tenant: s.tenant,
});

export function createWorkerCancelRelay(): CancelRelay {
  const waiting = new Map<number, (outcome: RelayOutcome) => void>();
  let seq = 0;
  let registry: CancelRegistry | undefined;
  process.on('message', (message: unknown) => {
    const ask = RelayAsk.safeParse(message);
    if (ask.success) {
      const outcome = registry?.cancel(toSelector(ask.data.selector)) ?? { judgments: 0, requests: 0 };
      process.send?.({ type: 'reward:cancel-done', id: ask.data.id, ...outcome });
      return;
    }
    const result = RelayResult.safeParse(message);
    if (result.success) {
      const resolve = waiting.get(result.data.id);
      waiting.delete(result.data.id);
      resolve?.({
        judgments: result.data.judgments,
        requests: result.data.requests,
        workers: result.data.workers,
      });
    }
  });
  return {
    serve: (r) => {
      registry = r;
    },
    relay: (selector) =>
      new Promise<RelayOutcome>((resolve) => {
        const id = ++seq;
        const timer = setTimeout(() => {
          waiting.delete(id);
          resolve({ judgments: 0, requests: 0, workers: 0 });
        }, RELAY_TIMEOUT_MS * 2);
        waiting.set(id, (outcome) => {
          clearTimeout(timer);
          resolve(outcome);
        });
        // Only the keys that are set: the primary's strict schema would refuse an explicit undefined.
        const wire: { requestIds?: string[]; tag?: string; tenant?: string } = {};
        if (selector.requestIds !== undefined) wire.requestIds = [...selector.requestIds];
        if (selector.tag !== undefined) wire.tag = selector.tag;
        if (selector.tenant !== undefined) wire.tenant = selector.tenant;
        process.send?.({ type: 'reward:cancel-request', id, selector: wire });
      }),
  };
}

/**
 * The primary side: returns a message handler for `cluster.ts`; true when it handled the message. `alive`
 * lists the live workers.
 */
export function createPrimaryCancelRelay(alive: () => Worker[]): (from: Worker, message: unknown) => boolean {
  let seq = 0;
  const asks = new Map<number, { pending: Set<number>; sum: CancelOutcome; done: () => void }>();
  return (from, message) => {
    const done = RelayDone.safeParse(message);
    if (done.success) {
      const ask = asks.get(done.data.id);
      if (ask !== undefined && ask.pending.delete(from.id)) {
        ask.sum.judgments += done.data.judgments;
        ask.sum.requests += done.data.requests;
        if (ask.pending.size === 0) ask.done();
      }
      return true;
    }
    const request = RelayRequest.safeParse(message);
    if (!request.success) return false;
    const { id: askedId, selector } = request.data;
    const others = alive().filter((w) => w.id !== from.id);
    const id = ++seq;
    const sum: CancelOutcome = { judgments: 0, requests: 0 };
    const pending = new Set(others.map((w) => w.id));
    const timer = setTimeout(finish, RELAY_TIMEOUT_MS);
    function finish(): void {
      clearTimeout(timer);
      if (!asks.delete(id)) return;
      const answered = others.length - pending.size;
      if (!from.isDead()) {
        from.send({ type: 'reward:cancel-result', id: askedId, ...sum, workers: answered });
      }
    }
    asks.set(id, { pending, sum, done: finish });
    for (const w of others) w.send({ type: 'reward:cancel-ask', id, selector });
    if (pending.size === 0) finish();
    return true;
  };
}
