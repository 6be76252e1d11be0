/**
 * What the serving services do for a request's tenant (REWARD_KEYS, `admission/fair-shares.ts`): its
 * cache scope in the judgment keys, and its spend in every backend call of the judgments it started.
 */
import { createHash } from 'node:crypto';

import type { JudgeObserver } from '../../judge/types.js';
import type { TenantWork } from '../admission/fair-shares.js';

/**
 * A judgment key within a cache scope (CACHE_SCOPE=tenant: the tenant's name), so that the LRU, the
 * single-flight and the shared tier never hand one tenant's judgment to another; `key` as is without one.
 */
export function scopedKey(key: string, scope: string | undefined): string {
  if (scope === undefined) return key;
  return createHash('sha256').update(`${scope.length}:${scope}|${key}`).digest('hex');
}

/** `observer`, also telling the tenant of every call (its token budget and `reward_tenant_tokens_total`). */
export function withSpend(observer: JudgeObserver, work: TenantWork | undefined): JudgeObserver {
  const onCall = work?.onCall;
  if (onCall === undefined) return observer;
  return {
    ...observer,
    onCall: (event) => {
      observer.onCall?.(event);
      onCall(event);
    },
  };
}
