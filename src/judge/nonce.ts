import { createHash, randomBytes } from 'node:crypto';

/** Nonces come from a pooled random buffer: one randomBytes call per 512 judgments instead of one each. */
let pool = Buffer.alloc(0);
let pos = 0;

/** A fresh 16-hex-character fence nonce. */
export function nextNonce(): string {
  if (pos + 8 > pool.length) {
    pool = randomBytes(4096);
    pos = 0;
  }
  pos += 8;
  return pool.toString('hex', pos - 8, pos);
}

/**
 * A reproducible 16-hex-character fence nonce for research runs (`ablate --seed`): sha256 of the seed and
 * the parts naming one judgment (graph key, item, epoch). Same seed and parts → same nonce → same prompts.
 * Serving never uses it: a rollout author who can predict the nonce can forge the fence.
 */
export function seededNonce(seed: number, ...parts: readonly string[]): string {
  return createHash('sha256')
    .update(JSON.stringify([seed, ...parts]))
    .digest('hex')
    .slice(0, 16);
}
