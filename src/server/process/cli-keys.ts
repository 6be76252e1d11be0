/**
 * `npm run keys -- new <name> [scope ...]`: makes a new bearer key for a tenant of REWARD_KEYS and prints
 * the key (give it to the run, once) and the keys-file entry holding only its SHA-256 (the file never
 * holds a key). Default scopes: `reward cancel`. `npm run keys -- hash` prints the SHA-256 of a key read
 * from stdin (an existing key). Exit status 2 on a usage error.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';

import { hashKey } from '../../config.js';
import { Scope, TenantName } from '../../settings/keys-file.js';

const USAGE = 'usage: npm run keys -- new <name> [scope ...]  |  npm run keys -- hash < key.txt';

/** A new key: 32 random bytes, base64url (43 characters), prefixed so a leaked one is recognisable. */
export const newKey = (): string => `rk_${randomBytes(32).toString('base64url')}`;

/** The keys-file entry of `name` with `scopes` for `key` (its hash only); throws on a bad name or scope. */
export function keyEntry(name: string, scopes: readonly string[], key: string): Record<string, unknown> {
  const checked = TenantName.safeParse(name);
  if (!checked.success) throw new Error(`name: ${checked.error.issues[0]?.message ?? 'invalid'}`);
  for (const s of scopes)
    if (!Scope.safeParse(s).success) throw new Error(`scope "${s}" is none of ${Scope.options.join(', ')}`);
  return { name, sha256: hashKey(key), scopes, weight: 1 };
}

function main(argv: readonly string[]): number {
  const [command, name, ...scopes] = argv;
  try {
    if (command === 'hash') {
      const key = readFileSync(0, 'utf8').trim();
      if (key === '') throw new Error('no key on stdin');
      process.stdout.write(`${hashKey(key)}\n`);
      return 0;
    }
    if (command === 'new' && name !== undefined) {
      const key = newKey();
      const entry = keyEntry(name, scopes.length > 0 ? scopes : ['reward', 'cancel'], key);
      process.stdout.write(`key (give it to the run; it is not stored anywhere): ${key}\n`);
      process.stdout.write(`entry for REWARD_KEYS' "keys" array:\n${JSON.stringify(entry)}\n`);
      return 0;
    }
  } catch (err) {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    return 2;
  }
  process.stderr.write(`${USAGE}\n`);
  return 2;
}

if (process.argv[1]?.endsWith('cli-keys.ts') === true || process.argv[1]?.endsWith('cli-keys.js') === true)
  process.exitCode = main(process.argv.slice(2));
