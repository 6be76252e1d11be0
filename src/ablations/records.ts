import { open, readFile, truncate } from 'node:fs/promises';
import { z } from 'zod';
import { getRole } from '../roles/index.js';
import type { Judgment } from '../judge/types.js';
import { clusterKey, type DatasetItem } from './dataset.js';
import { CallRecord } from './recording.js';

/** One node message as kept for statistics: who said what stance in which round (no text). */
export const StanceMessage = z.object({
  round: z.number().int(),
  nodeId: z.string(),
  role: z.string(),
  stage: z.enum(['debate', 'final']),
  stance: z.enum(['match', 'no_match']).nullable(),
  confidence: z.number().nullable(),
  failed: z.boolean().optional(),
  /** HTTP attempts and re-asks of the node (absent in records written before they were kept). */
  attempts: z.number().int().min(0).optional(),
  reasks: z.number().int().min(0).optional(),
  /** The judge's reasoning trace, when the node result carries one (reasoning judges). */
  reasoning: z.string().optional(),
});
export type StanceMessage = z.infer<typeof StanceMessage>;

export const RoleUsage = z.object({
  calls: z.number().int().min(0),
  promptTokens: z.number().min(0),
  completionTokens: z.number().min(0),
  /** Reasoning tokens (part of completionTokens); absent in records written before it existed, or 0. */
  reasoningTokens: z.number().min(0).optional(),
  latencyMs: z.number().min(0),
});
export type RoleUsage = z.infer<typeof RoleUsage>;

/** One line of `items.jsonl`: the outcome of one (graph, item) judgment. */
export const ItemRecord = z.object({
  v: z.literal(1),
  /** judgmentKey: graph hash, routes, prompt version and texts; a changed input or route is a new key. */
  key: z.string(),
  item: z.string(),
  graph: z.string(),
  graphHash: z.string(),
  status: z.enum(['ok', 'rejected_input', 'judge_error', 'timeout', 'overloaded']),
  verdict: z.enum(['match', 'no_match']).nullable(),
  reward: z.union([z.literal(0), z.literal(1)]).nullable(),
  score: z.number().nullable(),
  reason: z.string().optional(),
  error: z.object({ code: z.string(), message: z.string() }).optional(),
  rounds: z.number().int().min(0),
  stopReason: z.string(),
  usage: z.object({
    calls: z.number().int().min(0),
    promptTokens: z.number(),
    completionTokens: z.number(),
    /** Backend-reported prefix-cache hits; null = not reported; absent in records written before it existed. */
    cachedPromptTokens: z.number().min(0).nullable().optional(),
    /** Reasoning tokens (part of completionTokens); `reasoningTokensEstimated`: some counted from a trace. */
    reasoningTokens: z.number().min(0).optional(),
    reasoningTokensEstimated: z.boolean().optional(),
  }),
  roles: z.record(z.string(), RoleUsage),
  messages: z.array(StanceMessage),
  latencyMs: z.number().min(0),
  /** The item's label and kind (absent in records written before they were kept). */
  label: z.union([z.literal(0), z.literal(1)]).optional(),
  kind: z.string().optional(),
  /** The item's cluster (`clusterKey`: its ground truth's hash), so runs compare without the dataset. */
  cluster: z.string().optional(),
  /** 0-based repeat of the item (`--epochs`); absent = 0. */
  epoch: z.number().int().min(0).optional(),
  /** The fence nonce the prompts carried (seeded by `--seed`); absent in older records. */
  nonce: z.string().optional(),
  /** Every LLM call: messages sent, raw reply, reasoning (absent in older records). */
  calls: z.array(CallRecord).optional(),
});
export type ItemRecord = z.infer<typeof ItemRecord>;

export const FAILURE_STATUSES: ReadonlySet<ItemRecord['status']> = new Set([
  'judge_error',
  'timeout',
  'overloaded',
]);

export function isFailure(record: Pick<ItemRecord, 'status'>): boolean {
  return FAILURE_STATUSES.has(record.status);
}

/**
 * Identity of a finished (graph, item) in `items.jsonl`; with a nonce (seeded runs), of that repeat: a
 * resumed run reuses a record only when it would have sent the same prompts.
 */
export function recordId(key: string, itemId: string, nonce?: string): string {
  return nonce === undefined ? `${key}|${itemId}` : `${key}|${itemId}|${nonce}`;
}

/** What a research run adds to a record: the item's label and kind, the repeat, its nonce, the calls. */
export interface RecordExtras {
  item: Pick<DatasetItem, 'label' | 'kind' | 'ground_truth'>;
  epoch: number;
  nonce: string;
  calls: CallRecord[];
}

/** The reasoning trace on a node result, when the engine reports one. */
function reasoningOf(m: Judgment['transcript'][number]): string | undefined {
  return 'reasoning' in m && typeof m.reasoning === 'string' ? m.reasoning : undefined;
}

/** Converts a judgment to its `items.jsonl` record. */
export function toRecord(judgment: Judgment, key: string, itemId: string, extras?: RecordExtras): ItemRecord {
  const roles: Record<string, RoleUsage> = {};
  for (const m of judgment.transcript) {
    const usage = (roles[m.role] ??= { calls: 0, promptTokens: 0, completionTokens: 0, latencyMs: 0 });
    // A local role (lexical) makes no LLM call; an LLM node makes one call per ask (1 + re-asks).
    if (getRole(m.role)?.kind !== 'local') usage.calls += 1 + m.reasks;
    usage.promptTokens += m.promptTokens;
    usage.completionTokens += m.completionTokens;
    if ((m.reasoningTokens ?? 0) > 0)
      usage.reasoningTokens = (usage.reasoningTokens ?? 0) + (m.reasoningTokens ?? 0);
    usage.latencyMs += m.latencyMs;
  }
  const record: ItemRecord = {
    v: 1,
    key,
    item: itemId,
    graph: judgment.graph.name,
    graphHash: judgment.graph.hash,
    status: judgment.status,
    verdict: judgment.verdict,
    reward: judgment.reward,
    score: judgment.score,
    rounds: judgment.rounds,
    stopReason: judgment.stopReason,
    usage: { ...judgment.usage },
    roles,
    messages: judgment.transcript.map((m) => {
      const reasoning = extras === undefined ? undefined : reasoningOf(m);
      return {
        round: m.round,
        nodeId: m.nodeId,
        role: m.role,
        stage: m.stage,
        stance: m.stance,
        confidence: m.confidence,
        ...(m.error === undefined ? {} : { failed: true }),
        ...(extras === undefined ? {} : { attempts: m.attempts, reasks: m.reasks }),
        ...(reasoning === undefined ? {} : { reasoning }),
      };
    }),
    latencyMs: judgment.latencyMs,
  };
  if (judgment.reason !== undefined) record.reason = judgment.reason;
  if (judgment.error !== undefined) record.error = { ...judgment.error };
  if (extras !== undefined) {
    record.label = extras.item.label;
    record.kind = extras.item.kind;
    record.cluster = clusterKey(extras.item);
    record.epoch = extras.epoch;
    record.nonce = extras.nonce;
    record.calls = extras.calls;
  }
  return record;
}

/** A JSONL file of records as read back for a resume. */
export interface LoadedJsonl<T> {
  /** Last record per id: a retried unit supersedes its earlier failure. */
  records: Map<string, T>;
  /** Lines (1-based) that did not parse or did not match the schema (reported, ignored). */
  badLines: number[];
  /** True when a partial last line (a killed writer) was cut off. */
  repairedTail: boolean;
}

export type LoadedRecords = LoadedJsonl<ItemRecord>;

/**
 * Reads a resumable run's JSONL file if it exists (none: no records). A partial last line (the process was
 * killed mid-write) is truncated away so that appends start on a fresh line.
 */
export async function loadJsonl<T>(
  path: string,
  schema: z.ZodType<T>,
  idOf: (record: T) => string,
): Promise<LoadedJsonl<T>> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    if (err instanceof Error && 'code' in err && err.code === 'ENOENT') {
      return { records: new Map(), badLines: [], repairedTail: false };
    }
    throw err;
  }
  let repairedTail = false;
  if (text.length > 0 && !text.endsWith('\n')) {
    const cut = text.lastIndexOf('\n') + 1;
    text = text.slice(0, cut);
    await truncate(path, Buffer.byteLength(text, 'utf8'));
    repairedTail = true;
  }
  const records = new Map<string, T>();
  const badLines: number[] = [];
  for (const [index, line] of text.split('\n').entries()) {
    if (line.trim() === '') continue;
    let json: unknown;
    try {
      json = JSON.parse(line);
    } catch {
      badLines.push(index + 1);
      continue;
    }
    const parsed = schema.safeParse(json);
    if (!parsed.success) {
      badLines.push(index + 1);
      continue;
    }
    records.set(idOf(parsed.data), parsed.data);
  }
  return { records, badLines, repairedTail };
}

/** Reads an ablation's `items.jsonl` (see `loadJsonl`), keyed by (judgment key, item). */
export function loadRecords(path: string): Promise<LoadedRecords> {
  return loadJsonl(path, ItemRecord, (r) => recordId(r.key, r.item, r.nonce));
}

/** An append-only JSONL writer; writes are serialized so lines never interleave. */
export interface JsonlSink<T> {
  /** Resolves once this record's line (and every earlier one) is written. */
  append(record: T): Promise<void>;
  close(): Promise<void>;
}

export async function openJsonlSink<T>(path: string): Promise<JsonlSink<T>> {
  const handle = await open(path, 'a');
  let chain: Promise<void> = Promise.resolve();
  return {
    append(record) {
      const line = `${JSON.stringify(record)}\n`;
      chain = chain.then(async () => {
        await handle.write(line);
      });
      return chain;
    },
    async close() {
      await chain.catch(() => undefined);
      await handle.close();
    },
  };
}
