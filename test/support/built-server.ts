/**
 * The built server as a real process for the process suites: `node dist/server/main.js` on a free loopback
 * port (call `ensureDist()` first), killed by PID by the caller; and single-connection requests, so that
 * cluster workers take turns.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { fileURLToPath } from 'node:url';

import { DIST_ENTRY } from './dist.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface BuiltServer {
  child: ChildProcess;
  url: string;
  /** Every stdout log line parsed so far (pino JSON). */
  logs: Array<Record<string, unknown>>;
  stderr: () => string;
  exit: Promise<number | null>;
}

/**
 * Starts `node dist/server/main.js` on a free loopback port; resolves once `listening` workers logged
 * "reward server listening" (1 without WORKERS). The caller kills it by PID (`child`).
 */
export async function startBuiltServer(env: Record<string, string>, listening = 1): Promise<BuiltServer> {
  const child = spawn(process.execPath, [DIST_ENTRY], {
    cwd: ROOT,
    env: { PATH: process.env['PATH'] ?? '', PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const logs: Array<Record<string, unknown>> = [];
  const url = await new Promise<string>((resolve, reject) => {
    let buffer = '';
    let seen = 0;
    const timer = setTimeout(() => reject(new Error(`server did not listen in time: ${stderr}`)), 15_000);
    child.stdout.on('data', (chunk: Buffer) => {
      buffer += chunk.toString();
      const lines = buffer.split('\n');
      buffer = lines.pop() ?? '';
      for (const line of lines) {
        if (!line.startsWith('{')) continue;
        const entry = JSON.parse(line) as Record<string, unknown>;
        logs.push(entry);
        if (entry['msg'] === 'reward server listening' && ++seen === listening) {
          clearTimeout(timer);
          resolve(String(entry['url']));
        }
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited (${code}) before listening: ${stderr}`));
    });
  });
  return { child, url, logs, stderr: () => stderr, exit };
}

/** One request on its own connection (closed after), so that cluster workers take turns. */
export function requestOnce(
  url: string,
  method: 'GET' | 'POST',
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; text: string; json: () => unknown }> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = httpRequest(
      url,
      {
        method,
        agent: false,
        headers: payload === undefined ? headers : { 'content-type': 'application/json', ...headers },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text, json: () => JSON.parse(text) }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}
