import { createHash } from 'node:crypto';
import { analyst } from './analyst.js';
import { critic } from './critic.js';
import { evaluator } from './evaluator.js';
import { judge } from './judge.js';
import { lexical } from './lexical.js';
import { moderator } from './moderator.js';
import { REVIEWER_FOCI, reviewer } from './reviewer.js';
import { STRICTNESS_LEVELS } from './strictness.js';
import type { Role, RoleContext } from './types.js';

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
