/** The transcripts page in a real headless browser (Debian chromium); skipped when it is not installed. */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ItemRecord } from '../../src/ablations/records.js';
import { renderTranscriptsHtml } from '../../src/ablations/transcripts-html.js';
import { useTempDirs } from '../support/temp-dirs.js';

const CHROMIUM = '/usr/bin/chromium';
const tempDir = useTempDirs('transcripts-html-');
const HOSTILE =
  '</pre><img id="pwn" src=x onerror="document.title=\'owned\'"><script>document.title="owned"</script>';

function record(): ItemRecord {
  return {
    v: 1,
    key: 'k',
    item: 'item-1',
    graph: 'single-judge',
    graphHash: 'h',
    status: 'ok',
    verdict: 'match',
    reward: 1,
    score: 0.8,
    rounds: 1,
    stopReason: 'single_round',
    usage: { calls: 1, promptTokens: 10, completionTokens: 5 },
    roles: {},
    messages: [
      {
        round: 1,
        nodeId: 'judge',
        role: 'judge',
        stage: 'debate',
        stance: 'match',
        confidence: 0.8,
        reasoning: 'thought <b>hard</b>',
      },
    ],
    latencyMs: 1,
    label: 0,
    kind: 'hard_negative',
    epoch: 0,
    nonce: 'n',
    calls: [
      {
        nodeId: 'judge',
        role: 'judge',
        round: 1,
        model: 'm',
        messages: [{ role: 'user', content: `idea: ${HOSTILE}` }],
        reply: '{"stance":"match"}',
      },
    ],
  };
}

describe.skipIf(!existsSync(CHROMIUM))('transcripts.html in headless chromium', () => {
  it('shows messages, reply, label and reasoning as text; a hostile idea stays text', async () => {
    const dir = await tempDir();
    const page = join(dir, 'transcripts.html');
    await writeFile(page, renderTranscriptsHtml([record()], { title: 'ablate: run' }));
    const profile = await mkdtemp(join(dir, 'profile-'));
    const run = spawnSync(
      CHROMIUM,
      [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--no-first-run',
        `--user-data-dir=${profile}`,
        '--dump-dom',
        `file://${page}`,
      ],
      { encoding: 'utf8', timeout: 60_000 },
    );
    expect(run.status, run.stderr).toBe(0);
    const dom = run.stdout;
    expect(dom).toContain('<title>ablate: run</title>');
    expect(dom).not.toContain('<img id="pwn"');
    expect(dom).not.toContain('owned</title>');
    expect(dom).toContain('&lt;/pre&gt;&lt;img id="pwn"');
    expect(dom).toContain('label no_match (hard_negative)');
    expect(dom).toContain('WRONG');
    expect(dom).toContain('{"stance":"match"}');
    expect(dom).toContain('thought &lt;b&gt;hard&lt;/b&gt;');
  }, 90_000);
});
