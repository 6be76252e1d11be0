/**
 * Statistics of the agents inside a graph: each stance-bearing node's calibration, Fleiss' κ among
 * parallel same-role members, and the debate dynamics of multi-round graphs. Pure, from the records.
 */
import type { CompiledGraph } from '../../judge/graph.js';
import type { DatasetItem } from '../dataset.js';
import type { ItemRecord } from '../records.js';
import { fleissKappa } from '../stats/agreement.js';
import { reviewerCalibration } from '../stats/calibration.js';
import type { EstimateOptions } from '../stats/clustered.js';
import { increment, sumConfusions, total } from '../stats/confusion.js';
import { biasClusters, type ItemSet } from '../tallies.js';
import type { Agreement, DebateDynamics, NodeCalibration, Switches } from '../types.js';

/** The stance the label calls right. */
export const STANCE_OF_LABEL = (label: 0 | 1): 'match' | 'no_match' => (label === 1 ? 'match' : 'no_match');

function lastStances(record: ItemRecord): Map<string, ItemRecord['messages'][number]> {
  const last = new Map<string, ItemRecord['messages'][number]>();
  for (const m of record.messages) if (m.stance !== null) last.set(m.nodeId, m);
  return last;
}

/** Each stance-bearing node's final stance against the label (ok judgments), bias on hard negatives. */
export function nodeCalibration(
  graph: CompiledGraph,
  set: ItemSet,
  records: readonly ItemRecord[],
  options: EstimateOptions,
): NodeCalibration[] {
  const out: NodeCalibration[] = [];
  const finals = records.map((record) => (record.status === 'ok' ? lastStances(record) : undefined));
  for (const r of [...graph.debate, ...graph.final]) {
    if (!r.hasStance) continue;
    const clusters = biasClusters(set, (i) => {
      const stance = finals[i]?.get(r.node.id)?.stance;
      return stance == null ? null : stance === 'match' ? 1 : 0;
    });
    const confusion = sumConfusions(clusters.map((c) => c.all));
    out.push({
      nodeId: r.node.id,
      role: r.role.name,
      n: total(confusion),
      confusion,
      ...reviewerCalibration(clusters, { ...options, hardNegatives: set.hardNegatives }),
    });
  }
  return out;
}

/** Groups of ≥ 2 same-role debate nodes that do not read each other in the same round (parallel members). */
export function parallelGroups(graph: CompiledGraph): { role: string; nodes: string[] }[] {
  const byRole = new Map<string, { id: string; deps: readonly string[] }[]>();
  for (const r of graph.debate) {
    if (!r.hasStance) continue;
    const list = byRole.get(r.role.name) ?? [];
    list.push({ id: r.node.id, deps: r.deps });
    byRole.set(r.role.name, list);
  }
  const groups: { role: string; nodes: string[] }[] = [];
  for (const [role, members] of byRole) {
    const ids = new Set(members.map((m) => m.id));
    const parallel = members.filter((m) => !m.deps.some((d) => ids.has(d))).map((m) => m.id);
    if (parallel.length >= 2) groups.push({ role, nodes: parallel });
  }
  return groups;
}

export function agreement(graph: CompiledGraph, records: readonly ItemRecord[]): Agreement[] {
  return parallelGroups(graph).map(({ role, nodes }) => {
    const rows: number[][] = [];
    for (const record of records) {
      if (record.status !== 'ok') continue;
      const stances = nodes.map(
        (id) => record.messages.find((m) => m.nodeId === id && m.round === 1 && m.stance !== null)?.stance,
      );
      if (stances.some((s) => s === undefined || s === null)) continue;
      const match = stances.filter((s) => s === 'match').length;
      rows.push([match, nodes.length - match]);
    }
    return { role, nodes, subjects: rows.length, kappa: fleissKappa(rows) };
  });
}

export function dynamics(
  graph: CompiledGraph,
  items: readonly DatasetItem[],
  records: readonly ItemRecord[],
): DebateDynamics {
  const roundsUsed: Record<string, number> = {};
  const stopReasons: Record<string, number> = {};
  const debateIds = graph.debate.filter((r) => r.hasStance).map((r) => r.node.id);
  const rounds = graph.spec.rounds;
  const perRound = Array.from({ length: rounds }, (_, i) => ({
    round: i + 1,
    nodes: Object.fromEntries(debateIds.map((id) => [id, { match: 0, no_match: 0, none: 0 }])),
  }));
  const switches: Switches[] = Array.from({ length: rounds - 1 }, (_, i) => ({
    from: i + 1,
    to: i + 2,
    matchToNoMatch: 0,
    noMatchToMatch: 0,
    unchanged: 0,
  }));
  let judgments = 0;
  let trajectories = 0;
  let harmful = 0;
  let helpful = 0;
  records.forEach((record, i) => {
    const item = items[i];
    if (item === undefined || record.status !== 'ok') return;
    judgments++;
    increment(roundsUsed, String(record.rounds));
    increment(stopReasons, record.stopReason);
    const right = STANCE_OF_LABEL(item.label);
    for (const id of debateIds) {
      const byRound = new Map<number, 'match' | 'no_match'>();
      for (const m of record.messages) {
        if (m.nodeId === id && m.stage === 'debate' && m.stance !== null) byRound.set(m.round, m.stance);
      }
      for (let r = 1; r <= record.rounds && r <= rounds; r++) {
        const counts = perRound[r - 1]?.nodes[id];
        if (counts === undefined) continue;
        const stance = byRound.get(r);
        if (stance === undefined) counts.none++;
        else counts[stance]++;
        const next = byRound.get(r + 1);
        const sw = switches[r - 1];
        if (sw === undefined || stance === undefined || next === undefined) continue;
        if (stance === next) sw.unchanged++;
        else if (stance === 'match') sw.matchToNoMatch++;
        else sw.noMatchToMatch++;
      }
      const seen = [...byRound.keys()].sort((a, b) => a - b);
      const first = seen[0];
      const final = seen.at(-1);
      if (first === undefined || final === undefined) continue;
      trajectories++;
      const wasRight = byRound.get(first) === right;
      const endsRight = byRound.get(final) === right;
      if (wasRight && !endsRight) harmful++;
      if (!wasRight && endsRight) helpful++;
    }
  });
  return { judgments, roundsUsed, stopReasons, perRound, switches, trajectories, harmful, helpful };
}
