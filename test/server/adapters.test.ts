import { describe, expect, it } from 'vitest';

import { REJECTION_REASONS } from '../../src/judge/degenerate.js';
import { candidateFromQuery, questionFromMessages } from '../../src/server/http/routes/adapters.js';
import { prepareCandidate } from '../../src/judge/candidate.js';
import { stripChatTokens } from '../../src/text/chat-tokens.js';
import { candidate, GOOD, GROUND_TRUTH, QUESTION, useHarness } from './helpers.js';

const harness = useHarness();

const CHATML_PROMPT = `<|im_start|>system\nYou propose research ideas.<|im_end|>\n<|im_start|>user\n${QUESTION}<|im_end|>\n<|im_start|>assistant\n`;
const LLAMA3_PROMPT = `<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n${QUESTION}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n`;

describe('chat-token stripping', () => {
  it('removes the prompt prefix, keeps the rollout as spelled (preparation cuts at its end of turn)', () => {
    const idea = 'Train paired encoders with a contrastive objective.';
    const judged = (rollout: string): string => prepareCandidate(rollout).candidate;
    expect(candidateFromQuery(`${CHATML_PROMPT}${idea}<|im_end|>`, CHATML_PROMPT)).toBe(`${idea}<|im_end|>`);
    expect(judged(candidateFromQuery(`${CHATML_PROMPT}${idea}<|im_end|>`, CHATML_PROMPT))).toBe(idea);
    expect(judged(candidateFromQuery(`${LLAMA3_PROMPT}${idea}<|eot_id|>`, LLAMA3_PROMPT))).toBe(idea);
    expect(judged(candidateFromQuery(`<s>[INST] q [/INST] ${idea}</s>`, '<s>[INST] q [/INST]'))).toBe(idea);
    expect(judged(candidateFromQuery(`${idea}<|endoftext|>`, undefined))).toBe(idea);
    // A templated query sent without its prompt: the rollout starts after the assistant header.
    expect(judged(candidateFromQuery(`${CHATML_PROMPT}${idea}<|im_end|>`, undefined))).toBe(idea);
    // Without a matching prefix the query is refused: judging prompt + response would reward the prompt.
    expect(() => candidateFromQuery(`${CHATML_PROMPT}${idea}`, 'another prompt')).toThrow(
      expect.objectContaining({ code: 'RW_PROMPT_MISMATCH' }),
    );
    expect(stripChatTokens('a $& b $1 c')).toBe('a $& b $1 c');
  });

  it('takes the last user message of a chat as the question', () => {
    expect(
      questionFromMessages([
        { role: 'system', content: 'sys' },
        { role: 'user', content: [{ type: 'text', text: QUESTION }] },
        { role: 'assistant', content: 'ok' },
      ]),
    ).toBe(QUESTION);
  });
});

describe('POST /get_reward (OpenRLHF)', () => {
  it('judges query minus prompt, with string and object labels, and returns numeric extra_logs with identical keys', async () => {
    const h = await harness();
    const good = candidate(0, true);
    const bad = candidate(1, false);
    const res = await h.app.inject({
      method: 'POST',
      url: '/get_reward',
      payload: {
        query: [
          `${CHATML_PROMPT}${good}<|im_end|>`,
          `${LLAMA3_PROMPT}${bad}<|eot_id|>`,
          `${CHATML_PROMPT}:<|im_end|>`,
        ],
        prompts: [CHATML_PROMPT, LLAMA3_PROMPT, CHATML_PROMPT],
        labels: [GROUND_TRUTH, { ground_truth: GROUND_TRUTH, question: 'Explicit question?' }, GROUND_TRUTH],
      },
    });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.rewards).toEqual([1, 0, 0]);
    expect(body.scores).toHaveLength(3);
    const keys = Object.keys(body.extra_logs).sort();
    expect(keys).toEqual(
      [
        'cached',
        'cancelled',
        'incoherent',
        'judge_failed',
        'latency_s',
        'reasoning_chars',
        'rejected_input',
        ...REJECTION_REASONS.map((r) => `rejected_${r}`),
        'score',
        'votes',
        'votes_match_share',
      ].sort(),
    );
    for (const key of keys) {
      expect(body.extra_logs[key]).toHaveLength(3);
      for (const v of body.extra_logs[key]) expect(typeof v).toBe('number');
    }
    expect(body.extra_logs.judge_failed).toEqual([0, 0, 0]);
    expect(body.extra_logs.rejected_input).toEqual([0, 0, 1]);
    expect(body.extra_logs.incoherent).toEqual([0, 0, 0]);

    // The judge saw the bare idea (no template tokens) and the right question.
    const prompts = h.fake.calls.map((c) => c.body.messages?.find((m) => m.role === 'user')?.content ?? '');
    expect(prompts.some((p) => p.includes(good))).toBe(true);
    expect(prompts.every((p) => !p.includes('<|im_end|>') && !p.includes('<|eot_id|>'))).toBe(true);
    expect(prompts.some((p) => p.includes('Explicit question?'))).toBe(true);
  });

  it('answers empty lists to empty lists', async () => {
    const h = await harness();
    const res = await h.app.inject({
      method: 'POST',
      url: '/get_reward',
      payload: { query: [], prompts: [], labels: [] },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ rewards: [], scores: [], extra_logs: {} });
  });

  it('answers 503 RW_JUDGE_FAILED when a judgment fails and FAILURE_REWARD is not set', async () => {
    const h = await harness();
    h.fake.setScript([], { kind: 'status', status: 500 });
    const res = await h.app.inject({
      method: 'POST',
      url: '/get_reward',
      payload: { query: [candidate(0)], labels: [GROUND_TRUTH] },
    });
    expect(res.statusCode).toBe(503);
    expect(res.json().code).toBe('RW_JUDGE_FAILED');
    expect(res.json().details.failed[0]).toMatchObject({ index: 0, status: 'judge_error' });
    expect(res.headers['retry-after']).toBe('1');
  });

  it('answers FAILURE_REWARD=0 with judge_failed = 1 when the operator set it', async () => {
    const h = await harness({ env: { FAILURE_REWARD: '0' } });
    h.fake.setScript([], (body) => {
      const user = body.messages?.find((m) => m.role === 'user')?.content ?? '';
      return user.includes(GOOD)
        ? { kind: 'status', status: 500 }
        : {
            kind: 'json',
            body: {
              reasoning: 'r',
              gt_components: [],
              candidate_components: [],
              stance: 'no_match',
              verdict: 'no_match',
              confidence: 0.8,
            },
          };
    });
    const res = await h.app.inject({
      method: 'POST',
      url: '/get_reward',
      payload: { query: [candidate(0, true), candidate(1, false)], labels: [GROUND_TRUTH, GROUND_TRUTH] },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().rewards).toEqual([0, 0]);
    expect(res.json().extra_logs.judge_failed).toEqual([1, 0]);
  });

  it('uses the preset named in ?graph=', async () => {
    const h = await harness();
    const res = await h.app.inject({
      method: 'POST',
      url: '/get_reward?graph=single-judge',
      payload: { query: [candidate(0)], labels: [GROUND_TRUTH] },
    });
    expect(res.statusCode).toBe(200);
    expect(h.fake.callCount).toBe(1);
    const unknown = await h.app.inject({
      method: 'POST',
      url: '/get_reward?graph=nope',
      payload: { query: [candidate(0)], labels: [GROUND_TRUTH] },
    });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json().code).toBe('RW_UNKNOWN_GRAPH');
  });
});

describe('POST /slime', () => {
  it('answers {reward, score, status, …} for a string prompt and for a message-list prompt', async () => {
    const h = await harness();
    const asString = await h.app.inject({
      method: 'POST',
      url: '/slime',
      payload: { prompt: CHATML_PROMPT, response: `${candidate(0, true)}<|im_end|>`, label: GROUND_TRUTH },
    });
    expect(asString.statusCode).toBe(200);
    expect(asString.json()).toMatchObject({ reward: 1, status: 'ok', verdict: 'match', cached: false });
    expect(typeof asString.json().score).toBe('number');

    const asMessages = await h.app.inject({
      method: 'POST',
      url: '/slime',
      payload: {
        prompt: [
          { role: 'system', content: 'You propose research ideas.' },
          { role: 'user', content: QUESTION },
        ],
        response: candidate(1, false),
        label: { ground_truth: GROUND_TRUTH },
      },
    });
    expect(asMessages.statusCode).toBe(200);
    expect(asMessages.json()).toMatchObject({ reward: 0, status: 'ok' });
  });

  it('answers 503 on judge failure unless FAILURE_REWARD is set', async () => {
    const h = await harness();
    h.fake.setScript([], { kind: 'status', status: 500 });
    const payload = { prompt: QUESTION, response: candidate(0), label: GROUND_TRUTH };
    const res = await h.app.inject({ method: 'POST', url: '/slime', payload });
    expect(res.statusCode).toBe(503);
    expect(res.json().code).toBe('RW_JUDGE_FAILED');
  });
});

describe('POST /verify (NeMo-Gym)', () => {
  const row = (text: string) => ({
    responses_create_params: { input: [{ role: 'user', content: QUESTION }] },
    response: {
      id: 'resp_1',
      output: [
        { type: 'reasoning', summary: [] },
        { type: 'message', role: 'assistant', content: [{ type: 'output_text', text, annotations: [] }] },
      ],
    },
    ground_truth: GROUND_TRUTH,
    task_id: 'task-7',
    instance_config: { split: 'train' },
  });

  it('echoes the row with reward', async () => {
    const h = await harness();
    const res = await h.app.inject({ method: 'POST', url: '/verify', payload: row(candidate(0, true)) });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({
      reward: 1,
      task_id: 'task-7',
      ground_truth: GROUND_TRUTH,
      instance_config: { split: 'train' },
    });
    expect(body.response.id).toBe('resp_1');
    expect(body.instance_config.mask_sample).toBeUndefined();
    expect(body.judge).toMatchObject({ status: 'ok', verdict: 'match' });
  });

  it('masks the sample on judge failure instead of training on a made-up 0', async () => {
    const h = await harness();
    h.fake.setScript([], { kind: 'status', status: 500 });
    const res = await h.app.inject({ method: 'POST', url: '/verify', payload: row(candidate(0, true)) });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.instance_config).toEqual({ split: 'train', mask_sample: true });
    expect(body._ng_failure_class).toBe('judge_failed');
    expect(body.reward).toBe(0);
    expect(body.judge.status).toBe('judge_error');
    expect(body.task_id).toBe('task-7');
  });
});
