/**
 * Every PromQL expression of deploy/grafana/debate-reward.json and deploy/prometheus/rules.yaml, checked
 * against a real Prometheus that scraped the server: the app (fake judge behind it) listens on a loopback
 * port and serves real traffic; `prometheus` (Debian package) runs on a free loopback port with a temp
 * config and storage dir, scrapes it every second and loads the rules; each expression is sent to
 * /api/v1/query and must parse, and every metric it names must be in the scrape — a series Prometheus
 * ingested, or a family the server declares (`# TYPE`) with no sample yet (a labelled counter nothing
 * incremented). Prometheus is killed by PID after.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

import { afterAll, beforeAll, expect, it } from 'vitest';

import { freePort, spawnTracked, stopProcess, waitHttpOk, type Spawned } from '../../bench/procs.js';
import { candidate, GROUND_TRUTH, QUESTION, startHarness, type Harness } from '../server/helpers.js';
import { parseExposition } from '../server/promlint.js';
import { groupingLabels, metricNames, selectors } from './promql.js';
import { describeWithTools, loadYaml, PROMETHEUS, PROMETHEUS_TOOL, PYYAML_TOOL, type Json } from './tools.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DASHBOARD = join(ROOT, 'deploy', 'grafana', 'debate-reward.json');
const RULES = join(ROOT, 'deploy', 'prometheus', 'rules.yaml');

/**
 * TEMPORARY: metrics other branches of issue #20 (and #19, #21, #23) add, which this branch's server does
 * not export yet, with the labels they are announced with. They are exempt from the "exists in the scrape"
 * check (their labels are checked against this list instead); the test fails once one of them is exported
 * (remove it from here then). The coordinator empties this list after merging those branches.
 */
const PENDING_METRICS = new Map<string, string[]>([
  // h19
  ['reward_rejected_inputs_total', ['reason']],
]);

/** Grafana's own variables, as Grafana would expand them for a 1 s scrape interval. */
const GRAFANA_VARIABLES: Record<string, string> = { $__rate_interval: '1m', $__interval: '15s' };

interface Expression {
  where: string;
  expr: string;
}

function dashboardPanels(dashboard: Json): Json[] {
  return (dashboard.panels as Json[]).flatMap((p) => [p, ...((p.panels as Json[] | undefined) ?? [])]);
}

function dashboardExpressions(dashboard: Json): Expression[] {
  return dashboardPanels(dashboard).flatMap((p) =>
    ((p.targets as Json[] | undefined) ?? []).map((t) => {
      let expr = t.expr as string;
      for (const [name, value] of Object.entries(GRAFANA_VARIABLES)) expr = expr.split(name).join(value);
      return { where: `dashboard "${p.title}" ${t.refId}`, expr };
    }),
  );
}

/** The sample names each family of an exposition text stands for (a histogram: _bucket, _sum, _count). */
function declaredNames(text: string): { declared: Set<string>; sampled: Set<string> } {
  const declared = new Set<string>();
  const sampled = new Set<string>();
  for (const f of parseExposition(text)) {
    const names =
      f.type === 'histogram'
        ? [`${f.name}_bucket`, `${f.name}_sum`, `${f.name}_count`]
        : f.type === 'summary'
          ? [f.name, `${f.name}_sum`, `${f.name}_count`]
          : [f.name];
    for (const n of names) declared.add(n);
    for (const s of f.samples) sampled.add(s.name);
  }
  return { declared, sampled };
}

describeWithTools(
  'deploy/grafana and deploy/prometheus against a real Prometheus',
  [PROMETHEUS_TOOL, PYYAML_TOOL],
  () => {
    let harness: Harness;
    let prometheus: Spawned;
    let promUrl: string;
    let dir: string;
    let dashboard: Json;
    let rules: Json;
    let expressions: Expression[];
    /** What the server exported just before the last scrape we waited for. */
    let exposition: string;
    let promNames: Set<string>;
    /** prometheus's own log (stderr), for the error when it does not start. */
    let promLog = '';

    const api = async (path: string): Promise<Json> => {
      const res = await fetch(`${promUrl}${path}`, { signal: AbortSignal.timeout(5_000) });
      return res.json();
    };
    const query = (expr: string): Promise<Json> => api(`/api/v1/query?query=${encodeURIComponent(expr)}`);

    /** Polls `check` (bounded) until it holds. */
    const until = async (what: string, check: () => Promise<boolean>, maxMs = 15_000): Promise<void> => {
      const end = Date.now() + maxMs;
      for (let i = 0; i < 1_000 && Date.now() < end; i++) {
        if (await check()) return;
        await delay(200);
      }
      throw new Error(`timed out waiting for ${what}`);
    };

    beforeAll(async () => {
      dashboard = JSON.parse(await readFile(DASHBOARD, 'utf8'));
      rules = (await loadYaml([RULES])).get(RULES);
      expressions = [
        ...dashboardExpressions(dashboard),
        ...(rules.groups as Json[]).flatMap((g) =>
          (g.rules as Json[]).map((r) => ({ where: `rule ${r.alert ?? r.record}`, expr: r.expr as string })),
        ),
      ];

      harness = await startHarness();
      const target = await harness.app.listen({ host: '127.0.0.1', port: 0 });
      // Traffic that gives the labelled families samples: a group (ok, ok, rejected), a judge failure, a 404,
      // a 400.
      const reward = (candidates: string[]) =>
        harness.app.inject({
          method: 'POST',
          url: '/v1/reward',
          payload: { question: QUESTION, ground_truth: GROUND_TRUTH, candidates },
        });
      expect((await reward([candidate(0), candidate(1), ':'])).statusCode).toBe(200);
      harness.fake.setScript([], { kind: 'status', status: 500 });
      await reward([candidate(2)]);
      await harness.app.inject({ method: 'GET', url: '/nope' });
      await harness.app.inject({ method: 'POST', url: '/v1/reward', payload: {} });

      dir = await mkdtemp(join(tmpdir(), 'prometheus-'));
      const port = await freePort();
      promUrl = `http://127.0.0.1:${port}`;
      const config = {
        global: { scrape_interval: '1s', evaluation_interval: '1s' },
        rule_files: [RULES],
        scrape_configs: [
          {
            job_name: 'reward',
            static_configs: [{ targets: [new URL(target).host] }],
          },
        ],
      };
      // JSON is YAML: Prometheus reads it as its config.
      await writeFile(join(dir, 'prometheus.yml'), JSON.stringify(config));
      prometheus = spawnTracked(
        'prometheus',
        PROMETHEUS!,
        [
          `--config.file=${join(dir, 'prometheus.yml')}`,
          `--storage.tsdb.path=${join(dir, 'data')}`,
          `--web.listen-address=127.0.0.1:${port}`,
          '--log.level=warn',
        ],
        { stdio: ['ignore', 'ignore', 'pipe'] },
      );
      prometheus.child.stderr!.on('data', (chunk: Buffer) => (promLog += chunk.toString()));
      await waitHttpOk(`${promUrl}/-/ready`, 15_000, prometheus).catch((err: unknown) => {
        throw new Error(`prometheus did not get ready: ${promLog}`, { cause: err });
      });

      // The text the server serves now; then wait for a scrape that started after it.
      const res = await harness.app.inject({ method: 'GET', url: '/metrics' });
      exposition = res.body;
      const after = Date.now() / 1000;
      await until('a scrape of the server', async () => {
        const r = await query('timestamp(up{job="reward"} == 1)');
        return (
          r.status === 'success' && r.data.result.length === 1 && Number(r.data.result[0].value[1]) > after
        );
      });
      const values = await api('/api/v1/label/__name__/values');
      promNames = new Set(values.data as string[]);
    }, 40_000);

    afterAll(async () => {
      if (prometheus !== undefined) await stopProcess(prometheus);
      await harness?.close();
      if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    });

    it('finds the metric names and labels in PromQL (the extractors these checks rely on)', () => {
      const expr =
        'histogram_quantile(0.95, sum by (le, route) (rate(a_bucket{route="/v1/{x}", b=~"c|d"}[$__rate_interval])))' +
        ' / ignoring (status) group_left sum(b_total offset 1h) > bool 1e3 and on () vector(0) or c:rec' +
        ' unless max without (x) (d) * count(e{f="g",}[5m:1m]) + h{i!~"j{k"}';
      expect(metricNames(expr)).toEqual(['a_bucket', 'b_total', 'c:rec', 'd', 'e', 'h']);
      expect(selectors(expr)).toEqual([
        { name: 'a_bucket', labels: ['route', 'b'] },
        { name: 'e', labels: ['f'] },
        { name: 'h', labels: ['i'] },
      ]);
      expect(groupingLabels(expr)).toEqual(['le', 'route', 'status', 'x']);
    });

    it('has enough expressions to be a dashboard, every Grafana variable expanded', () => {
      expect(dashboardExpressions(dashboard).length).toBeGreaterThanOrEqual(40);
      expect(expressions.filter((e) => e.expr.includes('$')).map((e) => e.where)).toEqual([]);
    });

    it('every expression parses and evaluates in Prometheus', async () => {
      const failed: string[] = [];
      for (const { where, expr } of expressions) {
        const r = await query(expr);
        if (r.status !== 'success') failed.push(`${where}: ${r.errorType} ${r.error}`);
      }
      expect(failed).toEqual([]);
    });

    it('the parse check catches a malformed expression', async () => {
      const r = await query('sum(rate(reward_requests_total[5m])');
      expect(r.status).toBe('error');
      expect(r.errorType).toBe('bad_data');
    });

    it('every metric an expression names is in the scrape (PENDING_METRICS aside)', () => {
      const { declared, sampled } = declaredNames(exposition);
      // Prometheus ingested every sample the server exported before the scrape we waited for.
      expect([...sampled].filter((n) => !promNames.has(n))).toEqual([]);
      expect(sampled.size).toBeGreaterThan(30);
      const referenced = new Set(expressions.flatMap((e) => metricNames(e.expr)));
      const missing: string[] = [];
      for (const { where, expr } of expressions) {
        for (const name of metricNames(expr)) {
          if (PENDING_METRICS.has(name)) continue;
          if (!promNames.has(name) && !declared.has(name)) missing.push(`${where}: ${name}`);
        }
      }
      expect(missing).toEqual([]);
      const landed = [...PENDING_METRICS.keys()].filter((n) => declared.has(n) || promNames.has(n));
      expect(landed, 'now exported: remove them from PENDING_METRICS').toEqual([]);
      const unused = [...PENDING_METRICS.keys()].filter((n) => !referenced.has(n));
      expect(unused, 'in PENDING_METRICS but used by no expression').toEqual([]);
      // The traffic gave real series to most of what the dashboard shows.
      expect([...referenced].filter((n) => promNames.has(n)).length).toBeGreaterThanOrEqual(15);
    });

    /** Labels of every sample name the app's registry declares (a histogram's _bucket adds le), and PENDING. */
    const labelSets = (): Map<string, Set<string>> => {
      const sets = new Map<string, Set<string>>();
      for (const m of harness.metrics.registry.getMetricsAsArray()) {
        const { name, type, labelNames } = m as unknown as {
          name: string;
          type: string;
          labelNames: string[];
        };
        const suffixes = type === 'histogram' ? ['_bucket', '_sum', '_count'] : [''];
        for (const suffix of suffixes)
          sets.set(`${name}${suffix}`, new Set([...labelNames, ...(suffix === '_bucket' ? ['le'] : [])]));
      }
      for (const [name, labels] of PENDING_METRICS) sets.set(name, new Set(labels));
      return sets;
    };
    /** Labels Prometheus adds to every series of a target. */
    const TARGET_LABELS = ['job', 'instance'];

    /** Label names an expression uses that none of its metrics has: in matchers, per metric; in grouping. */
    const unknownLabels = (expr: string, sets: Map<string, Set<string>>): string[] => {
      const wrong: string[] = [];
      for (const { name, labels } of selectors(expr)) {
        const known = sets.get(name);
        for (const l of labels) if (!known?.has(l) && !TARGET_LABELS.includes(l)) wrong.push(`${name}{${l}}`);
      }
      const all = new Set(metricNames(expr).flatMap((n) => [...(sets.get(n) ?? [])]));
      for (const l of groupingLabels(expr))
        if (!all.has(l) && !TARGET_LABELS.includes(l)) wrong.push(`by ${l}`);
      return wrong;
    };

    it('every label an expression matches or groups by is a label of its metrics', () => {
      const sets = labelSets();
      const wrong = expressions.flatMap(({ where, expr }) =>
        unknownLabels(expr, sets).map((w) => `${where}: ${w}`),
      );
      expect(wrong).toEqual([]);
    });

    it('the label check catches a misspelled label', () => {
      const sets = labelSets();
      expect(
        unknownLabels(
          'sum by (replcia) (rate(reward_backend_replica_attempts_total{outcom="ok"}[5m]))',
          sets,
        ),
      ).toEqual(['reward_backend_replica_attempts_total{outcom}', 'by replcia']);
    });

    it('the name check catches a metric the server does not export', () => {
      const { declared } = declaredNames(exposition);
      const names = metricNames(
        'sum(rate(reward_judgements_total[5m])) / sum(rate(reward_judgments_total[5m]))',
      );
      expect(names.filter((n) => !promNames.has(n) && !declared.has(n))).toEqual(['reward_judgements_total']);
    });

    it('loads the alert rules and evaluates every one without error', async () => {
      const names = (rules.groups as Json[]).flatMap((g) =>
        (g.rules as Json[]).map((r) => r.alert as string),
      );
      await until('an evaluation of every rule', async () => {
        const r = await api('/api/v1/rules');
        const loaded = (r.data.groups as Json[]).flatMap((g) => g.rules as Json[]);
        return loaded.length === names.length && loaded.every((x) => x.health !== 'unknown');
      });
      const r = await api('/api/v1/rules');
      const loaded = (r.data.groups as Json[]).flatMap((g) => g.rules as Json[]);
      expect(loaded.map((x) => x.name).sort()).toEqual([...names].sort());
      expect(loaded.filter((x) => x.health !== 'ok').map((x) => `${x.name}: ${x.lastError}`)).toEqual([]);
    });

    it("draws each alert's threshold where the alert rule has it", () => {
      const alertExpr = new Map(
        (rules.groups as Json[]).flatMap((g) =>
          (g.rules as Json[]).map((r) => [r.alert as string, r.expr as string]),
        ),
      );
      const lines = dashboardPanels(dashboard).flatMap((p) =>
        ((p.targets as Json[] | undefined) ?? []).filter((t) => /^vector\(/.test(t.expr as string)),
      );
      expect(lines.length).toBeGreaterThanOrEqual(2);
      for (const t of lines) {
        const value = /^vector\(([\d.]+)\)$/.exec(t.expr as string)![1]!;
        const alert = /\((Reward\w+)\)/.exec(t.legendFormat as string)?.[1];
        expect(alert, `${t.expr}: name the alert in the legend`).toBeDefined();
        expect(alertExpr.get(alert!), alert).toMatch(new RegExp(`[<>] ${value.replace('.', '\\.')}\\b`));
      }
    });

    it('is a well-formed Grafana dashboard: unique ids, a Prometheus data source on every query, the sections', () => {
      const panels = dashboardPanels(dashboard);
      const ids = panels.map((p) => p.id as number);
      expect(new Set(ids).size).toBe(ids.length);
      expect(dashboard.templating.list.find((v: Json) => v.name === 'datasource').type).toBe('datasource');
      for (const p of panels.filter((x) => x.type !== 'row')) {
        expect(p.datasource, p.title).toEqual({ type: 'prometheus', uid: '${datasource}' });
        const refIds = (p.targets as Json[]).map((t) => t.refId as string);
        expect(new Set(refIds).size, p.title).toBe(refIds.length);
        expect(p.gridPos.x + p.gridPos.w, p.title).toBeLessThanOrEqual(24);
      }
      // No two panels share a grid cell.
      const cells = new Map<string, string>();
      for (const p of panels) {
        const { x, y, w, h } = p.gridPos as Record<'x' | 'y' | 'w' | 'h', number>;
        for (let i = x; i < x + w; i++)
          for (let j = y; j < y + h; j++) {
            expect(cells.get(`${i},${j}`), `${p.title} overlaps`).toBeUndefined();
            cells.set(`${i},${j}`, p.title as string);
          }
      }
      const rows = panels.filter((p) => p.type === 'row').map((p) => p.title as string);
      expect(rows).toEqual([
        'Throughput',
        'Latency',
        'Backlog and predicted wait',
        'Failures by reason',
        'Cache and prefix reuse',
        'Judge replicas and canaries',
        'Audits',
        'Accept rate and length drift',
      ]);
    });
  },
);
