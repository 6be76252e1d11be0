import { defineConfig } from 'vitest/config';

/**
 * Suites that start other processes: the built server (`dist/`, built once if stale; also with WORKERS=2),
 * redis-server, promtool and prometheus, the ablate, probe and evaluate CLIs, and the bench harness smoke run; with them the
 * docs/ablations check, which ablates and probes 600 items afresh (~8 s of CPU). `vitest run` runs them
 * with the rest (`npm test`); `npm run test:unit` (`--project unit`) leaves them out for a fast loop, and
 * the `slow` project too: `test/slow/` replays whole trainer steps (bursts of 6 144 requests, ~2–3 min).
 */
const PROCESS_SUITES = [
  'test/server/main.test.ts',
  'test/server/cluster.test.ts',
  // redis-server on a loopback port
  'test/server/replicas.test.ts',
  'test/server/integrity-redis.test.ts',
  'test/state/state.test.ts',
  // issue 21: redis-server (budget), the plan CLI as a child process, the built server
  'test/server/budget.test.ts',
  'test/server/plan.test.ts',
  'test/server/operator-controls.test.ts',
  'test/server/votes-deadlines-cancel.test.ts',
  // redis-server: a cancel across replicas
  'test/server/cancel-replicas.test.ts',
  // redis-server: a cancel sent to one replica reaches every replica sharing the Redis
  'test/server/cancel-shared.test.ts',
  'test/ablations/cli-ablate.test.ts',
  'test/ablations/cli-probe.test.ts',
  'test/ablations/docs.test.ts',
  'test/ablations/cli-evaluate.test.ts',
  'test/bench/harness.test.ts',
  // promtool (check / test rules), and a real prometheus scraping the app
  'test/deploy/prometheus-rules.test.ts',
  'test/deploy/dashboard.test.ts',
];

export default defineConfig({
  test: {
    exclude: ['test/live/**', 'node_modules/**'],
    testTimeout: 20_000,
    hookTimeout: 20_000,
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['test/**/*.test.ts'],
          exclude: ['test/live/**', 'test/slow/**', ...PROCESS_SUITES],
        },
      },
      { extends: true, test: { name: 'process', include: PROCESS_SUITES } },
      {
        extends: true,
        // After the other projects, alone: its timing must not compete with our own suites for the CPU.
        test: {
          sequence: { groupOrder: 1 },
          name: 'slow',
          include: ['test/slow/**/*.test.ts'],
          testTimeout: 300_000,
          hookTimeout: 60_000,
        },
      },
    ],
  },
});
