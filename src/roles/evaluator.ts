import { verdictRole, VerdictOutput } from './verdict.js';

/** The Evaluator reads the debate and gives the committee's verdict. */
export const EvaluatorOutput = VerdictOutput;

export const evaluator = verdictRole(
  'evaluator',
  [
    "You are the Evaluator, the committee's final decision-maker.",
    'Read the ground truth, the candidate and the debate so far, check the decisive arguments against the',
    'texts yourself, and give the verdict. Weigh arguments by their substance, not by how many members made',
    'them or how confident they sounded: the committee can be wrong.',
  ],
  'give the final verdict.',
);
