/**
 * The process entry point: reads config, builds the router and the app, listens, and shuts down
 * gracefully on SIGTERM/SIGINT (stop accepting, let in-flight judgments finish within SHUTDOWN_GRACE_MS,
 * flush transcripts, close backends, exit 0).
 */
import { loadConfig } from '../config.js';
import { createOfflineBackend } from '../judge/backends/offline.js';
import { createOpenAICompatibleBackend } from '../judge/backends/openai.js';
import { createRouter } from '../judge/routing.js';
import { buildApp } from './app.js';
import { createMetrics } from './metrics.js';
import { startupFields } from './startup.js';
import { createFileTranscriptSink, type TranscriptSink } from './transcripts.js';

const OFFLINE_BANNER = [
  '',
  '='.repeat(78),
  '  OFFLINE BACKEND: rewards come from a deterministic term-overlap heuristic.',
  '  This is NOT a real judge. It exists so the whole flow runs without an LLM.',
  '  For real judging set JUDGE_BASE_URL and JUDGE_MODEL (and JUDGE_API_KEY).',
  '  Every response says "backend": "offline".',
  '='.repeat(78),
  '',
].join('\n');

/** Extra time past the grace period for aborted judgments to answer before the process gives up. */
const HARD_EXIT_MARGIN_MS = 10_000;

async function main(): Promise<void> {
  const config = loadConfig();
  // The logger exists once the app does; the backends are built before it.
  const logSink: {
    error?: (err: unknown) => void;
    warn?: (fields: Record<string, unknown>, message: string) => void;
  } = {};
  const router = createRouter({
    ...config.judge,
    offline: createOfflineBackend,
    createBackend: (settings, name) =>
      createOpenAICompatibleBackend(settings, {
        name,
        onResponseFormatFallback: ({ backend, status, error }) =>
          logSink.warn?.(
            { backend, status, type: error.type, code: error.code, message: error.message },
            'backend rejected response_format json_schema: using json_object (schema in the prompt) from now on',
          ),
      }),
  });
  const metrics = createMetrics({ recentWindow: config.recentWindow });

  let transcripts: TranscriptSink | undefined;
  if (config.transcriptsPath !== undefined) {
    transcripts = await createFileTranscriptSink(config.transcriptsPath, {
      onError: (err) => {
        metrics.transcriptErrors.inc();
        logSink.error?.(err);
      },
    });
  }
  const server = buildApp({ config, router, metrics, transcripts, logger: { level: config.logLevel } });
  logSink.error = (err) => server.log.error({ err }, 'transcript write failed');
  logSink.warn = (fields, message) => server.log.warn(fields, message);

  if (router.name === 'offline') {
    console.error(OFFLINE_BANNER);
    server.log.warn({ backend: 'offline' }, 'serving with the OFFLINE backend: not a real judge');
  }

  let stopping = false;
  const shutdown = (signal: NodeJS.Signals): void => {
    if (stopping) {
      server.log.warn({ signal }, 'already shutting down');
      return;
    }
    stopping = true;
    server.log.info(
      { signal, grace_ms: config.shutdownGraceMs },
      'shutting down: finishing in-flight requests',
    );
    const hardExit = setTimeout(() => {
      server.log.error('shutdown did not finish in time; exiting');
      process.exit(1);
    }, config.shutdownGraceMs + HARD_EXIT_MARGIN_MS);
    hardExit.unref();
    void (async () => {
      let code = 0;
      try {
        await server.close();
        await transcripts?.close();
        await Promise.all(router.backends().map(async (b) => b.close?.()));
      } catch (err) {
        server.log.error({ err }, 'error during shutdown');
        code = 1;
      }
      server.log.info({ code }, 'stopped');
      process.exit(code);
    })();
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('unhandledRejection', (reason) => {
    server.log.error({ err: reason }, 'unhandled rejection');
  });

  const address = await server.listen({ port: config.port, host: config.host });
  server.log.info({ url: address, ...startupFields(config, router.name) }, 'reward server listening');
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
