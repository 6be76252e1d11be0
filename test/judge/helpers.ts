/** Shared fixtures for the suites that run the judge engine on the fake OpenAI backend (real HTTP). */
import { afterEach } from 'vitest';

import { createOfflineBackend } from '../../src/judge/backends/offline.js';
import { createRouter } from '../../src/judge/routing.js';
import type { JudgmentInput, Router } from '../../src/judge/types.js';
import {
  BackendSettings,
  loadRoutingFile,
  type BackendSettingsInput,
  type RoutingFile,
} from '../../src/settings/routing-file.js';
import { startFakeOpenAI, type FakeOpenAI, type FakeOpenAIOptions } from '../fakes/openai.js';

/** A judgment of a process-supervision idea against its paper (a plausible match). */
export const VERIFY_INPUT: JudgmentInput = {
  question: 'How can language models learn to verify their own reasoning steps?',
  candidate:
    'Train a step-level verifier on automatically labelled reasoning traces and use it to rerank sampled solutions.',
  groundTruth:
    'We propose process supervision: a reward model trained on step-level labels scores each reasoning step, ' +
    'and we use it to select among sampled solutions, outperforming outcome supervision.',
};

/** An absolute deadline `ms` from now (epoch ms). */
export const soon = (ms = 5_000): number => Date.now() + ms;

export interface FakeRouter {
  fake: FakeOpenAI;
  router: Router;
}

export type StartFakeRouter = (
  options?: FakeOpenAIOptions,
  settings?: Partial<BackendSettingsInput>,
  /** Routing-file entries on top of the default backend (per role or node: max_tokens, model, …). */
  routing?: Partial<Pick<RoutingFile, 'roles' | 'nodes'>>,
) => Promise<FakeRouter>;

/**
 * Call at the top level of a suite (or a `describe`). Returns a starter of a fake backend and a router whose
 * default backend is that fake (model `fake-model`, no retries; `settings` override); every pair it started
 * is closed after each test, the router's backends first.
 */
export function useFakeRouter(): StartFakeRouter {
  const open: FakeRouter[] = [];
  afterEach(async () => {
    for (const { fake, router } of open.splice(0)) {
      for (const b of router.backends()) await b.close?.();
      await fake.close();
    }
  });
  return async (options = {}, settings = {}, routing) => {
    const fake = await startFakeOpenAI(options);
    let router: Router;
    try {
      router = createRouter({
        default: BackendSettings.parse({
          base_url: fake.baseURL,
          model: 'fake-model',
          max_retries: 0,
          ...settings,
        }),
        offline: createOfflineBackend,
        file: routing === undefined ? undefined : loadRoutingFile(routing),
      });
    } catch (err) {
      await fake.close();
      throw err;
    }
    const started = { fake, router };
    open.push(started);
    return started;
  };
}
