/**
 * The debate monitor: per round, how much each debate member repeats its previous turn, and what share of
 * the objections raised are substantive (method, assumptions) vs stylistic (wording, format). Drives the
 * `converged` early stop. Pure functions over the transcript.
 */
import { cosine, termVector } from '../text/similarity.js';
import type { RoundMonitor, TranscriptMessage } from './types.js';

export type { DebateMonitor, RoundMonitor } from './types.js';

export type ObjectionKind = 'substantive' | 'stylistic' | 'unclassified';

/**
 * Stems (prefixes, lowercase) that make an objection substantive: it is about what is done or assumed.
 * Checked first, so "the method description is vague" is substantive.
 */
export const SUBSTANTIVE_TERMS: readonly string[] = [
  'method',
  'mechanism',
  'assum',
  'architect',
  'objective',
  'loss',
  'algorithm',
  'model',
  'data',
  'train',
  'evaluat',
  'experiment',
  'component',
  'step',
  'approach',
  'theor',
  'hypothes',
  'baseline',
  'metric',
  'optimi',
  'estimat',
  'sampl',
  'supervis',
  'reward',
  'signal',
  'input',
  'output',
  'scope',
  'differ',
  'missing',
  'omit',
  'lack',
  'contradict',
  'instead',
];
/** Stems that make an objection stylistic when no substantive stem occurs: about how it is written. */
export const STYLISTIC_TERMS: readonly string[] = [
  'word',
  'phras',
  'terminolog',
  'format',
  'grammar',
  'typo',
  'spell',
  'style',
  'clarity',
  'unclear',
  'vague',
  'verbose',
  'length',
  'tone',
  'naming',
  'notation',
  'presentation',
  'readab',
  'punctuat',
  'jargon',
];

function words(text: string): string[] {
  return text
    .toLowerCase()
    .split(/[^a-z]+/)
    .filter((w) => w.length > 0);
}

/**
 * The documented rule: an objection is `substantive` if any word starts with a SUBSTANTIVE_TERMS stem, else
 * `stylistic` if any word starts with a STYLISTIC_TERMS stem, else `unclassified`.
 */
export function classifyObjection(text: string): ObjectionKind {
  const ws = words(text);
  if (ws.some((w) => SUBSTANTIVE_TERMS.some((s) => w.startsWith(s)))) return 'substantive';
  if (ws.some((w) => STYLISTIC_TERMS.some((s) => w.startsWith(s)))) return 'stylistic';
  return 'unclassified';
}

/** Every string inside a structured output, in order: the text of a turn. */
function strings(value: unknown, out: string[]): string[] {
  if (typeof value === 'string') out.push(value);
  else if (Array.isArray(value)) for (const v of value) strings(v, out);
  else if (value !== null && typeof value === 'object') for (const v of Object.values(value)) strings(v, out);
  return out;
}

/** The `objections` strings of an output, when it has that field (the Critic does). */
function objectionsOf(output: unknown): string[] {
  if (output === null || typeof output !== 'object' || !('objections' in output)) return [];
  const list: unknown = output.objections;
  return Array.isArray(list) ? list.filter((x): x is string => typeof x === 'string') : [];
}

/** Similarity in [0, 1] of two turns' texts (cosine of stemmed term vectors). */
export function turnSimilarity(a: unknown, b: unknown): number {
  return cosine(termVector(strings(a, []).join(' ')), termVector(strings(b, []).join(' ')));
}

const round4 = (x: number): number => Math.round(x * 10_000) / 10_000;

/** The monitor's row for `round` of a transcript. */
export function monitorRound(
  transcript: readonly TranscriptMessage[],
  round: number,
  threshold: number,
  tokens: number,
): RoundMonitor {
  const previous = new Map<string, TranscriptMessage>();
  const current: TranscriptMessage[] = [];
  for (const m of transcript) {
    if (m.stage !== 'debate' || m.output === undefined) continue;
    if (m.round === round - 1) previous.set(m.nodeId, m);
    if (m.round === round) current.push(m);
  }
  const similarity: Record<string, number> = {};
  let compared = 0;
  let allRepeat = true;
  const objections = { substantive: 0, stylistic: 0, unclassified: 0 };
  for (const m of current) {
    for (const o of objectionsOf(m.output)) objections[classifyObjection(o)]++;
    const before = previous.get(m.nodeId);
    if (before === undefined) continue;
    const s = turnSimilarity(before.output, m.output);
    similarity[m.nodeId] = round4(s);
    compared++;
    if (s < threshold || before.stance !== m.stance) allRepeat = false;
  }
  const judged = objections.substantive + objections.stylistic;
  return {
    round,
    similarity,
    repeated: compared > 0 && allRepeat,
    objections,
    substantiveShare: judged === 0 ? null : round4(objections.substantive / judged),
    tokens,
  };
}
