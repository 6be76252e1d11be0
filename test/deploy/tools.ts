/**
 * System tools the deploy suites run: promtool and prometheus (Debian package `prometheus`), and PyYAML
 * (yamllint's parser) to read the YAML files. A suite that needs one wraps itself in `describeWithTools`:
 * without it the suite is skipped with a loud warning, except under CI=true, where a missing tool fails
 * (`.ci/run` installs them).
 */
import { execFile, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';

import { describe, it } from 'vitest';

const runs = (command: string, args: string[]): boolean =>
  spawnSync(command, args, { stdio: 'ignore', timeout: 10_000 }).status === 0;

/** `PROMTOOL` when set, else `promtool` when it is on the PATH. */
export const PROMTOOL: string | undefined =
  process.env['PROMTOOL'] ?? (runs('promtool', ['--version']) ? 'promtool' : undefined);
export const PROMETHEUS: string | undefined = runs('prometheus', ['--version']) ? 'prometheus' : undefined;
export const HAS_PYYAML = runs('python3', ['-c', 'import yaml']);
export const HAS_YAMLLINT = runs('yamllint', ['--version']);

export interface Tool {
  name: string;
  present: boolean;
  install: string;
}

export const PROMTOOL_TOOL: Tool = {
  name: 'promtool',
  present: PROMTOOL !== undefined,
  install: 'apt-get install -y prometheus',
};
export const PROMETHEUS_TOOL: Tool = {
  name: 'prometheus',
  present: PROMETHEUS !== undefined,
  install: 'apt-get install -y prometheus',
};
export const YAMLLINT_TOOL: Tool = {
  name: 'yamllint',
  present: HAS_YAMLLINT,
  install: 'apt-get install -y yamllint',
};
export const PYYAML_TOOL: Tool = {
  name: 'python3-yaml',
  present: HAS_PYYAML,
  install: 'apt-get install -y yamllint',
};

/** `describe` that needs `tools` (see the file comment). */
export function describeWithTools(name: string, tools: Tool[], body: () => void): void {
  const missing = tools.filter((t) => !t.present);
  if (missing.length === 0) {
    describe(name, body);
    return;
  }
  const what = missing.map((t) => `${t.name} (${t.install})`).join(', ');
  if (process.env['CI'] === 'true') {
    describe(name, () => {
      it(`needs ${what}; .ci/run installs them`, () => {
        throw new Error(`missing under CI=true: ${what}`);
      });
    });
    return;
  }
  console.warn(`\n!!! SKIPPED "${name}": missing ${what}\n`);
  describe.skip(name, body);
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- YAML documents are checked field by field
export type Json = any;

/** The first document of each YAML file, parsed by PyYAML (yamllint's own parser), by path. */
export async function loadYaml(files: string[]): Promise<Map<string, Json>> {
  const { stdout } = await promisify(execFile)('python3', [
    '-c',
    'import sys, json, yaml\nprint(json.dumps({f: yaml.safe_load(open(f)) for f in sys.argv[1:]}))',
    ...files,
  ]);
  return new Map(Object.entries(JSON.parse(stdout) as Record<string, Json>));
}

/** Runs a tool to its end: exit code and output, never throwing on a non-zero exit (only when it cannot run). */
export function runTool(
  command: string,
  args: string[],
  options: { cwd?: string; timeoutMs?: number } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(
      command,
      args,
      { cwd: options.cwd, timeout: options.timeoutMs ?? 20_000, maxBuffer: 16 * 1024 * 1024 },
      (err, stdout, stderr) => {
        if (err !== null && typeof err.code !== 'number')
          return reject(new Error(`${command} did not run: ${err.message}`, { cause: err }));
        resolve({ code: err === null ? 0 : Number(err.code), stdout, stderr });
      },
    );
  });
}
