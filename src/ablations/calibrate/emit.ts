/**
 * The planned committee as a runnable graph (`OUT/committee.graph.json`): one node per seat, each the
 * measured node's settings (role, model, sampling, focus, strictness…) under a fresh unique id, decided by
 * majority (ties → no_match, as the plan scored it), and the `npm run ablate` command that evaluates it on the
 * held-out items. Pure but for the compile check.
 */
import type { GraphNode, GraphSpecInput } from '../../judge/graph.js';
import { compileSpec } from '../../judge/presets.js';
import { memberNode, type GraphRun, type VoteTable } from './members.js';

export const COMMITTEE_GRAPH_NAME = 'calibrated-committee';
export const COMMITTEE_GRAPH_FILE = 'committee.graph.json';
export const HOLDOUT_FILE = 'holdout.jsonl';
/** The ablation output folder the printed command writes to, under OUT. */
export const COMMITTEE_EVAL_DIR = 'committee-eval';

/** One node of the emitted graph and the calibrate member it copies. */
export interface CommitteeSeat {
  id: string;
  member: string;
}

export interface CommitteeGraph {
  spec: GraphSpecInput;
  seats: CommitteeSeat[];
}

/** The measured node behind a member key, or null (not a member of a run, or not a node). */
function nodeOf(key: string, table: VoteTable, runs: readonly GraphRun[]): GraphNode | null {
  const member = table.members.find((m) => m.key === key);
  return member === undefined ? null : (memberNode(member, runs) ?? null);
}

/** A seat's node: the member's settings without its same-round inputs, stage and weight (majority ignores it). */
function seatNode(node: GraphNode, id: string): GraphNode {
  const { id: _id, sees: _sees, stage: _stage, weight: _weight, ...settings } = node;
  return { id, ...settings };
}

function uniqueId(base: string, taken: Set<string>): string {
  let id = base;
  for (let k = 2; taken.has(id); k++) id = `${base.slice(0, 36)}_${k}`;
  taken.add(id);
  return id;
}

/** The graph of a majority committee of measured members; null when a key names no measured node. */
export function committeeGraph(
  keys: readonly string[],
  table: VoteTable,
  runs: readonly GraphRun[],
  description: string,
): CommitteeGraph | null {
  const taken = new Set<string>();
  const nodes: GraphNode[] = [];
  const seats: CommitteeSeat[] = [];
  for (const key of keys) {
    const node = nodeOf(key, table, runs);
    if (node === null) return null;
    const id = uniqueId(node.id, taken);
    nodes.push(seatNode(node, id));
    seats.push({ id, member: key });
  }
  const spec: GraphSpecInput = {
    name: COMMITTEE_GRAPH_NAME,
    description: description.slice(0, 500),
    decision: { rule: 'majority' },
    nodes,
  };
  return { spec, seats };
}

/**
 * Whether a committee compiles (the engine refuses identical parallel members, e.g. the same node measured
 * in two graphs): checked pair by pair, which is what the compiler checks once ids are unique; cached.
 */
export function compilableCommittees(
  table: VoteTable,
  runs: readonly GraphRun[],
): (picked: readonly { key: string }[]) => boolean {
  const cache = new Map<string, boolean>();
  const pairOk = (a: string, b: string): boolean => {
    const id = `${a}\u0000${b}`;
    let ok = cache.get(id);
    if (ok === undefined) {
      const graph = committeeGraph([a, b], table, runs, '');
      ok = graph !== null && compiles(graph.spec);
      cache.set(id, ok);
    }
    return ok;
  };
  return (picked) => picked.every((a, i) => picked.slice(i + 1).every((b) => pairOk(a.key, b.key)));
}

function compiles(spec: GraphSpecInput): boolean {
  try {
    compileSpec(spec);
    return true;
  } catch {
    return false;
  }
}

/** A word as a POSIX shell reads it (single-quoted unless plainly safe). */
export function shellWord(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}

/** The command that runs the emitted graph over the held-out items, alone (add graphs to compare). */
export function ablateCommand(paths: { dataset: string; graph: string; out: string }, seed: number): string {
  return [
    'npm run ablate --',
    `--dataset ${shellWord(paths.dataset)}`,
    `--graphs ${shellWord(paths.graph)}`,
    `--out ${shellWord(paths.out)}`,
    `--seed ${seed}`,
    '--reference none --no-baseline',
  ].join(' ');
}
