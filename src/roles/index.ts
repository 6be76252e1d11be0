import { createHash } from 'node:crypto';
import type { z } from 'zod';

import { analyst } from './analyst.js';
import { comparison, pick } from './comparison.js';
import { CRITERION_NAMES } from './criteria.js';
import { critic } from './critic.js';
import { evaluator } from './evaluator.js';
import { judge } from './judge.js';
import { lexical } from './lexical.js';
import { moderator } from './moderator.js';
import { rating } from './rating.js';
import { REVIEWER_FOCI, reviewer } from './reviewer.js';
import { STRICTNESS_LEVELS } from './strictness.js';
import type { ComparativeContext, Role, RoleContext } from './types.js';

export { analyst, critic, evaluator, judge, lexical, moderator, reviewer };

/** Every role by name. Look up untrusted names with `getRole` (a Map: no prototype keys). */
export const ROLES: ReadonlyMap<string, Role> = new Map<string, Role>([
  [moderator.name, moderator],
  [analyst.name, analyst],
  [critic.name, critic],
  [evaluator.name, evaluator],
  [judge.name, judge],
  [reviewer.name, reviewer],
  [lexical.name, lexical],
]);

/** The role of that name, or undefined. */
export function getRole(name: string): Role | undefined {
  return ROLES.get(name);
}

// A fixed, empty context: rendering it yields each prompt's template text with no data in it.
const PROBE: RoleContext = {
  question: '',
  candidate: '',
  groundTruth: '',
  nonce: 'VERSIONPROBE',
  round: 1,
  rounds: 1,
  node: { id: 'probe' },
  visible: [],
};

function promptVersion(): string {
  const hash = createHash('sha256');
  for (const role of ROLES.values()) {
    hash.update(`role:${role.name}\n`);
    // Reviewer prompts depend on the node's focus: hash every variant.
    const contexts =
      role.name === reviewer.name
        ? REVIEWER_FOCI.map((focus) => ({ ...PROBE, node: { id: 'probe', focus } }))
        : [PROBE];
    for (const ctx of contexts) {
      const prompt = role.render(ctx);
      hash.update(`system:${prompt.system}\nuser:${prompt.user}\n`);
    }
    // Strictness variants (node option `strictness`) of every role's prompt.
    for (const strictness of STRICTNESS_LEVELS) {
      if (strictness === 'neutral') continue;
      const prompt = role.render({ ...PROBE, node: { id: 'probe', strictness } });
      hash.update(`strictness:${strictness}\nuser:${prompt.user}\n`);
    }
    hash.update(`schema:${JSON.stringify(role.jsonSchema)}\n`);
  }
  return hash.digest('hex').slice(0, 12);
}

/**
 * 12-hex sha256 over every role's system prompt(s), user template and output JSON Schema. Stable across
 * runs; changes whenever a prompt or schema changes. Reported with every judgment.
 */
export const PROMPT_VERSION: string = promptVersion();

export { comparison, pick, rating };

/** The roles of comparative judging (not graph nodes), by name. */
export const COMPARATIVE_ROLES = new Map<string, typeof comparison | typeof pick | typeof rating>([
  [comparison.name, comparison],
  [pick.name, pick],
  [rating.name, rating],
]);

/** The output schema of a comparative role, or undefined. */
export function getComparativeSchema(name: string): z.ZodType | undefined {
  return COMPARATIVE_ROLES.get(name)?.output;
}

/** True for the context of a comparative role (graph roles' contexts carry no `kind`). */
export function isComparativeContext(ctx: RoleContext | ComparativeContext): ctx is ComparativeContext {
  return 'kind' in ctx;
}

function comparativePromptVersion(): string {
  const hash = createHash('sha256');
  const base = { question: '', nonce: 'VERSIONPROBE' };
  for (const criterion of CRITERION_NAMES) {
    for (const groundTruth of ['', null]) {
      const shared = { ...base, criterion, groundTruth };
      const prompts = [
        comparison.render({ ...shared, kind: 'pair', a: '', b: '' }),
        pick.render({ ...shared, kind: 'pick', candidates: ['', ''] }),
        rating.render({ ...shared, kind: 'rating', idea: '' }),
      ];
      for (const p of prompts) hash.update(`system:${p.system}\nuser:${p.user}\n`);
    }
  }
  for (const role of COMPARATIVE_ROLES.values()) hash.update(`schema:${JSON.stringify(role.jsonSchema)}\n`);
  return hash.digest('hex').slice(0, 12);
}

/**
 * 12-hex sha256 over every comparative role's prompts (each criterion, with and without ground truth) and
 * schemas. Separate from PROMPT_VERSION so changing a comparison prompt does not invalidate judgment caches.
 */
export const COMPARATIVE_PROMPT_VERSION: string = comparativePromptVersion();
