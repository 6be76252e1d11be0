import { compileGraph, type CompiledGraph, type GraphNode, type GraphSpecInput } from './graph.js';

/** Parallel members sample at this temperature with distinct seeds, so a vote is N opinions, not one. */
const PARALLEL_TEMPERATURE = 0.7;

const evaluator: GraphNode = {
  id: 'evaluator',
  role: 'evaluator',
  stage: 'final',
  sees: 'all',
  temperature: 0,
};
const moderator: GraphNode = { id: 'moderator', role: 'moderator', temperature: 0 };

function analysts(n: number): GraphSpecInput {
  const members = Array.from({ length: n }, (_, i) => ({
    id: `analyst_${i + 1}`,
    role: 'analyst',
    temperature: PARALLEL_TEMPERATURE,
    seed: i + 1,
  }));
  return {
    description: `${n} independent Analysts in parallel, then an Evaluator reads them and decides`,
    decision: { rule: 'evaluator', node: 'evaluator' },
    nodes: [...members, evaluator],
  };
}

function vote(n: number): GraphSpecInput {
  return {
    description: `${n} independent single judges (distinct seeds), majority vote; ties → no_match`,
    decision: { rule: 'majority' },
    nodes: Array.from({ length: n }, (_, i) => ({
      id: `judge_${i + 1}`,
      role: 'judge',
      temperature: PARALLEL_TEMPERATURE,
      seed: i + 1,
    })),
  };
}

const ordinary: GraphSpecInput = {
  description: 'Moderator → Analyst → Critic → Evaluator (paper reference configuration)',
  decision: { rule: 'evaluator', node: 'evaluator' },
  nodes: [
    moderator,
    { id: 'analyst', role: 'analyst', sees: ['moderator'], temperature: 0 },
    { id: 'critic', role: 'critic', sees: ['moderator', 'analyst'], temperature: 0 },
    evaluator,
  ],
};

/** `ordinary` without one node; `sees` lists drop the removed id. */
function without(id: string, decision?: GraphSpecInput['decision']): GraphSpecInput {
  return {
    description: `ordinary without the ${id}`,
    decision: decision ?? ordinary.decision,
    nodes: ordinary.nodes
      .filter((n) => n.id !== id)
      .map((n) => (Array.isArray(n.sees) ? { ...n, sees: n.sees.filter((s) => s !== id) } : n)),
  };
}

/** Rounds of the full debate: the openings, then two rebuttal rounds answering the other debater. */
const DEBATE_ROUNDS = 3;

/**
 * The debate family (issue 40 item 7): an Analyst and a Critic argue, then the Evaluator reads every turn and
 * decides. Round 1 is the openings, written independently (neither debater sees the other's turn of the same
 * round); from round 2 on each reads every earlier turn (a debate is public) and answers it. The three presets
 * differ only in the rule under study, so `ablate` compares the rules themselves: `debate` (rebuttals),
 * `debate-opening` (openings only), `debate-consensus` (rebuttals that stop once the debaters agree).
 */
function debate(summary: string, rounds: number, earlyStop?: GraphSpecInput['early_stop']): GraphSpecInput {
  return {
    description: `Analyst and Critic debate, the Evaluator reads every turn and decides: ${summary}`,
    rounds,
    ...(earlyStop === undefined ? {} : { early_stop: earlyStop }),
    decision: { rule: 'evaluator', node: 'evaluator' },
    nodes: [
      { id: 'analyst', role: 'analyst', temperature: 0 },
      { id: 'critic', role: 'critic', temperature: 0 },
      evaluator,
    ],
  };
}

const SPECS: ReadonlyArray<readonly [string, GraphSpecInput]> = [
  ['analysts-2', analysts(2)],
  ['ordinary', ordinary],
  ['no-analyst', without('analyst')],
  ['no-critic', without('critic')],
  ['no-moderator', without('moderator')],
  [
    'no-evaluator',
    {
      ...without('evaluator', { rule: 'unanimous', nodes: ['analyst', 'critic'] }),
      description:
        'ordinary without the Evaluator: match only if Analyst and Critic both say match (unanimity)',
    },
  ],
  ['analysts-3', analysts(3)],
  ['analysts-4', analysts(4)],
  ['analysts-6', analysts(6)],
  [
    'ordinary-plus',
    {
      description: 'ordinary plus a second Critic and a second Analyst, each answering the previous turn',
      decision: { rule: 'evaluator', node: 'evaluator' },
      nodes: [
        moderator,
        { id: 'analyst_1', role: 'analyst', sees: ['moderator'], temperature: 0 },
        { id: 'critic_1', role: 'critic', sees: ['moderator', 'analyst_1'], temperature: 0 },
        { id: 'analyst_2', role: 'analyst', sees: ['moderator', 'analyst_1', 'critic_1'], temperature: 0 },
        {
          id: 'critic_2',
          role: 'critic',
          sees: ['moderator', 'analyst_1', 'critic_1', 'analyst_2'],
          temperature: 0,
        },
        evaluator,
      ],
    },
  ],
  [
    'single-judge',
    {
      description: 'one LLM call that answers the verdict directly (LLM-as-judge baseline)',
      decision: { rule: 'evaluator', node: 'judge' },
      nodes: [{ id: 'judge', role: 'judge', temperature: 0 }],
    },
  ],
  ['vote-3', vote(3)],
  [
    'proposer-critic',
    {
      description:
        'Analyst defends a stance, Critic objects; up to 3 rounds, stop when they agree; ' +
        'match only if both end on match (the Critic accepted)',
      rounds: 3,
      early_stop: { kind: 'unanimous' },
      decision: { rule: 'unanimous', nodes: ['proposer', 'critic'] },
      nodes: [
        { id: 'proposer', role: 'analyst', temperature: 0 },
        { id: 'critic', role: 'critic', sees: ['proposer'], temperature: 0 },
      ],
    },
  ],
  [
    'debate',
    debate(
      `independent openings, then ${DEBATE_ROUNDS - 1} rebuttal rounds, each answering the other's turns`,
      DEBATE_ROUNDS,
    ),
  ],
  ['debate-opening', debate('the openings only (one round, written independently), no rebuttal', 1)],
  [
    'debate-consensus',
    debate(
      `the rebuttal debate (up to ${DEBATE_ROUNDS} rounds) stopped after the first round in which ` +
        'Analyst and Critic hold the same stance',
      DEBATE_ROUNDS,
      { kind: 'unanimous' },
    ),
  ],
  [
    'round-robin-3',
    {
      description:
        'three independent reviewers (methodology, statistics, novelty focus), confidence-weighted vote',
      decision: { rule: 'confidence_weighted' },
      nodes: [
        { id: 'methodology', role: 'reviewer', focus: 'methodology', temperature: 0 },
        { id: 'statistics', role: 'reviewer', focus: 'statistics', temperature: 0 },
        { id: 'novelty', role: 'reviewer', focus: 'novelty', temperature: 0 },
      ],
    },
  ],
  [
    'cascade',
    {
      description:
        'single-judge first; a no_match with confidence ≥ 0.8 stops there (cascade_stop), anything else ' +
        'escalates to the default committee (escalated)',
      decision: { rule: 'evaluator', node: 'judge' },
      nodes: [{ id: 'judge', role: 'judge', temperature: 0 }],
      cascade: { escalate_to: 'default', stop_on: 'no_match', threshold: 0.8 },
    },
  ],
  [
    'lexical',
    {
      description: 'no LLM: TF-IDF cosine between idea and ground truth against a fixed threshold',
      decision: { rule: 'evaluator', node: 'lexical' },
      nodes: [{ id: 'lexical', role: 'lexical' }],
    },
  ],
];

/** The default judge: the paper's chosen committee. */
export const DEFAULT_GRAPH = 'analysts-2';

function buildPresets(): Map<string, CompiledGraph> {
  const presets = new Map<string, CompiledGraph>();
  const resolve = (name: string): CompiledGraph | undefined =>
    presets.get(name === 'default' ? DEFAULT_GRAPH : name);
  for (const [name, spec] of SPECS) presets.set(name, compileGraph(spec, name, { resolve }));
  const fallback = presets.get(DEFAULT_GRAPH);
  if (fallback !== undefined) presets.set('default', fallback);
  return presets;
}

/** Every preset of DESIGN §3 by name, plus `default` (the same compiled graph as `analysts-2`). */
export const PRESETS: ReadonlyMap<string, CompiledGraph> = buildPresets();

export function getPreset(name: string): CompiledGraph | undefined {
  return PRESETS.get(name);
}

/** Compiles an inline spec whose cascade may escalate to a preset by name. */
export function compileSpec(input: unknown, name?: string): CompiledGraph {
  return compileGraph(input, name, { resolve: getPreset });
}

/** N independent single judges with majority vote: the equal-budget baseline for an N-call graph. */
export function voteGraph(n: number): CompiledGraph {
  const preset = PRESETS.get(`vote-${n}`);
  return preset ?? compileGraph(vote(n), `vote-${n}`);
}
