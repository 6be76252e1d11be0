/**
 * deploy/prometheus: the alert rules pass `promtool check rules` and their unit tests (`promtool test
 * rules deploy/prometheus/tests/*.yaml`); the tests can fail (a rule that never fires fails every firing
 * case, one that always fires every quiet case); the PrometheusRule holds the same groups and validates
 * against the operator's CRD schema; every alert is documented in docs/alerts.md with its runbook.
 */
import { mkdtemp, mkdir, readdir, rm, writeFile, copyFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { PrometheusRule } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';
import { beforeAll, describe, expect, it } from 'vitest';

import { docTable, codeSpans, readDoc } from '../support/markdown.js';
import {
  describeWithTools,
  loadYaml,
  PROMTOOL,
  PROMTOOL_TOOL,
  PYYAML_TOOL,
  runTool,
  YAMLLINT_TOOL,
  type Json,
} from './tools.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DIR = join(ROOT, 'deploy', 'prometheus');
const RULES = join(DIR, 'rules.yaml');
const OPERATOR_RULE = join(DIR, 'prometheusrule.yaml');
const TESTS = join(DIR, 'tests');

/** The alerts the issue asks for (#20 item 4), each by the rule that covers it. */
const REQUIRED_ALERTS = [
  'RewardCanaryAccuracyLow',
  'RewardReplicaQuarantined',
  'RewardAuditDisagreementRising',
  'RewardJudgeFailureRate',
  'RewardPredictedWaitAboveTrainerTimeout',
  'RewardSharedStateDegraded',
  'RewardAcceptRateJump',
];

interface Case {
  group: string;
  alertname: string;
  /** Seconds into the test. */
  at: number;
  firing: boolean;
}

/** A Prometheus duration (`1h30m`, `90m`, `2h`, `0s`) in seconds. */
function durationSeconds(text: string): number {
  const units: Record<string, number> = {
    ms: 0.001,
    s: 1,
    m: 60,
    h: 3600,
    d: 86_400,
    w: 604_800,
    y: 31_536_000,
  };
  let total = 0;
  let rest = text;
  for (let i = 0; rest !== '' && i < 10; i++) {
    const m = /^(\d+)(ms|s|m|h|d|w|y)/.exec(rest);
    if (m === null) throw new Error(`not a duration: ${text}`);
    total += Number(m[1]) * units[m[2]!]!;
    rest = rest.slice(m[0].length);
  }
  if (rest !== '') throw new Error(`not a duration: ${text}`);
  return total;
}

/** The failed cases in `promtool test rules` output. */
function failures(output: string): Set<string> {
  const found = new Set<string>();
  for (const m of output.matchAll(/name: (.*),\n\s*alertname: (\w+), time: (\S+),/g)) {
    found.add(caseKey({ group: m[1]!, alertname: m[2]!, at: durationSeconds(m[3]!), firing: false }));
  }
  return found;
}
const caseKey = (c: Case): string => `${c.group} / ${c.alertname} @ ${c.at}s`;

describeWithTools('deploy/prometheus alert rules', [PROMTOOL_TOOL, PYYAML_TOOL, YAMLLINT_TOOL], () => {
  let rules: Json;
  let operatorRule: Json;
  let testFiles: string[];
  let cases: Case[];
  const alerts = (): Json[] => rules.groups.flatMap((g: Json) => g.rules.filter((r: Json) => r.alert));

  beforeAll(async () => {
    testFiles = (await readdir(TESTS)).filter((f) => f.endsWith('.yaml')).map((f) => join(TESTS, f));
    const docs = await loadYaml([RULES, OPERATOR_RULE, ...testFiles]);
    rules = docs.get(RULES);
    operatorRule = docs.get(OPERATOR_RULE);
    cases = testFiles.flatMap((f) =>
      (docs.get(f).tests as Json[]).flatMap((t) =>
        (t.alert_rule_test as Json[]).map((a) => ({
          group: t.name as string,
          alertname: a.alertname as string,
          at: durationSeconds(a.eval_time as string),
          firing: (a.exp_alerts as Json[]).length > 0,
        })),
      ),
    );
  });

  it('pass promtool check rules', async () => {
    const result = await runTool(PROMTOOL!, ['check', 'rules', RULES]);
    expect(result.stdout + result.stderr).toContain(`SUCCESS: ${alerts().length} rules found`);
    expect(result.code).toBe(0);
    // promtool reads plain rule files only: it must refuse the operator's wrapper as one.
    const wrapped = await runTool(PROMTOOL!, ['check', 'rules', OPERATOR_RULE]);
    expect(wrapped.code).not.toBe(0);
  });

  it('pass their promtool unit tests', async () => {
    const result = await runTool(PROMTOOL!, ['test', 'rules', ...testFiles], { cwd: ROOT });
    expect(result.stdout + result.stderr).not.toContain('FAILED');
    expect(result.code).toBe(0);
  });

  it('cover every required alert, each with a case that fires and a case that stays quiet', () => {
    const names = alerts().map((a) => a.alert as string);
    expect(new Set(names).size).toBe(names.length);
    for (const name of REQUIRED_ALERTS) expect(names).toContain(name);
    for (const name of names) {
      expect(
        cases.some((c) => c.alertname === name && c.firing),
        `${name}: no case that fires`,
      ).toBe(true);
      expect(
        cases.some((c) => c.alertname === name && !c.firing),
        `${name}: no case that stays quiet`,
      ).toBe(true);
    }
  });

  it('give every alert a for, a severity, a summary, a description and a runbook', () => {
    for (const a of alerts()) {
      expect(durationSeconds(a.for as string), a.alert).toBeGreaterThan(0);
      expect(['warning', 'critical'], a.alert).toContain(a.labels?.severity);
      expect(Object.keys(a.annotations).sort(), a.alert).toEqual(['description', 'runbook_url', 'summary']);
      expect(a.annotations.runbook_url, a.alert).toBe(`docs/alerts.md#${(a.alert as string).toLowerCase()}`);
    }
  });

  describe('their unit tests can fail', () => {
    /** Runs the unit tests against a copy of the rules in which every alert's expr and for are replaced. */
    const runMutated = async (expr: string): Promise<{ code: number; output: string }> => {
      const dir = await mkdtemp(join(tmpdir(), 'rules-mutated-'));
      try {
        const mutated = structuredClone(rules);
        for (const g of mutated.groups)
          for (const r of g.rules) {
            r.expr = expr;
            delete r.for;
          }
        // JSON is YAML: promtool reads it as a rules file.
        await writeFile(join(dir, 'rules.yaml'), JSON.stringify(mutated));
        await mkdir(join(dir, 'tests'));
        const copies = testFiles.map((f) => join(dir, 'tests', f.slice(TESTS.length + 1)));
        await Promise.all(testFiles.map((f, i) => copyFile(f, copies[i]!)));
        const result = await runTool(PROMTOOL!, ['test', 'rules', ...copies]);
        return { code: result.code, output: result.stdout + result.stderr };
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    };

    it('fail every firing case when the alerts never fire', async () => {
      const { code, output } = await runMutated('vector(0) > 1');
      expect(code).not.toBe(0);
      const failed = failures(output);
      const firing = cases.filter((c) => c.firing).map(caseKey);
      expect(firing.filter((k) => !failed.has(k))).toEqual([]);
    });

    it('fail every quiet case when the alerts always fire', async () => {
      const { code, output } = await runMutated('vector(1)');
      expect(code).not.toBe(0);
      const failed = failures(output);
      const quiet = cases.filter((c) => !c.firing).map(caseKey);
      expect(quiet.length).toBeGreaterThanOrEqual(REQUIRED_ALERTS.length);
      expect(quiet.filter((k) => !failed.has(k))).toEqual([]);
    });
  });

  it('ship the same groups as a PrometheusRule that validates against the operator CRD', () => {
    expect(operatorRule.apiVersion).toBe('monitoring.coreos.com/v1');
    expect(operatorRule.kind).toBe('PrometheusRule');
    expect(operatorRule.spec.groups).toEqual(rules.groups);
    expect(() => new PrometheusRule(operatorRule).validate()).not.toThrow();
    const broken = structuredClone(operatorRule);
    broken.spec.groups[0].rules[0].for = 15; // a number where the CRD wants a duration string
    expect(() => new PrometheusRule(broken).validate()).toThrow();
  });

  it('pass yamllint (strict)', async () => {
    const result = await runTool('yamllint', ['-s', '-c', join(ROOT, '.yamllint.yaml'), DIR]);
    expect(result.stdout + result.stderr).toBe('');
    expect(result.code).toBe(0);
  });

  it('are documented in docs/alerts.md: severity, for and a runbook section each', () => {
    const { rows } = docTable('docs/alerts.md', ['alert', 'severity', 'for', 'fires when']);
    const documented = new Map(rows.map((r) => [codeSpans(r[0]!)[0], r]));
    expect([...documented.keys()].sort()).toEqual(
      alerts()
        .map((a) => a.alert as string)
        .sort(),
    );
    const headings = new Set(
      [...readDoc('docs/alerts.md').matchAll(/^#{2,4} (.+)$/gm)].map((m) => m[1]!.trim().toLowerCase()),
    );
    for (const a of alerts()) {
      const row = documented.get(a.alert)!;
      expect(row[1], a.alert).toBe(a.labels.severity);
      expect(codeSpans(row[2]!)[0], a.alert).toBe(a.for);
      expect(row[3]!.length, a.alert).toBeGreaterThan(10);
      expect(headings, `docs/alerts.md has no section "${a.alert}"`).toContain(
        (a.alert as string).toLowerCase(),
      );
    }
  });
});
