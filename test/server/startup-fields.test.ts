/**
 * Issue 38 item 5: the start-up line's `auth` field reads every source of keys — REWARD_API_KEY and the
 * keys file REWARD_KEYS — as the keyring does, so it never says `off` while requests need a key.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { hashKey, loadConfig } from '../../src/config.js';
import { startupFields } from '../../src/server/process/startup.js';
import { createKeyring } from '../../src/server/tenants/keyring.js';

function keysFile(names: readonly string[]): string {
  const path = join(mkdtempSync(join(tmpdir(), 'startup-keys-')), 'keys.json');
  const keys = names.map((name) => ({ name, sha256: hashKey(`key-${name}`), scopes: ['reward'] }));
  writeFileSync(path, JSON.stringify({ keys }));
  return path;
}

describe('startupFields auth', () => {
  const cases: Array<[string, () => Record<string, string>]> = [
    ['no key at all', () => ({})],
    ['REWARD_API_KEY only', () => ({ REWARD_API_KEY: 'hunter5' })],
    ['REWARD_KEYS only', () => ({ REWARD_KEYS: keysFile(['run-a', 'run-b']) })],
    ['both', () => ({ REWARD_API_KEY: 'hunter5', REWARD_KEYS: keysFile(['run-a']) })],
  ];
  it.each(cases)('says auth is on exactly when the keyring requires a key (%s)', (_name, env) => {
    const config = loadConfig(env());
    const keyring = createKeyring({ apiKey: config.apiKey, keys: config.keys });
    const fields = startupFields(config, 'offline');
    expect(fields['auth']).toBe(keyring.open ? 'off' : 'on');
    expect(JSON.stringify(fields)).not.toMatch(/hunter|key-run/);
  });

  it('names the keys file and how many keys it holds, never a key', () => {
    const path = keysFile(['run-a', 'run-b']);
    const fields = startupFields(loadConfig({ REWARD_KEYS: path }), 'offline');
    expect(fields).toMatchObject({
      auth: 'on',
      auth_keys: { api_key: 'none', keys_file: { path, keys: 2 } },
    });
  });
});
