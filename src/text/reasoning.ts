/**
 * The final answer of a reasoning model's completion (REASONING_FORMAT, REASONING_MARKERS). A leaf: pure
 * string functions over the format table (src/text/reasoning-formats.ts: every vLLM and SGLang
 * `--reasoning-parser` name, each with its family of markers and its source).
 *
 * Markers are matched on the folded copy (src/text/fold.ts: `＜ｔｈｉｎｋ＞`, `<THINK>` and a Cyrillic `і` are
 * all `<think>`); the answer is cut from the author's text.
 *
 * - Tag families (`<think>…</think>`, `[THINK]…[/THINK]`, `◁think▷…◁/think▷`, `<seed:think>…`, `<|START_THINKING|>…`,
 *   `<|begin_of_thought|>…`, …): the answer is the text after the last closed trace. A closing marker
 *   alone counts (the chat template opened the trace in the prompt: Qwen3, DeepSeek-R1). When an answer
 *   block follows (`<answer>…</answer>`, `<response>…`, `<|begin_of_solution|>…`, `<|START_RESPONSE|>…`), the
 *   last one is the answer; an answer block counts only after a trace or at the start of the text. A trace
 *   opened and never closed is `truncated`. Markers a sentence can hold (`<think>`, `<answer>`) count as an
 *   opener only at the start of a line; any marker set inside a sentence or quoted is a mention, not a
 *   marker (src/text/markers.ts): "the policy emits <think> tags" stays text.
 * - `harmony` (gpt-oss): `<|channel|>analysis<|message|>…<|end|>…<|channel|>final<|message|>…`. The answer is
 *   the body of the last `final` message (its `<|return|>` may be missing). A message after it that never
 *   ended, or no `final` message and a last message that never ended, is `truncated`. The decode with
 *   special tokens skipped (`analysis…assistantfinal…`) is recognised when the text starts with `analysis`.
 * - `muse_glimmer`: `to=self<|message|>…<|eom|>` is the trace, the last `to=user<|message|>…` the answer.
 * - `auto` (the default): harmony and glimmer channels, then every tag family whose markers cannot occur
 *   in prose (all but granite's "Here is my thought process:") on what is left.
 * - `none`: the text as it is.
 *
 * Run it on normalised text (src/text/normalize.ts), so `<thi\u200Bnk>` is a tag.
 */
import { fold, foldText, type Folded } from './fold.js';
import { atLineStart, isMention, literal } from './markers.js';
import { codePoints } from './normalize.js';
import {
  FAMILIES,
  familyOf,
  type Family,
  type MarkerPair,
  type ReasoningFormatName,
} from './reasoning-formats.js';

export { REASONING_FORMATS, type MarkerPair, type ReasoningFormatName } from './reasoning-formats.js';

/** REASONING_FORMAT with the pairs REASONING_MARKERS adds. */
export interface ReasoningSpec {
  format: ReasoningFormatName;
  markers: readonly MarkerPair[];
}

/** A format name, or a name with custom marker pairs. */
export type ReasoningFormat = ReasoningFormatName | ReasoningSpec;

export type Extraction =
  /** `reasoningChars`: code points before the answer (the trace with its markers); 0 without a trace. */
  | { kind: 'answer'; answer: string; reasoningChars: number }
  /** A trace that never closed; `reasoningChars` counts the whole text. */
  | { kind: 'truncated'; reasoningChars: number };

/** Where the answer is, in offsets of the text given (or a trace that never closed). */
export type AnswerSpan = { kind: 'answer'; start: number; end: number } | { kind: 'truncated' };

const specOf = (f: ReasoningFormat): ReasoningSpec =>
  typeof f === 'string' ? { format: f, markers: [] } : f;

/** A stable string for a format and its custom markers (for keys and logs). */
export function reasoningKey(format: ReasoningFormat): string {
  const s = specOf(format);
  return s.markers.length === 0
    ? s.format
    : `${s.format}+${s.markers.map((m) => `${m.open},${m.close}`).join(';')}`;
}

// ---------------------------------------------------------------------------------------------------------
// Tag families: one regular expression per format, one pass over the folded text.

type Role = 'open' | 'close' | 'answer-open' | 'answer-close';

interface Group {
  roles: Set<Role>;
  lineStart: boolean;
}

interface Scanner {
  re: RegExp;
  groups: Group[];
  /** The openers alone, anchored at the end (for a prompt that opens the trace). */
  openAtEnd: RegExp | undefined;
}

const THINK_WORD = String.raw`(?:think|thinking|reasoning)(?::[^\s<>]{1,32})?`;
const PATTERNS: ReadonlyMap<string, string> = new Map([
  ['<think>', String.raw`<\s*${THINK_WORD}\s*>`],
  ['</think>', String.raw`<\s*/\s*${THINK_WORD}\s*>`],
  ['Here is my thought process:', "here(?: i|')s my thought process:"],
  ['Here is my response:', "here(?: i|')s my response:"],
]);
const patternOf = (marker: string): string => PATTERNS.get(marker) ?? literal(marker);

function tagFamilies(spec: ReasoningSpec): Family[] {
  const family = familyOf(spec.format);
  const base =
    family === 'none'
      ? []
      : FAMILIES.filter((f) => f.kind === 'tags' && (family === 'all' ? f.prose !== true : f.id === family));
  const custom = spec.markers.map((m): Family => ({
    id: 'think',
    kind: 'tags',
    trace: m,
    lineStart: /^<[a-z]/i.test(m.open),
    source: '',
  }));
  return [...base, ...custom];
}

const scanners = new Map<string, Scanner | undefined>();

function scannerOf(spec: ReasoningSpec): Scanner | undefined {
  const key = reasoningKey(spec);
  if (scanners.has(key)) return scanners.get(key);
  const sources = new Map<string, Group>();
  const add = (marker: string, role: Role, lineStart: boolean): void => {
    const source = patternOf(marker);
    const group = sources.get(source) ?? { roles: new Set<Role>(), lineStart };
    group.roles.add(role);
    sources.set(source, group);
  };
  for (const f of tagFamilies(spec)) {
    if (f.trace !== undefined) {
      add(f.trace.open, 'open', f.lineStart);
      add(f.trace.close, 'close', f.lineStart);
    }
    for (const a of f.answers ?? []) {
      add(a.open, 'answer-open', f.lineStart);
      add(a.close, 'answer-close', f.lineStart);
    }
  }
  // Longer alternatives first, so a marker is never read as a shorter one it starts with.
  const ordered = [...sources].sort(([a], [b]) => b.length - a.length);
  const scanner =
    ordered.length === 0
      ? undefined
      : {
          re: new RegExp(ordered.map(([s]) => `(${s})`).join('|'), 'g'),
          groups: ordered.map(([, g]) => g),
          openAtEnd: openersAtEnd(sources),
        };
  scanners.set(key, scanner);
  return scanner;
}

function openersAtEnd(sources: ReadonlyMap<string, Group>): RegExp | undefined {
  const opens = [...sources].filter(([, g]) => g.roles.has('open')).map(([s]) => s);
  return opens.length === 0 ? undefined : new RegExp(`(?:${opens.join('|')})\\s*$`);
}

/** Whether an opener (or answer opener) at folded `[s, e)` is a marker and not a mention. */
const opens = (t: string, s: number, e: number, g: Group, floor: number): boolean =>
  g.lineStart ? atLineStart(t, s, floor) : !isMention(t, s, e);

/** The tag-family split of `f` (offsets in `f.source`). */
function scanTags(f: Folded, scanner: Scanner): AnswerSpan {
  const t = f.text;
  let state: 'text' | 'trace' | 'answer' = 'text';
  let answerAt = 0;
  let answerOpen = 0;
  let block: [number, number] | undefined;
  scanner.re.lastIndex = 0;
  for (const m of t.matchAll(scanner.re)) {
    const g = scanner.groups[m.slice(1).findIndex((x) => x !== undefined)];
    if (g === undefined) continue;
    const s = m.index;
    const e = s + m[0].length;
    if (state === 'trace') {
      if (g.roles.has('close')) {
        state = 'text';
        answerAt = e;
        block = undefined;
      }
    } else if (state === 'answer') {
      if (g.roles.has('answer-close')) {
        block = [answerOpen, s];
        state = 'text';
      }
    } else if (g.roles.has('open') && opens(t, s, e, g, answerAt)) {
      state = 'trace';
    } else if (g.roles.has('close') && !isMention(t, s, e)) {
      // A closing marker alone: the template opened the trace in the prompt.
      answerAt = e;
      block = undefined;
    } else if (
      g.roles.has('answer-open') &&
      opens(t, s, e, g, answerAt) &&
      (answerAt > 0 || t.slice(0, s).trim() === '')
    ) {
      state = 'answer';
      answerOpen = e;
    }
  }
  if (state === 'trace') return { kind: 'truncated' };
  if (state === 'answer') block = [answerOpen, t.length];
  const [start, end] = block ?? [answerAt, t.length];
  return { kind: 'answer', start: f.sourceAt(start), end: f.sourceAt(end) };
}

// ---------------------------------------------------------------------------------------------------------
// Channel formats.

const CHANNEL = '<|channel|>';
const MESSAGE = '<|message|>';
const ENDS = ['<|end|>', '<|return|>', '<|call|>', '<|start|>'];
const SKIPPED_FINAL = 'assistantfinal';

interface Message {
  channel: string;
  /** Folded offset of the body. */
  bodyAt: number;
  bodyEnd: number;
  ended: boolean;
}

/** The harmony messages of folded `text`: one per `<|channel|>`, each up to its end token or the next channel. */
function harmonyMessages(text: string): Message[] {
  const out: Message[] = [];
  let at = text.indexOf(CHANNEL);
  while (at >= 0) {
    const next = text.indexOf(CHANNEL, at + CHANNEL.length);
    const segmentEnd = next < 0 ? text.length : next;
    const m = text.indexOf(MESSAGE, at + CHANNEL.length);
    const headerEnd = m < 0 || m > segmentEnd ? segmentEnd : m;
    const bodyAt = m < 0 || m > segmentEnd ? segmentEnd : m + MESSAGE.length;
    let bodyEnd = segmentEnd;
    let ended = false;
    for (const end of ENDS) {
      const e = text.indexOf(end, bodyAt);
      if (e >= 0 && e < bodyEnd) {
        bodyEnd = e;
        ended = true;
      }
    }
    const channel =
      text
        .slice(at + CHANNEL.length, headerEnd)
        .trim()
        .split(/\s/)[0] ?? '';
    out.push({ channel, bodyAt, bodyEnd, ended });
    at = next;
  }
  return out;
}

function scanHarmony(f: Folded): AnswerSpan {
  const t = f.text;
  const whole: AnswerSpan = { kind: 'answer', start: 0, end: f.source.length };
  if (!t.includes(CHANNEL)) {
    const marker = t.lastIndexOf(SKIPPED_FINAL);
    if (marker < 0 || !/^\s*analysis/.test(t)) return whole;
    return { kind: 'answer', start: f.sourceAt(marker + SKIPPED_FINAL.length), end: f.source.length };
  }
  const messages = harmonyMessages(t);
  const final = messages.findLastIndex((m) => m.channel === 'final');
  const last = messages[messages.length - 1];
  if (final < 0) {
    // No final answer: a message cut off is a truncated trace; else the answer is what follows the last end.
    if (last === undefined || !last.ended) return { kind: 'truncated' };
    let after = last.bodyEnd;
    for (const end of ENDS) if (t.startsWith(end, after)) after += end.length;
    return { kind: 'answer', start: f.sourceAt(after), end: f.source.length };
  }
  if (messages.slice(final + 1).some((m) => !m.ended)) return { kind: 'truncated' };
  const chosen = messages[final];
  if (chosen === undefined) return { kind: 'truncated' };
  return { kind: 'answer', start: f.sourceAt(chosen.bodyAt), end: f.sourceAt(chosen.bodyEnd) };
}

const GLIMMER_HEADER = /to=([^\s<]+)<\|message\|>/g;
const GLIMMER_ENDS = ['<|eom|>', '<|eot|>'];

function scanGlimmer(f: Folded): AnswerSpan {
  const t = f.text;
  const headers = [...t.matchAll(GLIMMER_HEADER)];
  if (headers.length === 0) return { kind: 'answer', start: 0, end: f.source.length };
  let answer: [number, number] | undefined;
  let open = false;
  let after = 0;
  headers.forEach((h, i) => {
    const bodyAt = h.index + h[0].length;
    const next = headers[i + 1]?.index ?? t.length;
    let bodyEnd = next;
    let ended = false;
    for (const end of GLIMMER_ENDS) {
      const e = t.indexOf(end, bodyAt);
      if (e >= 0 && e < bodyEnd) {
        bodyEnd = e;
        ended = true;
      }
    }
    if (h[1] === 'user') answer = [bodyAt, bodyEnd];
    else if (h[1] === 'self') open = !ended;
    after = ended ? bodyEnd + 7 : bodyEnd;
  });
  if (answer !== undefined)
    return { kind: 'answer', start: f.sourceAt(answer[0]), end: f.sourceAt(answer[1]) };
  if (open) return { kind: 'truncated' };
  return { kind: 'answer', start: f.sourceAt(Math.min(after, t.length)), end: f.source.length };
}

// ---------------------------------------------------------------------------------------------------------

/** Composes a span found in a slice starting at `base` back into the whole text's offsets. */
const shift = (span: AnswerSpan, base: number): AnswerSpan =>
  span.kind === 'answer' ? { kind: 'answer', start: base + span.start, end: base + span.end } : span;

/** Where the answer of `f` is in REASONING_FORMAT `format` (offsets in `f.source`). */
export function answerSpan(f: Folded, format: ReasoningFormat): AnswerSpan {
  const spec = specOf(format);
  const family = familyOf(spec.format);
  let span: AnswerSpan = { kind: 'answer', start: 0, end: f.source.length };
  if (family === 'all' || family === 'harmony') span = scanHarmony(f);
  if (span.kind === 'answer' && (family === 'all' || family === 'glimmer'))
    span = shift(scanGlimmer(f.slice(span.start, span.end)), span.start);
  const scanner = scannerOf(spec);
  if (span.kind === 'answer' && scanner !== undefined)
    span = shift(scanTags(f.slice(span.start, span.end), scanner), span.start);
  return span;
}

/** Extracts the final answer of `text` in `format`. */
export function extractAnswer(text: string | Folded, format: ReasoningFormat): Extraction {
  const f = typeof text === 'string' ? foldText(text) : text;
  const span = answerSpan(f, format);
  if (span.kind === 'truncated') return { kind: 'truncated', reasoningChars: codePoints(f.source) };
  return {
    kind: 'answer',
    answer: f.source.slice(span.start, span.end),
    reasoningChars: codePoints(f.source.slice(0, span.start)),
  };
}

const HARMONY_OPEN_AT_END = /<\|channel\|>\s*(?:analysis|commentary)\b[^<]*<\|message\|>\s*$/;
const GLIMMER_OPEN_AT_END = /to=self<\|message\|>\s*$/;
/** How much of a prompt's end is read for an opener. */
const PROMPT_TAIL = 256;

/**
 * The trace opener a chat-templated prompt ends with (Qwen3 and DeepSeek-R1 templates put `<think>` in the
 * generation prompt; Solar, Kimi K3 and Inkling theirs; a harmony prompt may end inside an analysis
 * message), as the prompt writes it, or undefined. A trainer adapter prefixes the rollout with it, so a
 * rollout cut off inside that trace is `truncated`, not judged.
 */
export function traceOpenedBy(prompt: string, format: ReasoningFormat): string | undefined {
  const spec = specOf(format);
  const family = familyOf(spec.format);
  if (family === 'none') return undefined;
  const tail = foldText(prompt.slice(-PROMPT_TAIL));
  const candidates: RegExp[] = [];
  if (family === 'all' || family === 'harmony') candidates.push(HARMONY_OPEN_AT_END);
  if (family === 'all' || family === 'glimmer') candidates.push(GLIMMER_OPEN_AT_END);
  const opener = scannerOf(spec)?.openAtEnd;
  if (opener !== undefined) candidates.push(opener);
  let best: number | undefined;
  for (const re of candidates) {
    const m = re.exec(tail.text);
    if (m !== null && (best === undefined || m.index < best)) best = m.index;
  }
  return best === undefined ? undefined : tail.source.slice(tail.sourceAt(best));
}

/** Every marker of `format` (folded), for docs and tests: what `auto` and each name recognise. */
export function markersOf(format: ReasoningFormat): string[] {
  return tagFamilies(specOf(format)).flatMap((f) => [
    ...(f.trace === undefined ? [] : [fold(f.trace.open), fold(f.trace.close)]),
    ...(f.answers ?? []).flatMap((a) => [fold(a.open), fold(a.close)]),
  ]);
}
