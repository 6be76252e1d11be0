/**
 * Issue 30 items 1 and 5: the keys file (REWARD_KEYS) — every route against a key of every scope (401
 * without a valid key, 403 RW_FORBIDDEN naming the scope without it, served with it), REWARD_API_KEY as the
 * all-scope `default` tenant beside the file, a refusal logged by the key's name and never its value, and
 * reloads: a valid file changes the keys while the server serves, an invalid one keeps the old keys.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { hashKey, loadConfig, readKeysFile } from '../../src/config.js';
import { createMetrics } from '../../src/server/observe/metrics.js';
import { reportReload } from '../../src/server/tenants/access.js';
import { ROUTE_SCOPES } from '../../src/server/tenants/auth.js';
import { createKeyring } from '../../src/server/tenants/keyring.js';
import { SCOPES } from '../../src/settings/keys-file.js';
import { candidate, counterValue, GROUND_TRUTH, logLines, QUESTION, useHarness, waitFor } from './helpers.js';

const harness = useHarness();

/** A keys file in a fresh temp dir; `entries` as written (the keys are `key-<name>`). */
function keysFile(entries: Array<Record<string, unknown>>): string {
  const path = join(mkdtempSync(join(tmpdir(), 'reward-keys-')), 'keys.json');
  writeFileSync(path, JSON.stringify({ keys: entries }));
  return path;
}
const entry = (name: string, scopes: readonly string[], extra: Record<string, unknown> = {}) => ({
  name,
  sha256: hashKey(`key-${name}`),
  scopes,
  ...extra,
});
const bearer = (name: string) => ({ authorization: `Bearer key-${name}` });

const group = { question: QUESTION, ground_truth: GROUND_TRUTH, candidates: [candidate(0)] };
/** One request per route of ROUTE_SCOPES (bodies valid where cheap; a 400 past auth also proves auth passed). */
const REQUESTS: ReadonlyMap<string, { method: 'GET' | 'POST'; url: string; payload?: unknown }> = new Map([
  ['/v1/reward', { method: 'POST', url: '/v1/reward', payload: group }],
  ['/v1/reward/batch', { method: 'POST', url: '/v1/reward/batch', payload: { groups: [group] } }],
  [
    '/v1/reward/group-mean',
    {
      method: 'POST',
      url: '/v1/reward/group-mean',
      payload: { question: group.question, ground_truth: group.ground_truth },
    },
  ],
  [
    '/v1/judge',
    { method: 'POST', url: '/v1/judge', payload: { ground_truth: GROUND_TRUTH, candidate: candidate(0) } },
  ],
  [
    '/get_reward',
    { method: 'POST', url: '/get_reward', payload: { query: [candidate(0)], labels: [GROUND_TRUTH] } },
  ],
  [
    '/slime',
    {
      method: 'POST',
      url: '/slime',
      payload: { prompt: QUESTION, response: candidate(0), label: GROUND_TRUTH },
    },
  ],
  ['/verify', { method: 'POST', url: '/verify', payload: {} }],
  [
    '/v1/rank',
    {
      method: 'POST',
      url: '/v1/rank',
      payload: { candidates: [candidate(0), candidate(1)], ground_truth: GROUND_TRUTH },
    },
  ],
  ['/v1/best-of-n', { method: 'POST', url: '/v1/best-of-n', payload: { candidates: [candidate(0)] } }],
  ['/get_reward/rank', { method: 'POST', url: '/get_reward/rank', payload: {} }],
  ['/slime/rank', { method: 'POST', url: '/slime/rank', payload: {} }],
  ['/v1/cancel', { method: 'POST', url: '/v1/cancel', payload: { tag: 'step-1' } }],
  ['/v1/plan', { method: 'POST', url: '/v1/plan', payload: { rollouts: 8, group_size: 4 } }],
  ['/v1/integrity', { method: 'GET', url: '/v1/integrity' }],
  ['/metrics', { method: 'GET', url: '/metrics' }],
  ['/v1/tenants', { method: 'GET', url: '/v1/tenants' }],
  ['/v1/graphs', { method: 'GET', url: '/v1/graphs' }],
  ['/v1/graphs/:name', { method: 'GET', url: '/v1/graphs/default' }],
  ['/readyz', { method: 'GET', url: '/readyz' }],
]);

/** What the issue asks of each route (the contract, written out here: not read from the source). */
const EXPECTED_SCOPE: Record<string, string> = {
  '/v1/reward': 'reward',
  '/v1/reward/batch': 'reward',
  '/v1/reward/group-mean': 'reward',
  '/v1/judge': 'reward',
  '/get_reward': 'reward',
  '/slime': 'reward',
  '/verify': 'reward',
  '/v1/rank': 'rank',
  '/v1/best-of-n': 'rank',
  '/get_reward/rank': 'rank',
  '/slime/rank': 'rank',
  '/v1/cancel': 'cancel',
  '/v1/plan': 'plan',
  '/v1/integrity': 'integrity',
  '/metrics': 'metrics',
  '/v1/tenants': 'admin',
  '/v1/graphs': 'any',
  '/v1/graphs/:name': 'any',
  '/readyz': 'any',
};

describe('scopes (REWARD_KEYS)', () => {
  it('lists a request for every route the app serves, and every route has a scope', async () => {
    expect([...REQUESTS.keys()].sort()).toEqual([...ROUTE_SCOPES.keys()].sort());
    expect(Object.fromEntries(ROUTE_SCOPES)).toEqual(EXPECTED_SCOPE);
    const h = await harness({ env: { REWARD_KEYS: keysFile([entry('run-a', ['reward'])]) } });
    for (const [route, r] of REQUESTS) {
      const res = await h.app.inject({ method: r.method, url: r.url, payload: r.payload as object });
      expect(res.statusCode, route).toBe(401);
    }
  });

  it('serves each route to a key with its scope, and refuses the others with 403 RW_FORBIDDEN naming it', async () => {
    const keys = [...SCOPES.map((s) => entry(`only-${s}`, [s])), entry('all', SCOPES)];
    const h = await harness({ env: { REWARD_KEYS: keysFile(keys) } });
    for (const [route, r] of REQUESTS) {
      const needed = EXPECTED_SCOPE[route];
      const callsBefore = h.fake.callCount;
      for (const scope of SCOPES) {
        const res = await h.app.inject({
          method: r.method,
          url: r.url,
          payload: r.payload as object,
          headers: bearer(`only-${scope}`),
        });
        if (needed === 'any' || needed === scope) {
          expect([401, 403], `${route} with ${scope}`).not.toContain(res.statusCode);
        } else {
          expect(res.statusCode, `${route} with ${scope}`).toBe(403);
          expect(res.json()).toMatchObject({ code: 'RW_FORBIDDEN', details: { scope: needed } });
          expect(res.json().message).toContain(`"${needed}"`);
        }
      }
      // A judging route reached the judge for the key that may judge, and only for it.
      if (route === '/v1/reward' || route === '/v1/rank')
        expect(h.fake.callCount).toBeGreaterThan(callsBefore);
      const all = await h.app.inject({
        method: r.method,
        url: r.url,
        payload: r.payload as object,
        headers: bearer('all'),
      });
      expect([401, 403], route).not.toContain(all.statusCode);
    }
    expect(
      (await h.app.inject({ method: 'GET', url: '/nowhere', headers: bearer('only-plan') })).statusCode,
    ).toBe(404);
  });

  it('answers 401 RW_UNAUTHORIZED to a missing, unknown or malformed key, and never reaches the judge', async () => {
    const h = await harness({ env: { REWARD_KEYS: keysFile([entry('run-a', ['reward'])]) } });
    for (const authorization of [undefined, 'Bearer key-run-b', 'key-run-a', 'Basic key-run-a', 'Bearer ']) {
      const res = await h.app.inject({
        method: 'POST',
        url: '/v1/reward',
        payload: group,
        headers: authorization === undefined ? {} : { authorization },
      });
      expect(res.statusCode, authorization).toBe(401);
      expect(res.json().code).toBe('RW_UNAUTHORIZED');
      expect(res.headers['www-authenticate']).toBe('Bearer');
    }
    expect(h.fake.callCount).toBe(0);
    expect(
      (await h.app.inject({ method: 'POST', url: '/v1/reward', payload: group, headers: bearer('run-a') }))
        .statusCode,
    ).toBe(200);
  });

  it('keeps REWARD_API_KEY as the tenant `default` with every scope beside the file', async () => {
    const h = await harness({
      env: { REWARD_API_KEY: 'legacy-key', REWARD_KEYS: keysFile([entry('run-a', ['reward'])]) },
    });
    const legacy = { authorization: 'Bearer legacy-key' };
    for (const url of ['/v1/tenants', '/v1/integrity', '/metrics'])
      expect((await h.app.inject({ method: 'GET', url, headers: legacy })).statusCode, url).toBe(200);
    const tenants = (await h.app.inject({ method: 'GET', url: '/v1/tenants', headers: legacy })).json();
    expect(tenants.tenants.map((t: { name: string }) => t.name).sort()).toEqual(['default', 'run-a']);
    expect(JSON.stringify(tenants)).not.toContain(hashKey('key-run-a'));
    expect(
      (await h.app.inject({ method: 'GET', url: '/metrics', headers: bearer('run-a') })).statusCode,
    ).toBe(403);
  });

  it('logs a refused key by its name and never its value', async () => {
    const log = logLines();
    const h = await harness({
      env: { REWARD_KEYS: keysFile([entry('run-a', ['reward'])]) },
      logger: { level: 'warn', stream: log.stream },
    });
    await h.app.inject({ method: 'GET', url: '/metrics', headers: bearer('run-a') });
    await h.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: 'Bearer wrong-secret' } });
    const text = JSON.stringify(log.lines);
    expect(log.lines.some((l) => l['tenant'] === 'run-a' && l['scope'] === 'metrics')).toBe(true);
    expect(log.lines.some((l) => l['key'] === 'unknown')).toBe(true);
    expect(text).not.toContain('key-run-a');
    expect(text).not.toContain('wrong-secret');
    expect(text).not.toContain(hashKey('key-run-a'));
  });
});

describe('the keys file is validated like the other settings', () => {
  it('refuses to start on a bad file, saying why', () => {
    const cases: Array<[unknown, string]> = [
      [{ keys: [] }, 'lists no key'],
      [{ keys: [{ ...entry('a', ['reward']), scopes: ['judge'] }] }, 'scopes'],
      [{ keys: [{ ...entry('a', ['reward']), sha256: 'abc' }] }, 'sha256'],
      [{ keys: [{ ...entry('a', ['reward']), key: 'plain' }] }, 'key'],
      [{ keys: [entry('a', ['reward']), entry('a', ['rank'])] }, 'listed twice'],
      [{ keys: [{ ...entry('a', ['reward']), weight: 0 }] }, 'weight'],
      [{ keys: [{ ...entry('a', ['reward']), budget_window_s: 60 }] }, 'needs token_budget'],
      [{ keys: [{ ...entry('a b', ['reward']) }] }, 'name'],
    ];
    for (const [file, why] of cases) {
      const path = join(mkdtempSync(join(tmpdir(), 'reward-keys-')), 'keys.json');
      writeFileSync(path, JSON.stringify(file));
      expect(() => loadConfig({ REWARD_KEYS: path }), why).toThrow(new RegExp(`REWARD_KEYS: .*${why}`));
    }
    expect(() => loadConfig({ REWARD_KEYS: '/nonexistent/keys.json' })).toThrow(/REWARD_KEYS: cannot read/);
    expect(() =>
      loadConfig({ REWARD_API_KEY: 'k', REWARD_KEYS: keysFile([entry('default', ['reward'])]) }),
    ).toThrow(/tenant of REWARD_API_KEY/);
    expect(() =>
      loadConfig({ REWARD_API_KEY: 'key-a', REWARD_KEYS: keysFile([entry('a', ['reward'])]) }),
    ).toThrow(/REWARD_API_KEY itself/);
  });
});

describe('reloading the keys file', () => {
  it('changes the keys while serving; a bad file keeps the old keys, logged and counted', async () => {
    const path = keysFile([entry('run-a', ['reward'])]);
    const config = loadConfig({ REWARD_KEYS: path });
    const keyring = createKeyring({ keys: config.keys });
    const h = await harness({ env: { REWARD_KEYS: path }, keyring });
    const status = async (name: string) =>
      (await h.app.inject({ method: 'POST', url: '/v1/reward', payload: group, headers: bearer(name) }))
        .statusCode;
    expect([await status('run-a'), await status('run-b')]).toEqual([200, 401]);

    // While a request runs, the file gains run-b and loses nothing: both serve, the running one finishes.
    const running = h.app.inject({
      method: 'POST',
      url: '/v1/reward',
      payload: { ...group, candidates: [candidate(9)] },
      headers: bearer('run-a'),
    });
    writeFileSync(path, JSON.stringify({ keys: [entry('run-a', ['reward']), entry('run-b', ['reward'])] }));
    expect(keyring.reload()).toEqual({ ok: true, tenants: 2 });
    expect((await running).statusCode).toBe(200);
    expect([await status('run-a'), await status('run-b')]).toEqual([200, 200]);

    // Invalid JSON, then a valid file with a bad scope: neither changes anything.
    const log = { info: () => undefined, warn: (f: Record<string, unknown>, m: string) => lines.push(m) };
    const lines: string[] = [];
    const metrics = createMetrics();
    for (const bad of ['{"keys": [', JSON.stringify({ keys: [{ ...entry('run-c', ['rewards']) }] })]) {
      writeFileSync(path, bad);
      const outcome = keyring.reload();
      expect(outcome.ok).toBe(false);
      reportReload(outcome, metrics.tenants, log);
      expect([await status('run-a'), await status('run-b'), await status('run-c')]).toEqual([200, 200, 401]);
    }
    expect(lines.every((m) => m.startsWith('keys file not reloaded, the old keys keep serving'))).toBe(true);
    expect(await counterValue(metrics.tenants.keyReloads, { outcome: 'invalid' })).toBe(2);

    // A removed key stops at once.
    writeFileSync(path, JSON.stringify({ keys: [entry('run-b', ['reward'])] }));
    expect(keyring.reload().ok).toBe(true);
    expect([await status('run-a'), await status('run-b')]).toEqual([401, 200]);
  });

  it('sees a changed file by polling it (watch), and checks a reload against REWARD_API_KEY', async () => {
    const path = keysFile([entry('run-a', ['reward'])]);
    const keyring = createKeyring({
      apiKey: 'legacy',
      keys: { path, entries: readKeysFile(path, 'legacy') },
    });
    const outcomes: boolean[] = [];
    const stop = keyring.watch(20, (o) => outcomes.push(o.ok));
    // The watch takes its first look at the file asynchronously: change it after that.
    await new Promise((resolve) => setTimeout(resolve, 200));
    try {
      writeFileSync(path, JSON.stringify({ keys: [entry('run-a', ['reward']), entry('run-b', ['rank'])] }));
      await waitFor(() => outcomes.length >= 1, 'the watch to reload');
      expect(keyring.authenticate('Bearer key-run-b')?.name).toBe('run-b');
      await new Promise((resolve) => setTimeout(resolve, 50)); // a later mtime
      writeFileSync(path, JSON.stringify({ keys: [entry('default', ['rank'])] }));
      await waitFor(() => outcomes.length >= 2, 'the second reload');
      expect(outcomes).toEqual([true, false]);
      expect(keyring.authenticate('Bearer key-run-b')?.name).toBe('run-b');
      expect(keyring.authenticate('Bearer legacy')?.name).toBe('default');
    } finally {
      stop();
    }
  });
});
