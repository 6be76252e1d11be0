import { describe, expect, it } from 'vitest';

import { RewardError } from '../../src/errors.js';
import { compileGraph, graphHash, GraphSpec } from '../../src/judge/graph.js';
import { compileSpec, PRESETS, getPreset, voteGraph } from '../../src/judge/presets.js';

function invalidMessage(spec: unknown): string {
  try {
    compileGraph(spec);
  } catch (err) {
    expect(err).toBeInstanceOf(RewardError);
    expect((err as RewardError).code).toBe('RW_INVALID_GRAPH');
    return (err as RewardError).message;
  }
  throw new Error('expected the spec to be rejected');
}

const evaluator = { id: 'evaluator', role: 'evaluator', stage: 'final', sees: 'all' };

describe('presets', () => {
  const names = [
    'default',
    'cascade',
    'analysts-2',
    'ordinary',
    'no-analyst',
    'no-critic',
    'no-moderator',
    'no-evaluator',
    'analysts-3',
    'analysts-4',
    'analysts-6',
    'ordinary-plus',
    'single-judge',
    'vote-3',
    'proposer-critic',
    'debate',
    'debate-opening',
    'debate-consensus',
    'round-robin-3',
    'lexical',
  ];

  it('has every preset of the design table, each validating', () => {
    expect([...PRESETS.keys()].sort()).toEqual([...names].sort());
    for (const [name, graph] of PRESETS) {
      expect(() => compileSpec(graph.spec, name)).not.toThrow();
      expect(graph.hash).toMatch(/^[0-9a-f]{16}$/);
    }
  });

  it('default is analysts-2 under its own name', () => {
    expect(getPreset('default')?.name).toBe('analysts-2');
    expect(getPreset('default')?.hash).toBe(getPreset('analysts-2')?.hash);
  });

  it('counts calls and the critical path', () => {
    const counts = Object.fromEntries(
      [...PRESETS].map(([n, g]) => [n, [g.llmCallsPerJudgment, g.criticalPathCalls]]),
    );
    expect(counts['analysts-2']).toEqual([3, 2]);
    expect(counts['analysts-6']).toEqual([7, 2]);
    expect(counts['ordinary']).toEqual([4, 4]);
    expect(counts['no-evaluator']).toEqual([3, 3]);
    expect(counts['vote-3']).toEqual([3, 1]);
    expect(counts['single-judge']).toEqual([1, 1]);
    expect(counts['proposer-critic']).toEqual([6, 6]);
    // Analyst ∥ Critic per round, then the Evaluator: 2 calls a round + 1, one call of latency a round + 1.
    expect(counts['debate']).toEqual([7, 4]);
    expect(counts['debate-opening']).toEqual([3, 2]);
    expect(counts['debate-consensus']).toEqual([7, 4]);
    expect(counts['round-robin-3']).toEqual([3, 1]);
    expect(counts['lexical']).toEqual([0, 0]);
  });

  it('the debate family differs only in the rule under study (issue 40 item 7)', () => {
    const [full, opening, consensus] = ['debate', 'debate-opening', 'debate-consensus'].map((n) =>
      getPreset(n)!,
    );
    // Rounds and the stop rule: rebuttals, openings only, rebuttals stopped on agreement.
    expect([full!.spec.rounds, opening!.spec.rounds, consensus!.spec.rounds]).toEqual([3, 1, 3]);
    expect(full!.spec.early_stop).toBeUndefined();
    expect(opening!.spec.early_stop).toBeUndefined();
    expect(consensus!.spec.early_stop).toEqual({ kind: 'unanimous' });
    for (const g of [full!, opening!, consensus!]) {
      // Same nodes and decision: only `rounds` / `early_stop` differ.
      expect(g.spec.nodes).toEqual(full!.spec.nodes);
      expect(g.spec.decision).toEqual({ rule: 'evaluator', node: 'evaluator' });
      // The openings are independent (no same-round input); later rounds see every earlier turn.
      expect(g.debate.map((r) => [r.node.id, r.node.role, r.deps])).toEqual([
        ['analyst', 'analyst', []],
        ['critic', 'critic', []],
      ]);
      expect(g.final.map((r) => [r.node.id, r.role.name, r.deps])).toEqual([
        ['evaluator', 'evaluator', ['analyst', 'critic']],
      ]);
      expect(g.voters).toEqual(['analyst', 'critic', 'evaluator']);
    }
    expect(new Set([full!.hash, opening!.hash, consensus!.hash]).size).toBe(3);
  });

  it('unknown names are not found, including prototype keys', () => {
    expect(getPreset('constructor')).toBeUndefined();
    expect(getPreset('__proto__')).toBeUndefined();
  });

  it('builds equal-budget vote baselines', () => {
    expect(voteGraph(3).hash).toBe(getPreset('vote-3')?.hash);
    const v7 = voteGraph(7);
    expect(v7.name).toBe('vote-7');
    expect(v7.llmCallsPerJudgment).toBe(7);
  });
});

describe('graph hash', () => {
  it('is stable across key order and ignores name/description', () => {
    const a = GraphSpec.parse({
      decision: { rule: 'majority' },
      nodes: [{ id: 'a', role: 'judge' }],
      rounds: 1,
    });
    const b = GraphSpec.parse({
      nodes: [{ role: 'judge', id: 'a' }],
      name: 'x',
      decision: { rule: 'majority' },
    });
    expect(graphHash(a)).toBe(graphHash(b));
  });

  it('changes when a sampling parameter changes', () => {
    const base = getPreset('analysts-2')!.spec;
    const changed = {
      ...base,
      nodes: base.nodes.map((n) => (n.id === 'evaluator' ? { ...n, temperature: 0.5 } : n)),
    };
    expect(compileGraph(changed).hash).not.toBe(getPreset('analysts-2')!.hash);
  });
});

describe('graph validation', () => {
  it('rejects an unknown role naming the node', () => {
    const msg = invalidMessage({
      decision: { rule: 'evaluator', node: 'evaluator' },
      nodes: [{ id: 'oracle', role: 'oracle' }, evaluator],
    });
    expect(msg).toContain("node 'oracle'");
    expect(msg).toContain("unknown role 'oracle'");
  });

  it('rejects a dangling sees naming both nodes', () => {
    const msg = invalidMessage({
      decision: { rule: 'evaluator', node: 'evaluator' },
      nodes: [{ id: 'analyst', role: 'analyst', sees: ['ghost'] }, evaluator],
    });
    expect(msg).toContain("node 'analyst'");
    expect(msg).toContain("'ghost'");
  });

  it('rejects a cycle naming the nodes in it', () => {
    const msg = invalidMessage({
      decision: { rule: 'evaluator', node: 'evaluator' },
      nodes: [
        { id: 'analyst', role: 'analyst', sees: ['critic'] },
        { id: 'critic', role: 'critic', sees: ['analyst'] },
        evaluator,
      ],
    });
    expect(msg).toContain('cycle');
    expect(msg).toContain("'analyst'");
    expect(msg).toContain("'critic'");
  });

  it('rejects a graph whose deciding node is missing', () => {
    const msg = invalidMessage({
      decision: { rule: 'evaluator', node: 'evaluator' },
      nodes: [{ id: 'analyst', role: 'analyst' }],
    });
    expect(msg).toContain("no deciding node 'evaluator'");
  });

  it('rejects a deciding node whose role cannot decide', () => {
    const msg = invalidMessage({
      decision: { rule: 'evaluator', node: 'moderator' },
      nodes: [{ id: 'moderator', role: 'moderator' }],
    });
    expect(msg).toContain("node 'moderator'");
  });

  it('takes a voting rule name as shorthand for the decision object, and names the object form otherwise (issue 40)', () => {
    const nodes = [
      { id: 'a', role: 'analyst', seed: 1, temperature: 0.7 },
      { id: 'b', role: 'analyst', seed: 2, temperature: 0.7 },
      { id: 'c', role: 'analyst', seed: 3, temperature: 0.7 },
    ];
    for (const rule of ['majority', 'unanimous', 'confidence_weighted'] as const) {
      const short = compileGraph({ decision: rule, nodes });
      expect(short.spec.decision).toEqual({ rule });
      expect(short.hash).toBe(compileGraph({ decision: { rule }, nodes }).hash);
    }
    for (const bad of ['evaluator', 'plurality']) {
      const msg = invalidMessage({ decision: bad, nodes });
      expect(msg).toContain(`"${bad}" is not a decision`);
      expect(msg).toContain('{"rule": "evaluator", "node": ID}');
      expect(msg).not.toContain('expected object, received string');
    }
  });

  it('rejects a vote with a stance-less voter', () => {
    const msg = invalidMessage({
      decision: { rule: 'majority', nodes: ['moderator'] },
      nodes: [{ id: 'moderator', role: 'moderator' }],
    });
    expect(msg).toContain("voter 'moderator'");
  });

  it('rejects identical parallel members', () => {
    const msg = invalidMessage({
      decision: { rule: 'majority' },
      nodes: [
        { id: 'j1', role: 'judge', temperature: 0.7, seed: 1 },
        { id: 'j2', role: 'judge', temperature: 0.7, seed: 1 },
      ],
    });
    expect(msg).toContain("nodes 'j1' and 'j2'");
  });

  it('rejects parallel members that differ only by seed at temperature 0', () => {
    expect(() =>
      compileGraph({
        decision: { rule: 'majority' },
        nodes: [
          { id: 'j1', role: 'judge', seed: 1 },
          { id: 'j2', role: 'judge', seed: 2 },
        ],
      }),
    ).toThrow(/identical parallel/);
  });

  it('rejects unknown keys and bad types with the field path', () => {
    const msg = invalidMessage({
      decision: { rule: 'majority' },
      nodes: [{ id: 'j1', role: 'judge', temprature: 0.7 }],
    });
    expect(msg).toContain('nodes.0');
    expect(invalidMessage({ decision: { rule: 'majority' }, nodes: [], rounds: 9 })).toContain('rounds');
  });

  it('rejects duplicate ids and self-references', () => {
    expect(
      invalidMessage({
        decision: { rule: 'majority' },
        nodes: [
          { id: 'a', role: 'judge', temperature: 0.5, seed: 1 },
          { id: 'a', role: 'judge', temperature: 0.5, seed: 2 },
        ],
      }),
    ).toContain("node 'a': duplicate");
    expect(
      invalidMessage({ decision: { rule: 'majority' }, nodes: [{ id: 'a', role: 'judge', sees: ['a'] }] }),
    ).toContain("node 'a': sees itself");
  });
});
