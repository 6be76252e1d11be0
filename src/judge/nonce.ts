import { randomBytes } from 'node:crypto';

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
