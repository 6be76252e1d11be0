/**
 * Scripted comparative judges for the fake OpenAI backend: they read the candidates out of the nonce fence of
 * the real prompt (as a model would) and answer the comparison, pick or rating schema.
 */
import type { FakeChatRequest, FakeReply } from './openai.js';

/** The ideas of a comparative prompt, in the order shown (parsed from the candidate fence's JSON lines). */
export function shownIdeas(body: FakeChatRequest): string[] {
  const user = body.messages?.find((m) => m.role === 'user')?.content ?? '';
  const open = /<<<CANDIDATE_([A-Za-z0-9_-]+)>>>\n/.exec(user);
  if (open === null) return [];
  const close = `\n<<<END_CANDIDATE_${open[1]}>>>`;
  const start = open.index + open[0].length;
  const end = user.indexOf(close, start);
  return user
    .slice(start, end)
    .split('\n')
    .map((line) => (JSON.parse(line) as { idea: string }).idea);
}

/** Rank marker of a test idea: `RANK7` → 7 (higher is better); NaN without one. */
export function rankOf(idea: string): number {
  const m = /RANK(\d+)/.exec(idea);
  return m === null ? Number.NaN : Number(m[1]);
}

export function comparisonReply(winner: 'A' | 'B' | 'tie', confidence = 0.8): FakeReply {
  return {
    kind: 'json',
    body: {
      reasoning: `scripted: ${winner}`,
      winner,
      margin: winner === 'tie' ? 'toss-up' : 'clear',
      confidence,
    },
  };
}

/** Always answers position A, whatever is shown there. */
export function positionAJudge(): FakeReply {
  return comparisonReply('A');
}

/** Prefers the higher RANK marker, whichever position it is in (a judge with a known total order). */
export function rankJudge(body: FakeChatRequest): FakeReply {
  const [a, b] = shownIdeas(body);
  const ra = rankOf(a ?? '');
  const rb = rankOf(b ?? '');
  return comparisonReply(ra > rb ? 'A' : rb > ra ? 'B' : 'tie');
}

/** Rates an idea by its SCORE marker (`SCORE4` → 4), for the absolute protocol. */
export function scoreOf(idea: string, criterion?: string): number {
  const tagged = criterion === undefined ? null : new RegExp(`${criterion.toUpperCase()}(\\d)`).exec(idea);
  const m = tagged ?? /SCORE(\d)/.exec(idea);
  return m === null ? 3 : Number(m[1]);
}

/** The criterion named in a comparative system prompt (`Criterion: novelty: …`). */
export function criterionOf(body: FakeChatRequest): string {
  const system = body.messages?.find((m) => m.role === 'system')?.content ?? '';
  const m = /Criterion: (\w+)/.exec(system);
  return m?.[1] === 'closeness' ? 'match' : (m?.[1] ?? 'unknown');
}
