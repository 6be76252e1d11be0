/**
 * `npm run compare -- RUN_A RUN_B [--graphs a:b,c] [--json FILE]`: paired differences B − A of two finished
 * ablate runs (two `--out` folders, or `OUT/run-N`) on their shared items, and the items whose verdict
 * flipped. Markdown on stdout.
 */
import { writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { intOption, listOption, runMain } from '../cli-common.js';
import { DEFAULT_RESAMPLES } from '../stats/clustered.js';
import { renderComparison } from './report.js';
import { compareRuns } from './run.js';

const USAGE = `usage: npm run compare -- RUN_A RUN_B [options]

  RUN_A RUN_B          two finished ablate output folders (results.json + items.jsonl)
  --graphs a:b,c       graph pairs to compare (label in A:label in B, or one label for both);
                       default: every graph both runs have
  --json FILE          also write the comparison as JSON
  --seed S             seed of the estimates (default 1)`;

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({
    options: {
      graphs: { type: 'string' },
      json: { type: 'string' },
      seed: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
    allowPositionals: true,
  });
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  const [dirA, dirB] = positionals;
  if (dirA === undefined || dirB === undefined || positionals.length !== 2) {
    console.error(USAGE);
    return 2;
  }
  const pairs =
    values.graphs === undefined
      ? undefined
      : listOption(values.graphs).map((p) => {
          const [a = p, b = a] = p.split(':');
          return { a, b };
        });
  const comparison = await compareRuns(dirA, dirB, {
    pairs,
    seed: intOption('seed', values.seed, 1, 0),
    resamples: DEFAULT_RESAMPLES,
  });
  if (comparison.graphs.length === 0) {
    console.error(`no graph in common between ${dirA} and ${dirB}; name pairs with --graphs a:b`);
    return 2;
  }
  console.log(renderComparison(comparison));
  if (values.json !== undefined) {
    await writeFile(values.json, `${JSON.stringify(comparison, null, 2)}\n`);
    console.log(`written: ${values.json}`);
  }
  return 0;
}

runMain(main);
