import { verdictRole, VerdictOutput } from './verdict.js';

/** A single LLM-as-judge: one call, the verdict directly (the baseline and the vote member). */
export const JudgeOutput = VerdictOutput;

export const judge = verdictRole(
  'judge',
  [
    'You are an expert reviewer judging alone.',
    "Identify the ground truth's key mechanism and critical assumptions, identify the candidate's, compare",
    'them, and give your verdict.',
  ],
  "decide whether the candidate matches the ground truth's core method.",
);
