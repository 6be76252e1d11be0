/**
 * `--suggest`: the strictness variant that moves each biased member one step toward balance, chosen from
 * the members calibrated on the selection items and checked against the same member's bias on the held-out
 * items (holdout.ts). Pure.
 */
import type { Bias } from '../stats/calibration.js';
import { memberNode, type GraphRun, type MemberCalibration } from './members.js';

export interface Suggestion {
  member: string;
  bias: 'permissive' | 'strict';
  /** The node's strictness in the run (`neutral` when unset) and the variant to try. */
  current: 'lenient' | 'neutral' | 'strict';
  suggested: 'lenient' | 'strict' | 'neutral';
  /**
   * When the run also holds the same node id and role with the suggested strictness in another graph:
   * that member and its FPR/FNR minus this one's (negative = fewer errors of that kind), on the selection items.
   */
  measured: { member: string; fprChange: number | null; fnrChange: number | null } | null;
  /**
   * The same member's bias call on the held-out items (null when there are none to score): `confirmed` when it
   * is the bias the suggestion was made for.
   */
  heldOut: { n: number; bias: Bias | null; confirmed: boolean } | null;
}

type Level = 'lenient' | 'neutral' | 'strict';
const STRICTER: Readonly<Record<Level, Level>> = { lenient: 'neutral', neutral: 'strict', strict: 'strict' };
const LENIENTER: Readonly<Record<Level, Level>> = {
  strict: 'neutral',
  neutral: 'lenient',
  lenient: 'lenient',
};

const diff = (a: number | null, b: number | null): number | null => (a === null || b === null ? null : a - b);

/**
 * One step toward balance: a permissive member gets stricter, a strict one more lenient. `members` are
 * calibrated on the selection items, `heldOut` (same members) on the held-out items.
 */
export function suggestStrictness(
  members: readonly MemberCalibration[],
  runs: readonly GraphRun[],
  heldOut: readonly MemberCalibration[] | null = null,
): Suggestion[] {
  const strictnessOf = (m: MemberCalibration): Level => memberNode(m.member, runs)?.strictness ?? 'neutral';
  const out: Suggestion[] = [];
  for (const m of members) {
    const bias = m.bias.label;
    // Only a bias the data show (the same label `ablate` prints without `(not shown)`).
    if ((bias !== 'permissive' && bias !== 'strict') || m.bias.shown !== true) continue;
    const current = strictnessOf(m);
    const suggested = bias === 'permissive' ? STRICTER[current] : LENIENTER[current];
    if (suggested === current) continue;
    const other = members.find(
      (o) =>
        o.member.graph !== m.member.graph &&
        o.member.nodeId === m.member.nodeId &&
        o.member.role === m.member.role &&
        o.member.round === m.member.round &&
        strictnessOf(o) === suggested,
    );
    const held = heldOut?.find((h) => h.member.key === m.member.key);
    out.push({
      member: m.member.key,
      bias,
      current,
      suggested,
      measured:
        other === undefined
          ? null
          : {
              member: other.member.key,
              fprChange: diff(other.fpr.rate, m.fpr.rate),
              fnrChange: diff(other.fnr.rate, m.fnr.rate),
            },
      heldOut:
        held === undefined ? null : { n: held.n, bias: held.bias.label, confirmed: held.bias.label === bias },
    });
  }
  return out;
}
