/**
 * A weighted fair queue of waiters for a pool of slots (admission's run slots, a backend replica's in-flight
 * slots), shared by flows (the tenants of REWARD_KEYS). Two lanes: every waiting `high` entry goes before
 * every `normal` one (the priority lane). Inside a lane the next slot goes to the flow holding the fewest
 * slots per unit of weight (held / weight), ties to the flow whose first entry waited longest; inside a flow,
 * higher `rank` first, then arrival order.
 *
 * That is max-min fairness of the slots themselves: a flow that arrives while another holds every slot gets
 * each slot that frees until it holds its weighted share (a freshly active flow catches up at once instead of
 * waiting for a round), and a flow with nothing waiting leaves its share to the others (work-conserving). It
 * is the concurrency form of deficit round robin / start-time fair queuing: for slots held for similar
 * times, a flow's share of the throughput is its weight over the weights of the flows with work. Nothing is
 * preempted: a slot is only ever assigned as it frees.
 *
 * A pure data structure (no clock, no I/O); the owner tells it about slots taken without queueing (`hold`)
 * and given back (`release`). Memory: one small record per flow with waiting or held entries, dropped once
 * it has neither; removed entries are dropped lazily (compacted once they outnumber the live ones).
 */

export type QueueLane = 'high' | 'normal';

/** A stream of work with its fair-share weight (> 0). */
export interface Flow {
  readonly name: string;
  readonly weight: number;
}

/** The flow of work that names none (one tenant, or fair queuing switched off): plain priority + FIFO. */
export const SHARED_FLOW: Flow = Object.freeze({ name: '', weight: 1 });

interface Node<T> {
  entry: T;
  rank: number;
  seq: number;
  live: boolean;
}

interface FlowState<T> {
  name: string;
  weight: number;
  held: number;
  lanes: Record<QueueLane, Node<T>[]>;
  waiting: Record<QueueLane, number>;
}

/** Dead nodes tolerated in a heap beyond twice its live ones before it is rebuilt. */
const COMPACT_SLACK = 1024;

const before = <T>(a: Node<T>, b: Node<T>): boolean =>
  a.rank > b.rank || (a.rank === b.rank && a.seq < b.seq);

function push<T>(heap: Node<T>[], node: Node<T>): void {
  heap.push(node);
  let i = heap.length - 1;
  while (i > 0) {
    const parent = (i - 1) >> 1;
    const p = heap[parent];
    if (p === undefined || !before(node, p)) break;
    heap[i] = p;
    i = parent;
  }
  heap[i] = node;
}

function pop<T>(heap: Node<T>[]): Node<T> | undefined {
  const top = heap[0];
  const last = heap.pop();
  if (top === undefined || last === undefined || heap.length === 0) return top;
  let i = 0;
  for (;;) {
    const l = 2 * i + 1;
    let best = last;
    let at = i;
    const left = heap[l];
    const right = heap[l + 1];
    if (left !== undefined && before(left, best)) {
      best = left;
      at = l;
    }
    if (right !== undefined && before(right, best)) {
      best = right;
      at = l + 1;
    }
    if (at === i) break;
    heap[i] = best;
    i = at;
  }
  heap[i] = last;
  return top;
}

/** The first live node of `heap` (dead ones on top are dropped); undefined when none is left. */
function peek<T>(heap: Node<T>[]): Node<T> | undefined {
  for (let top = heap[0]; top !== undefined; top = heap[0]) {
    if (top.live) return top;
    pop(heap);
  }
  return undefined;
}

interface Next<T> {
  state: FlowState<T>;
  head: Node<T>;
  lane: QueueLane;
}

/** Among `flows`, the head of `lane` of the flow holding the fewest slots per weight, oldest on a tie. */
function nextOf<T>(flows: Iterable<FlowState<T>>, lane: QueueLane): Next<T> | undefined {
  let best: Next<T> | undefined;
  for (const s of flows) {
    if (s.waiting[lane] === 0) continue;
    const head = peek(s.lanes[lane]);
    if (head === undefined) continue;
    // held / weight compared without division.
    const mine = s.held * (best?.state.weight ?? 1);
    const theirs = (best?.state.held ?? 0) * s.weight;
    if (best === undefined || mine < theirs || (mine === theirs && head.seq < best.head.seq))
      best = { state: s, head, lane };
  }
  return best;
}

export class FairQueue<T> {
  readonly #flows = new Map<string, FlowState<T>>();
  readonly #where = new Map<T, { state: FlowState<T>; lane: QueueLane; node: Node<T> }>();
  #seq = 0;
  #high = 0;

  /** Entries waiting, every lane and flow. */
  get size(): number {
    return this.#where.size;
  }

  /** Entries waiting in the high lane. */
  get highSize(): number {
    return this.#high;
  }

  /** Entries of flow `name` waiting. */
  sizeOf(name: string): number {
    const s = this.#flows.get(name);
    return s === undefined ? 0 : s.waiting.high + s.waiting.normal;
  }

  /** Slots flow `name` holds. */
  heldBy(name: string): number {
    return this.#flows.get(name)?.held ?? 0;
  }

  /** Every flow with waiting or held entries: its weight, slots held and entries waiting. */
  flows(): Array<{ name: string; weight: number; held: number; waiting: number }> {
    return [...this.#flows.values()].map((s) => ({
      name: s.name,
      weight: s.weight,
      held: s.held,
      waiting: s.waiting.high + s.waiting.normal,
    }));
  }

  /** Queues `entry` (once: adding a queued entry again is a no-op) in its flow's `lane`, by `rank`. */
  add(entry: T, flow: Flow = SHARED_FLOW, lane: QueueLane = 'normal', rank = 0): void {
    if (this.#where.has(entry)) return;
    const state = this.#state(flow);
    const node: Node<T> = { entry, rank, seq: this.#seq++, live: true };
    push(state.lanes[lane], node);
    state.waiting[lane] += 1;
    if (lane === 'high') this.#high += 1;
    this.#where.set(entry, { state, lane, node });
  }

  /** Removes a waiting entry (it gave up); false when it was not waiting. */
  delete(entry: T): boolean {
    const at = this.#where.get(entry);
    if (at === undefined) return false;
    this.#where.delete(entry);
    at.node.live = false;
    this.#unwait(at.state, at.lane);
    const heap = at.state.lanes[at.lane];
    if (heap.length > 2 * at.state.waiting[at.lane] + COMPACT_SLACK) {
      const live = heap.filter((n) => n.live);
      heap.length = 0;
      for (const n of live) push(heap, n);
    }
    this.#forgetIfIdle(at.state);
    return true;
  }

  /** The entry `shift` would hand the next slot to, left waiting; undefined when nothing waits. */
  peek(): T | undefined {
    return this.#next()?.head.entry;
  }

  /**
   * Hands the next free slot to the next entry (high lane first; the flow with the fewest held slots per
   * weight; its highest rank, oldest first) and counts the slot as held by that entry's flow. Undefined when
   * nothing waits.
   */
  shift(): T | undefined {
    const next = this.#next();
    if (next === undefined) return undefined;
    const { state, head, lane } = next;
    pop(state.lanes[lane]);
    this.#where.delete(head.entry);
    head.live = false;
    this.#unwait(state, lane);
    state.held += 1;
    return head.entry;
  }

  /** The next entry, its flow and lane (the order `shift` serves in). */
  #next(): Next<T> | undefined {
    return nextOf(this.#flows.values(), this.#high > 0 ? 'high' : 'normal');
  }

  /** A slot `flow` took without queueing (a free slot and nobody waiting). */
  hold(flow: Flow = SHARED_FLOW): void {
    this.#state(flow).held += 1;
  }

  /** A slot held by flow `name` is free again. */
  release(name: string = SHARED_FLOW.name): void {
    const s = this.#flows.get(name);
    if (s === undefined || s.held === 0) return;
    s.held -= 1;
    this.#forgetIfIdle(s);
  }

  #state(flow: Flow): FlowState<T> {
    let s = this.#flows.get(flow.name);
    if (s === undefined) {
      s = {
        name: flow.name,
        weight: 1,
        held: 0,
        lanes: { high: [], normal: [] },
        waiting: { high: 0, normal: 0 },
      };
      this.#flows.set(flow.name, s);
    }
    // The latest weight counts (a reloaded keys file changes it for the flow's next entries and slots).
    if (flow.weight > 0 && Number.isFinite(flow.weight)) s.weight = flow.weight;
    return s;
  }

  #unwait(s: FlowState<T>, lane: QueueLane): void {
    s.waiting[lane] -= 1;
    if (lane === 'high') this.#high -= 1;
  }

  #forgetIfIdle(s: FlowState<T>): void {
    if (s.held === 0 && s.waiting.high === 0 && s.waiting.normal === 0) this.#flows.delete(s.name);
  }
}
