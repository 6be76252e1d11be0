/**
 * `npm run plan -- --rollouts 6144 [--group-size 16] [--graph NAME] [--timeout-s 180] [--url URL]
 * [--api-key KEY] [--json]`: asks a running server for its capacity plan (`POST /v1/plan`) and prints it.
 * It asks the server rather than computing offline because the plan is made of what that server measured
 * (call latency, drain rate, tokens per judgment) under its own limits; a server that has judged nothing
 * yet answers `calibrated: false`. Exit status: 0 when the step fits, 1 when it does not, 2 on an error.
 */
import type { Plan } from '../admission/plan.js';

interface Args {
  url: string;
  rollouts?: number | undefined;
  groupSize: number;
  graph?: string | undefined;
  timeoutS?: number | undefined;
  apiKey?: string | undefined;
  json: boolean;
}

const USAGE =
  'usage: npm run plan -- --rollouts N [--group-size N] [--graph NAME] [--timeout-s S] [--url URL] [--api-key KEY] [--json]';

function parse(argv: readonly string[]): Args {
  const args: Args = { url: 'http://127.0.0.1:8080', groupSize: 16, json: false };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i] ?? '';
    const value = (): string => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${flag} needs a value`);
      return v;
    };
    const positive = (): number => {
      const n = Number(value());
      if (!Number.isFinite(n) || n <= 0) throw new Error(`${flag} must be a positive number`);
      return n;
    };
    switch (flag) {
      case '--url':
        args.url = value().replace(/\/+$/, '');
        break;
      case '--rollouts':
        args.rollouts = positive();
        break;
      case '--group-size':
        args.groupSize = positive();
        break;
      case '--graph':
        args.graph = value();
        break;
      case '--timeout-s':
        args.timeoutS = positive();
        break;
      case '--api-key':
        args.apiKey = value();
        break;
      case '--json':
        args.json = true;
        break;
      default:
        throw new Error(`unknown option ${flag}`);
    }
  }
  if (args.rollouts === undefined) throw new Error('--rollouts is required');
  return args;
}

/** The plan as an operator reads it: one `key  value` line each. */
function formatPlan(plan: Plan): string {
  const tokens = (n: number | null): string =>
    n === null ? 'unknown (nothing judged yet)' : n.toLocaleString('en');
  const lines: Array<[string, string]> = [
    [
      'step',
      `${plan.rollouts} rollouts in ${plan.requests} requests of ${plan.group_size} (${plan.graph.name})`,
    ],
    ['calls', plan.calls.toLocaleString('en')],
    ['prompt_tokens', tokens(plan.prompt_tokens)],
    ['completion_tokens', tokens(plan.completion_tokens)],
    ['predicted_wall_s', `${plan.predicted_wall_s} (deadline ${plan.deadline_s} s)`],
    ['fits', plan.fits ? 'yes' : `no: ${plan.blocking.join(', ')}`],
    ['limiting', plan.limiting],
    ['calibrated', plan.calibrated ? 'yes' : 'no (call latency or tokens not measured yet: estimates)'],
    [
      'drain',
      `${plan.drain_calls_per_s} calls/s, ${plan.call_latency_s} s per call, ${plan.calls_per_judgment} calls per judgment`,
    ],
  ];
  if (plan.budget_remaining_tokens !== null)
    lines.push(['budget_remaining', plan.budget_remaining_tokens.toLocaleString('en')]);
  return lines.map(([k, v]) => `${k.padEnd(18)} ${v}`).join('\n');
}

function isPlan(value: unknown): value is Plan {
  if (value === null || typeof value !== 'object') return false;
  const fits: unknown = Reflect.get(value, 'fits');
  const calls: unknown = Reflect.get(value, 'calls');
  const blocking: unknown = Reflect.get(value, 'blocking');
  return typeof fits === 'boolean' && typeof calls === 'number' && Array.isArray(blocking);
}

async function main(argv: readonly string[]): Promise<number> {
  let args: Args;
  try {
    args = parse(argv);
  } catch (err) {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n${USAGE}\n`);
    return 2;
  }
  const res = await fetch(`${args.url}/v1/plan`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(args.apiKey === undefined ? {} : { authorization: `Bearer ${args.apiKey}` }),
    },
    body: JSON.stringify({
      rollouts: args.rollouts,
      group_size: args.groupSize,
      ...(args.graph === undefined ? {} : { graph: args.graph }),
      ...(args.timeoutS === undefined ? {} : { timeout_s: args.timeoutS }),
    }),
    signal: AbortSignal.timeout(10_000),
  });
  const body: unknown = await res.json();
  if (!res.ok) {
    process.stderr.write(`${args.url}/v1/plan answered ${res.status}: ${JSON.stringify(body)}\n`);
    return 2;
  }
  if (!isPlan(body)) {
    process.stderr.write(
      `${args.url}/v1/plan answered something else than a plan: ${JSON.stringify(body)}\n`,
    );
    return 2;
  }
  const plan = body;
  process.stdout.write(args.json ? `${JSON.stringify(plan)}\n` : `${formatPlan(plan)}\n`);
  return plan.fits ? 0 : 1;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`plan: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 2;
  },
);
