/**
 * Summarises a V8 `.cpuprofile` (from `node --cpu-prof`): self time per function, inclusive time per
 * function, and self time per category (our code by file, each npm package, Node internals, GC).
 *
 *   npx tsx bench/profile.ts PATH.cpuprofile [--top 25]
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

export interface Row {
  name: string;
  where: string;
  category: string;
  ms: number;
  /** Share of busy (non-idle) time. */
  share: number;
}

export interface ProfileSummary {
  totalMs: number;
  idleMs: number;
  busyMs: number;
  self: Row[];
  inclusive: Row[];
  /** Inclusive time of this project's own functions (dist/ or src/): the semantic units of the hot path. */
  ours: Row[];
  categories: Array<{ category: string; ms: number; share: number }>;
}

const SPECIAL = new Set(['(idle)', '(program)', '(garbage collector)', '(root)']);

/** Where a frame comes from: our code (file), an npm package, Node internals, or a V8 pseudo-frame. */
export function categoryOf(frame: CallFrame): string {
  if (SPECIAL.has(frame.functionName) && frame.url === '') return frame.functionName;
  const url = frame.url;
  if (url.startsWith('node:')) return 'node internals';
  const nm = url.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + '/node_modules/'.length).split('/');
    return rest[0]?.startsWith('@') === true ? `${rest[0]}/${rest[1] ?? ''}` : (rest[0] ?? 'npm');
  }
  const src = /\/(dist|src)\/(.+)$/.exec(url);
  if (src !== null) return `ours: ${src[2]}`;
  return url === '' ? '(native)' : url;
}

function shortWhere(frame: CallFrame): string {
  const url = frame.url.replace(/^file:\/\//, '');
  const nm = url.lastIndexOf('/node_modules/');
  const short = nm >= 0 ? url.slice(nm + '/node_modules/'.length) : url.replace(/^.*\/(dist|src)\//, '$1/');
  return short === '' ? '' : `${short}:${frame.lineNumber + 1}`;
}

export function summarizeProfile(profile: CpuProfile, top = 25): ProfileSummary {
  const byId = new Map<number, ProfileNode>();
  const parent = new Map<number, number>();
  for (const node of profile.nodes) {
    byId.set(node.id, node);
    for (const c of node.children ?? []) parent.set(c, node.id);
  }
  const key = (f: CallFrame): string =>
    `${f.functionName || '(anonymous)'}\u0000${f.url}\u0000${f.lineNumber}`;
  const selfMs = new Map<string, { frame: CallFrame; ms: number }>();
  const inclMs = new Map<string, { frame: CallFrame; ms: number }>();
  const catMs = new Map<string, number>();
  let totalMs = 0;
  let idleMs = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    // timeDeltas[i] is the time before sample i; attribute the interval after it (deltas[i + 1]).
    const ms = (profile.timeDeltas[i + 1] ?? 0) / 1000;
    const node = byId.get(profile.samples[i]!);
    if (node === undefined) continue;
    totalMs += ms;
    const frame = node.callFrame;
    if (frame.functionName === '(idle)') {
      idleMs += ms;
      continue;
    }
    const k = key(frame);
    const s = selfMs.get(k) ?? { frame, ms: 0 };
    s.ms += ms;
    selfMs.set(k, s);
    const cat = categoryOf(frame);
    catMs.set(cat, (catMs.get(cat) ?? 0) + ms);
    const seen = new Set<string>();
    let cur: ProfileNode | undefined = node;
    for (let depth = 0; cur !== undefined && depth < 1_000; depth++) {
      const ck = key(cur.callFrame);
      if (!seen.has(ck)) {
        seen.add(ck);
        const e = inclMs.get(ck) ?? { frame: cur.callFrame, ms: 0 };
        e.ms += ms;
        inclMs.set(ck, e);
      }
      const p = parent.get(cur.id);
      cur = p === undefined ? undefined : byId.get(p);
    }
  }
  const busyMs = totalMs - idleMs;
  const toRows = (
    m: Map<string, { frame: CallFrame; ms: number }>,
    filter: (f: CallFrame) => boolean,
  ): Row[] =>
    [...m.values()]
      .filter((e) => filter(e.frame))
      .sort((a, b) => b.ms - a.ms)
      .slice(0, top)
      .map((e) => ({
        name: e.frame.functionName || '(anonymous)',
        where: shortWhere(e.frame),
        category: categoryOf(e.frame),
        ms: e.ms,
        share: e.ms / busyMs,
      }));
  return {
    totalMs,
    idleMs,
    busyMs,
    self: toRows(selfMs, () => true),
    // Inclusive time is only informative below the event loop's own frames.
    inclusive: toRows(
      inclMs,
      (f) => !SPECIAL.has(f.functionName) && f.url !== '' && !f.url.startsWith('node:'),
    ),
    ours: toRows(inclMs, (f) => categoryOf(f).startsWith('ours:')),
    categories: [...catMs]
      .sort((a, b) => b[1] - a[1])
      .map(([category, ms]) => ({ category, ms, share: ms / busyMs })),
  };
}

export function loadProfile(path: string): CpuProfile {
  return JSON.parse(readFileSync(path, 'utf8')) as CpuProfile;
}

const pct = (x: number): string => `${(x * 100).toFixed(1)}%`;

/** Markdown tables for a summary. */
export function profileMarkdown(s: ProfileSummary, topCategories = 15): string {
  const lines = [
    `Sampled ${(s.totalMs / 1000).toFixed(1)} s, busy ${(s.busyMs / 1000).toFixed(1)} s ` +
      `(${pct(s.busyMs / s.totalMs)}), idle ${(s.idleMs / 1000).toFixed(1)} s. Shares are of busy time.`,
    '',
    '| self time by category | ms | share |',
    '|---|---:|---:|',
    ...s.categories
      .slice(0, topCategories)
      .map((c) => `| ${c.category} | ${c.ms.toFixed(0)} | ${pct(c.share)} |`),
    '',
    '| top self time | where | ms | share |',
    '|---|---|---:|---:|',
    ...s.self.map((r) => `| \`${r.name}\` | ${r.where} | ${r.ms.toFixed(0)} | ${pct(r.share)} |`),
    '',
    '| top inclusive time (JS frames) | where | ms | share |',
    '|---|---|---:|---:|',
    ...s.inclusive.map((r) => `| \`${r.name}\` | ${r.where} | ${r.ms.toFixed(0)} | ${pct(r.share)} |`),
    '',
    '| our functions, inclusive time | where | ms | share |',
    '|---|---|---:|---:|',
    ...s.ours.map((r) => `| \`${r.name}\` | ${r.where} | ${r.ms.toFixed(0)} | ${pct(r.share)} |`),
  ];
  return lines.join('\n');
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { values, positionals } = parseArgs({
    options: { top: { type: 'string', default: '25' } },
    allowPositionals: true,
  });
  const path = positionals[0];
  if (path === undefined) throw new Error('usage: tsx bench/profile.ts FILE.cpuprofile [--top N]');
  console.log(profileMarkdown(summarizeProfile(loadProfile(path), Number(values.top))));
}
