/**
 * The stdio protocol between the benchmark orchestrator and its worker processes (load generator, floor
 * client, fake backend): the worker prints `READY`, waits for `GO` on stdin, works, prints
 * `RESULT <json>`. A worker exits when its stdin closes, so it never outlives the orchestrator.
 */
import { createInterface } from 'node:readline';

const lines = createInterface({ input: process.stdin });
const handlers = new Map<string, (arg: string) => void>();

lines.on('line', (line) => {
  const space = line.indexOf(' ');
  const command = space < 0 ? line.trim() : line.slice(0, space);
  handlers.get(command)?.(space < 0 ? '' : line.slice(space + 1));
});
lines.on('close', () => process.exit(0));

/** Runs `handler` for every stdin line starting with `command`. */
export function onCommand(command: string, handler: (arg: string) => void): void {
  handlers.set(command, handler);
}

/** Prints `READY` and resolves when the orchestrator sends `GO`. */
export function readyThenGo(): Promise<void> {
  return new Promise((resolve) => {
    onCommand('GO', () => resolve());
    process.stdout.write('READY\n');
  });
}

export function send(kind: 'RESULT' | 'STATS', payload: unknown): void {
  process.stdout.write(`${kind} ${JSON.stringify(payload)}\n`);
}
