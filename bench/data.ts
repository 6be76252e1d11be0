/**
 * Benchmark traffic drawn from a labelled dataset (`../shared/datasets/openreview-pairs.jsonl` by default):
 * real abstracts as ground truths and real TL;DRs as candidates, so request and prompt sizes are realistic.
 *
 * Judgments are addressed by an index `k`. Blocks of `BLOCK` consecutive indices share one ground truth and
 * carry distinct candidates, so a block is a GRPO group (16 unique rollouts of one prompt) and per-rollout
 * traffic arrives group by group, as trainers send it. Distinct indices below `uniquePairs` are distinct
 * (ground truth, candidate) pairs, i.e. cache misses; replaying a range gives cache hits.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const BLOCK = 16;

export const DEFAULT_DATASET = fileURLToPath(
  new URL('../../shared/datasets/openreview-pairs.jsonl', import.meta.url),
);

export interface Triple {
  question: string;
  groundTruth: string;
  candidate: string;
}

export interface Corpus {
  papers: Array<{ question: string; groundTruth: string }>;
  candidates: string[];
  /** Number of distinct (ground truth, candidate) pairs reachable by `tripleAt`. */
  uniquePairs: number;
}

/**
 * Loads distinct ground truths (with their question) and distinct candidates. Candidates shorter than
 * `minChars` or longer than `maxChars` are dropped so that no benchmark item is a degenerate rejection.
 */
export function loadCorpus(path = DEFAULT_DATASET, limits = { minChars: 20, maxChars: 8000 }): Corpus {
  const papers = new Map<string, string>();
  const candidates = new Set<string>();
  const lines = readFileSync(path, 'utf8').split('\n');
  for (const [i, line] of lines.entries()) {
    if (line.trim() === '') continue;
    const row = JSON.parse(line) as Record<string, unknown>;
    const { question, ground_truth: groundTruth, candidate } = row;
    if (typeof question !== 'string' || typeof groundTruth !== 'string' || typeof candidate !== 'string') {
      throw new Error(`${path}:${i + 1}: expected string question, ground_truth and candidate`);
    }
    papers.set(groundTruth, question);
    const c = candidate.trim();
    if (c.length >= limits.minChars && c.length <= limits.maxChars) candidates.add(c);
  }
  if (candidates.size < BLOCK) throw new Error(`${path}: needs at least ${BLOCK} usable candidates`);
  const roundsPerPaper = Math.floor(candidates.size / BLOCK);
  return {
    papers: [...papers].map(([groundTruth, question]) => ({ question, groundTruth })),
    candidates: [...candidates],
    uniquePairs: papers.size * roundsPerPaper * BLOCK,
  };
}

/** The judgment with index `k` (wraps around after `uniquePairs`). */
export function tripleAt(corpus: Corpus, k: number): Triple {
  const index = k % corpus.uniquePairs;
  const block = Math.floor(index / BLOCK);
  const slot = index % BLOCK;
  const paperIndex = block % corpus.papers.length;
  const round = Math.floor(block / corpus.papers.length);
  // Within one paper, (round, slot) ↦ round·BLOCK + slot is injective below candidates.length; the
  // per-paper shift only spreads candidates over papers.
  const candidateIndex = (round * BLOCK + slot + 7 * paperIndex) % corpus.candidates.length;
  const paper = corpus.papers[paperIndex]!;
  return {
    question: paper.question,
    groundTruth: paper.groundTruth,
    candidate: corpus.candidates[candidateIndex]!,
  };
}

/** A `/v1/reward` body: the group of `size` judgments starting at index `start`. */
export function groupBody(corpus: Corpus, start: number, size: number, graph: string): string {
  if (start % BLOCK !== 0 || size < 1 || size > BLOCK) {
    throw new Error(`a group starts on a multiple of ${BLOCK} and has 1..${BLOCK} candidates`);
  }
  const triples = Array.from({ length: size }, (_, j) => tripleAt(corpus, start + j));
  const first = triples[0]!;
  return JSON.stringify({
    question: first.question,
    ground_truth: first.groundTruth,
    candidates: triples.map((t) => t.candidate),
    graph,
  });
}

/** The trainer-side prompt a policy saw for this paper (OpenRLHF sends it as `prompts[i]`). */
export function promptFor(question: string): string {
  return `<|im_start|>user\nPropose the core method of a paper titled: ${question}<|im_end|>\n<|im_start|>assistant\n`;
}

/** A `/get_reward` body (OpenRLHF remote RM) with one rollout: query = prompt + response. */
export function rolloutBody(corpus: Corpus, k: number): string {
  const t = tripleAt(corpus, k);
  const prompt = promptFor(t.question);
  return JSON.stringify({
    query: [`${prompt}${t.candidate}<|im_end|>`],
    prompts: [prompt],
    labels: [{ ground_truth: t.groundTruth, question: t.question }],
  });
}
