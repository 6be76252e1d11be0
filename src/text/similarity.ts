/**
 * The text-similarity library (not a role) behind the lexical role, the offline backend and the
 * degenerate-candidate check: tokenisation, light stemming, stopwords and a corpus-free TF-IDF-like
 * cosine. Pure, no I/O, imports nothing.
 *
 * Measured on ../shared/datasets (dev): the `methodology` variant reaches AUC 0.93 on OpenReview
 * positive vs hard negative (1.00 vs easy negative); see test/judge/backends/offline.test.ts.
 */

// English function words plus generic academic verbs/nouns that say nothing about a method: with no
// corpus to compute an IDF from, removing them is the IDF proxy.
const STOPWORD_TEXT = `
a about above after again against all also am an and any are as at be because been before being below
between both but by can cannot could did do does doing down during each few for from further had has have
having he her here hers herself him himself his how i if in into is it its itself just me more most my
myself no nor not now of off on once only or other our ours ourselves out over own same she should so some
such than that the their theirs them themselves then there these they this those through to too under until
up very was we were what when where which while who whom why will with would you your yours yourself
yourselves may might must shall within without via upon across among along around toward towards onto per
thus hence however therefore moreover furthermore whereas whether yet well even many much often etc al
et eg ie vs
use used using uses based new novel propose proposed proposes proposing present presents presented paper
papers work works approach approaches method methods methodology result results show shows shown showed
demonstrate demonstrates demonstrated demonstrating study studies studied introduce introduces introduced
introducing achieve achieves achieved achieving significantly significant improve improves improved
improving improvement performance state art existing prior previous recent recently first second one two
three several various different including include includes provide provides provided allow allows allowing
enable enables enabling make makes making effective effectively efficient efficiently simple simply key
main able way ways help helps particular particularly specifically general generally given problem problems
task tasks experiment experiments experimental empirical empirically evaluate evaluation evaluated thereby
ability outperform outperforms outperforming compared compare comparison baseline baselines benchmark
benchmarks dataset datasets leads lead leading hypothesis hypothesize design designed designing potential
potentially enhance enhanced enhancing enhances like idea ideas framework frameworks technique techniques
`;

export const STOPWORDS: ReadonlySet<string> = new Set(STOPWORD_TEXT.split(/\s+/).filter((w) => w.length > 0));

const SUFFIXES = [
  'ational',
  'ization',
  'ations',
  'ation',
  'ness',
  'ments',
  'ment',
  'ingly',
  'ing',
  'edly',
  'ed',
  'ities',
  'ity',
  'ally',
  'ly',
  'ize',
  'ise',
  'ive',
  'al',
  'er',
  'or',
  'ic',
  'e',
];

/** Stems are cut to this many characters after suffix stripping (prefix stemming; measured best of 5/6/7). */
export const STEM_PREFIX_CHARS = 6;

/** Light stemmer: plural and one derivational suffix stripped, then cut to STEM_PREFIX_CHARS characters. */
export function stem(word: string): string {
  let w = word;
  if (w.length <= 3) return w;
  if (w.endsWith('ies') && w.length > 4) w = `${w.slice(0, -3)}y`;
  else if (w.endsWith('sses')) w = w.slice(0, -2);
  else if (w.endsWith('s') && !w.endsWith('ss') && !w.endsWith('us') && !w.endsWith('is')) w = w.slice(0, -1);
  for (const suffix of SUFFIXES) {
    if (w.endsWith(suffix) && w.length - suffix.length >= 4) {
      w = w.slice(0, -suffix.length);
      break;
    }
  }
  return w.slice(0, STEM_PREFIX_CHARS);
}

export interface Token {
  /** Stemmed term used for matching. */
  term: string;
  /** Lowercased word as written (for human-readable summaries). */
  surface: string;
}

const WORD_SPLIT = /[^\p{L}\p{N}]+/u;
const DIGITS_ONLY = /^\p{N}+$/u;

/** Content-word tokens in order: lowercased, split on non-letters/digits, stopwords and numbers removed, stemmed. */
export function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  for (const word of text.toLowerCase().split(WORD_SPLIT)) {
    if (word.length < 2 || DIGITS_ONLY.test(word) || STOPWORDS.has(word)) continue;
    tokens.push({ term: stem(word), surface: word });
  }
  return tokens;
}

/** Rounded to 4 decimals: similarities and confidences stay readable in transcripts. */
export function round4(x: number): number {
  return Math.round(x * 10_000) / 10_000;
}

/**
 * Term-weighting variants. `methodology` is the default and the lexical baseline; the other two give
 * the offline reviewers different views of the same texts.
 * - `methodology`: sublinear tf (1 + ln tf) over stemmed content words.
 * - `statistics`: as methodology, but terms of the research question weigh 0.6 (topic, not method).
 * - `novelty`: distinctive terms: short stems (≤ 3 chars) down-weighted, plus adjacent-term bigrams at 0.5.
 */
export type TermWeighting = 'methodology' | 'statistics' | 'novelty';

export type TermVector = ReadonlyMap<string, number>;

function weightVector(
  tokens: readonly Token[],
  weighting: TermWeighting,
  topic: ReadonlySet<string>,
): TermVector {
  const counts = new Map<string, number>();
  const add = (key: string): void => {
    counts.set(key, (counts.get(key) ?? 0) + 1);
  };
  for (const t of tokens) add(t.term);
  if (weighting === 'novelty') {
    for (let i = 0; i + 1 < tokens.length; i++) {
      const a = tokens[i];
      const b = tokens[i + 1];
      if (a !== undefined && b !== undefined) add(`${a.term} ${b.term}`);
    }
  }
  const vector = new Map<string, number>();
  for (const [key, count] of counts) {
    let w = 1 + Math.log(count);
    const bigram = key.includes(' ');
    if (weighting === 'novelty') w *= bigram ? 0.5 : Math.min(1, 0.4 + key.length / 10);
    if (weighting === 'statistics' && topic.has(key)) w *= 0.6;
    vector.set(key, w);
  }
  return vector;
}

/** Weighted term vector of a text. `question` only matters for the `statistics` weighting. */
export function termVector(
  text: string,
  weighting: TermWeighting = 'methodology',
  question = '',
): TermVector {
  const topic =
    weighting === 'statistics' ? new Set(tokenize(question).map((t) => t.term)) : new Set<string>();
  return weightVector(tokenize(text), weighting, topic);
}

/** Cosine similarity in [0,1] of two non-negative vectors; 0 if either is empty. */
export function cosine(a: TermVector, b: TermVector): number {
  let dot = 0;
  let normA = 0;
  let normB = 0;
  for (const [key, x] of a) {
    normA += x * x;
    const y = b.get(key);
    if (y !== undefined) dot += x * y;
  }
  for (const y of b.values()) normB += y * y;
  if (normA === 0 || normB === 0) return 0;
  return Math.min(1, dot / Math.sqrt(normA * normB));
}

export interface SimilarityInput {
  question: string;
  candidate: string;
  groundTruth: string;
}

/** Corpus-free TF-IDF-style cosine between candidate and ground truth, in [0,1]. */
export function methodSimilarity(input: SimilarityInput, weighting: TermWeighting = 'methodology'): number {
  return cosine(
    termVector(input.candidate, weighting, input.question),
    termVector(input.groundTruth, weighting, input.question),
  );
}

/**
 * Decision thresholds per weighting, chosen on the OpenReview dev split (positive vs hard negative,
 * near the best-F1 point, rounded): similarity ≥ threshold ⇒ `match`.
 */
export const SIMILARITY_THRESHOLDS: Readonly<Record<TermWeighting, number>> = {
  methodology: 0.32,
  statistics: 0.25,
  novelty: 0.27,
};

/** Slope of the logistic that turns a margin (similarity − threshold) into a confidence. */
export const CONFIDENCE_SLOPE = 15;

/** Confidence in a stance from its margin: logistic(slope·|margin|), in [0.5, 1). */
export function marginConfidence(margin: number): number {
  return 1 / (1 + Math.exp(-CONFIDENCE_SLOPE * Math.abs(margin)));
}

/** Probability of `match` from a margin: logistic(slope·margin), in (0, 1). */
export function matchProbability(margin: number): number {
  return 1 / (1 + Math.exp(-CONFIDENCE_SLOPE * margin));
}

/**
 * The `limit` highest-weighted terms of a text, as surface words (first spelling seen), heaviest first;
 * ties broken by first occurrence so the result is deterministic.
 */
export function topTerms(text: string, limit: number, exclude: ReadonlySet<string> = new Set()): string[] {
  const tokens = tokenize(text);
  const counts = new Map<string, { count: number; first: number; surface: string }>();
  tokens.forEach((t, i) => {
    const entry = counts.get(t.term);
    if (entry === undefined) counts.set(t.term, { count: 1, first: i, surface: t.surface });
    else entry.count += 1;
  });
  return [...counts.entries()]
    .filter(([term]) => !exclude.has(term))
    .sort(([, a], [, b]) => b.count - a.count || a.first - b.first)
    .slice(0, limit)
    .map(([, e]) => e.surface);
}

/** The set of stemmed terms of a text. */
export function termSet(text: string): Set<string> {
  return new Set(tokenize(text).map((t) => t.term));
}
