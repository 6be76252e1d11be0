/**
 * Operator limits on inline graph specs (a request body's `graph` object). A preset is the operator's own
 * choice; an inline graph is the caller's, so it runs only when the operator allows it and within these
 * bounds. Pure: the server passes the policy from config and the model names its routing knows.
 */
import { RewardError } from '../errors.js';
import { allNodes, type CompiledGraph } from './graph.js';

export interface InlineGraphPolicy {
  /** ALLOW_INLINE_GRAPHS. */
  allowed: boolean;
  /** Most LLM calls one judgment may make (a cascade counts both stages). */
  maxCalls: number;
  maxRounds: number;
  /** Largest `max_tokens` a node may ask for. */
  maxTokens: number;
  /** Model names a node may pick: the configured backends' and routes' models. */
  models: ReadonlySet<string>;
}

function refuse(message: string, details: Record<string, unknown>): RewardError {
  return new RewardError('RW_GRAPH_NOT_ALLOWED', message, { details });
}

function roundsOf(graph: CompiledGraph): number {
  const own = graph.spec.rounds;
  return graph.cascade === undefined ? own : Math.max(own, roundsOf(graph.cascade.then));
}

/** Throws 403 RW_GRAPH_NOT_ALLOWED unless the operator allows inline graphs at all (checked before compiling). */
export function assertInlineAllowed(policy: Pick<InlineGraphPolicy, 'allowed'>): void {
  if (!policy.allowed) {
    throw refuse('inline graphs are disabled on this server (ALLOW_INLINE_GRAPHS); name a preset instead', {
      limit: 'ALLOW_INLINE_GRAPHS',
    });
  }
}

/** Throws 403 RW_GRAPH_NOT_ALLOWED (naming the limit) unless `graph` is within the policy. */
export function checkInlineGraph(graph: CompiledGraph, policy: InlineGraphPolicy): void {
  assertInlineAllowed(policy);
  if (graph.llmCallsPerJudgment > policy.maxCalls) {
    throw refuse(
      `graph makes up to ${graph.llmCallsPerJudgment} LLM calls per judgment; at most ${policy.maxCalls} (INLINE_MAX_CALLS)`,
      { limit: 'INLINE_MAX_CALLS', value: graph.llmCallsPerJudgment, max: policy.maxCalls },
    );
  }
  const rounds = roundsOf(graph);
  if (rounds > policy.maxRounds) {
    throw refuse(`graph runs ${rounds} rounds; at most ${policy.maxRounds} (INLINE_MAX_ROUNDS)`, {
      limit: 'INLINE_MAX_ROUNDS',
      value: rounds,
      max: policy.maxRounds,
    });
  }
  for (const { node } of allNodes(graph)) {
    if (node.max_tokens !== undefined && node.max_tokens > policy.maxTokens) {
      throw refuse(
        `node "${node.id}": max_tokens ${node.max_tokens}; at most ${policy.maxTokens} (INLINE_MAX_TOKENS)`,
        { limit: 'INLINE_MAX_TOKENS', node: node.id, value: node.max_tokens, max: policy.maxTokens },
      );
    }
    if (node.model !== undefined && !policy.models.has(node.model)) {
      throw refuse(
        `node "${node.id}": model "${node.model.slice(0, 100)}" is not configured on this server (JUDGE_MODEL or the routing file)`,
        { limit: 'models', node: node.id, allowed: [...policy.models].slice(0, 50) },
      );
    }
  }
}
