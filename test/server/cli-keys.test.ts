/**
 * `npm run keys` (issue 30 item 1): a new key's entry is a valid keys-file entry that holds its hash only,
 * and the key authenticates as that tenant; a bad name or scope is refused.
 */
import { describe, expect, it } from 'vitest';

import { keyEntry, newKey } from '../../src/server/process/cli-keys.js';
import { createKeyring } from '../../src/server/tenants/keyring.js';
import { parseKeysFile } from '../../src/settings/keys-file.js';

describe('npm run keys', () => {
  it('makes a key whose entry holds its SHA-256 only and authenticates as the tenant', () => {
    const key = newKey();
    expect(key).toMatch(/^rk_[A-Za-z0-9_-]{43}$/);
    expect(newKey()).not.toBe(key);
    const entry = keyEntry('run-a', ['reward', 'cancel'], key);
    expect(JSON.stringify(entry)).not.toContain(key.slice(3));
    const entries = parseKeysFile({ keys: [entry] });
    const keyring = createKeyring({ keys: { path: '/nonexistent', entries } });
    expect(keyring.authenticate(`Bearer ${key}`)?.name).toBe('run-a');
    expect([...(keyring.authenticate(`Bearer ${key}`)?.scopes ?? [])]).toEqual(['reward', 'cancel']);
    expect(keyring.authenticate(`Bearer ${newKey()}`)).toBeUndefined();
  });

  it('refuses a name that is not a plain label and an unknown scope', () => {
    expect(() => keyEntry('run a', ['reward'], newKey())).toThrow(/name/);
    expect(() => keyEntry('run-a', ['rewards'], newKey())).toThrow(/scope "rewards"/);
  });
});
