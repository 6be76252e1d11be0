/**
 * Strictness variants of a member's prompt (node option `strictness`): one extra member line after the
 * candidate, so members of a group still share their prompt up to the candidate (the prefix cache).
 * `neutral` (the default) adds nothing. The texts are part of PROMPT_VERSION.
 */
export type Strictness = 'lenient' | 'neutral' | 'strict';
export const STRICTNESS_LEVELS: readonly Strictness[] = ['lenient', 'neutral', 'strict'];

export const STRICTNESS_TEXT: Readonly<Record<Strictness, string>> = {
  lenient:
    'Calibration note for this member: you have been rejecting too many true matches. Say "match" when the ' +
    'core method is the same even if details, wording or secondary components differ.',
  neutral: '',
  strict:
    'Calibration note for this member: you have been accepting too many near-misses. Say "match" only when ' +
    'the core method itself is the same; a shared topic, goal or terminology is not enough.',
};
