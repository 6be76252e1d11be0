/**
 * A project CLI run as `npm run` runs it (`node --import tsx SCRIPT …`) in a child process, its output
 * collected. The child gets this process's environment without the judge's settings (`JUDGE_*`,
 * `REWARD_CONFIG`, `TRANSCRIPTS_PATH`), so it judges offline unless `extraEnv` names a backend.
 */
import { spawn } from 'node:child_process';

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export async function runCli(
  script: string,
  args: readonly string[],
  extraEnv: Record<string, string> = {},
): Promise<CliResult> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && !k.startsWith('JUDGE_') && k !== 'REWARD_CONFIG' && k !== 'TRANSCRIPTS_PATH')
      env[k] = v;
  }
  Object.assign(env, extraEnv);
  const child = spawn(process.execPath, ['--import', 'tsx', script, ...args], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  return { code, stdout, stderr };
}
