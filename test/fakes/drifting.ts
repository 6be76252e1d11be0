/**
 * A drifting judge for the integrity suites, built on the fake OpenAI server's reply function: it answers
 * well-formed JSON and is right (by the GOOD marker in the prompt, as `markerJudge`) except with a per-call
 * error probability the test raises at run time — a replica whose accuracy slides while it stays healthy to
 * its circuit breaker. `longOnly` confines the errors to prompts carrying a marker (long candidates). The
 * draws come from a seeded PRNG per judge, so a run is reproducible up to the order of concurrent calls.
 */
import { createRng } from '../../src/math/sampling.js';
import { universalReply, type FakeChatRequest, type FakeReply } from './openai.js';

export interface DriftingJudge {
  /** The fake's reply function (pass as `fallback`). */
  reply(body: FakeChatRequest): FakeReply;
  /** Error probability per call from now on (0 = always right). */
  error: number;
  /** Only prompts containing this marker are answered wrong (with probability `error`); null = any. */
  longOnly: string | null;
  /** Calls answered wrong so far. */
  readonly wrong: number;
}

export function createDriftingJudge(options: { good: string; seed: number; error?: number }): DriftingJudge {
  const rng = createRng(options.seed);
  let wrong = 0;
  const judge: DriftingJudge = {
    error: options.error ?? 0,
    longOnly: null,
    get wrong() {
      return wrong;
    },
    reply(body) {
      const user = body.messages?.find((m) => m.role === 'user')?.content ?? '';
      const right = user.includes(options.good);
      const draw = rng();
      const eligible = judge.longOnly === null || user.includes(judge.longOnly);
      const flip = eligible && draw < judge.error;
      if (flip) wrong += 1;
      return { kind: 'json', body: universalReply(right !== flip ? 'match' : 'no_match', 0.9) };
    },
  };
  return judge;
}
