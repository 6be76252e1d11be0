/**
 * deploy/k8s: yamllint, a schema check of every object (kubernetes-models' JSON schemas, offline:
 * kubeconform and kubeval are not packaged by Debian), and the contracts between the manifests and the
 * server: probe paths and port, the shutdown budget, variables the config accepts, metric names.
 */
import { execFile, spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import { ScaledObject } from '@kubernetes-models/keda/keda.sh/v1alpha1';
import { ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';
import { ConfigMap, Service } from 'kubernetes-models/v1';
import { Deployment, StatefulSet } from 'kubernetes-models/apps/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { beforeAll, describe, expect, it } from 'vitest';

import { ENV_VARIABLES, loadConfig } from '../../src/config.js';
import { createMetrics } from '../../src/server/observe/metrics.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- manifests are checked field by field
type Json = any;

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const K8S = join(ROOT, 'deploy', 'k8s');
const HAS_TOOLS =
  spawnSync('yamllint', ['--version'], { stdio: 'ignore' }).status === 0 &&
  spawnSync('python3', ['-c', 'import yaml'], { stdio: 'ignore' }).status === 0;

function yamlFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return yamlFiles(path);
    return name.endsWith('.yaml') ? [path] : [];
  });
}

/** Every document of every manifest, parsed by PyYAML (yamllint's own parser). */
async function loadAll(): Promise<Map<string, Json[]>> {
  const files = yamlFiles(K8S);
  const { stdout } = await promisify(execFile)('python3', [
    '-c',
    'import sys, json, yaml\nprint(json.dumps({f: list(yaml.safe_load_all(open(f))) for f in sys.argv[1:]}))',
    ...files,
  ]);
  const parsed: Record<string, Json[]> = JSON.parse(stdout);
  return new Map(Object.entries(parsed).map(([f, docs]) => [relative(K8S, f), docs]));
}

const MODELS = new Map<string, (doc: Json) => { validate(): void }>([
  ['v1/ConfigMap', (d) => new ConfigMap(d)],
  ['v1/Service', (d) => new Service(d)],
  ['apps/v1/Deployment', (d) => new Deployment(d)],
  ['apps/v1/StatefulSet', (d) => new StatefulSet(d)],
  ['autoscaling/v2/HorizontalPodAutoscaler', (d) => new HorizontalPodAutoscaler(d)],
  ['policy/v1/PodDisruptionBudget', (d) => new PodDisruptionBudget(d)],
  ['keda.sh/v1alpha1/ScaledObject', (d) => new ScaledObject(d)],
  ['monitoring.coreos.com/v1/ServiceMonitor', (d) => new ServiceMonitor(d)],
]);

const describeTools = HAS_TOOLS || process.env['CI'] === 'true' ? describe : describe.skip;
if (!HAS_TOOLS && process.env['CI'] !== 'true') {
  console.warn(
    '\n!!! SKIPPED deploy/k8s checks: yamllint / python3-yaml missing (apt-get install -y yamllint)\n',
  );
}

describeTools('deploy/k8s', () => {
  let docs: Map<string, Json[]>;
  const find = (kind: string, file?: string): Json => {
    for (const [f, list] of docs) {
      if (file !== undefined && f !== file) continue;
      const doc = list.find((d) => d?.kind === kind);
      if (doc !== undefined) return doc;
    }
    throw new Error(`no ${kind}`);
  };
  beforeAll(async () => {
    docs = await loadAll();
  });

  it('passes yamllint (strict)', async () => {
    const run = promisify(execFile)('yamllint', ['-s', '-c', join(ROOT, '.yamllint.yaml'), K8S]);
    await expect(run).resolves.toBeDefined();
  });

  it('every object validates against its Kubernetes / CRD schema; kustomizations list existing files', () => {
    let checked = 0;
    for (const [file, list] of docs) {
      for (const doc of list) {
        if (doc.kind === 'Kustomization') {
          for (const r of doc.resources as string[]) {
            const path = join(K8S, file, '..', r);
            expect(statSync(path).isFile() || statSync(path).isDirectory(), `${file}: ${r}`).toBe(true);
          }
          continue;
        }
        const make = MODELS.get(`${doc.apiVersion}/${doc.kind}`);
        expect(make, `${file}: no schema for ${doc.apiVersion}/${doc.kind}`).toBeDefined();
        expect(() => make!(doc).validate(), file).not.toThrow();
        checked += 1;
      }
    }
    expect(checked).toBeGreaterThanOrEqual(9);
  });

  it('the schema check catches a broken manifest (a string port)', () => {
    const broken = structuredClone(find('Deployment'));
    broken.spec.template.spec.containers[0].ports[0].containerPort = 'http';
    expect(() => new Deployment(broken).validate()).toThrow(/containerPort/);
  });

  it('probes /readyz and /healthz on the port the server listens on', () => {
    const deployment = find('Deployment');
    const [container] = deployment.spec.template.spec.containers;
    const env = new Map<string, string>(
      container.env.filter((e: Json) => e.value !== undefined).map((e: Json) => [e.name, e.value]),
    );
    const port = container.ports.find((p: Json) => p.name === 'http').containerPort;
    expect(String(port)).toBe(env.get('PORT'));
    expect(env.get('HOST')).toBe('0.0.0.0');
    expect(container.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'http' });
    expect(container.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
    expect(find('Service', 'service.yaml').spec.ports[0].targetPort).toBe('http');
  });

  it('terminationGracePeriodSeconds covers preStop + SHUTDOWN_GRACE_MS + the hard-exit margin', () => {
    const spec = find('Deployment').spec.template.spec;
    const [container] = spec.containers;
    const graceMs = Number(container.env.find((e: Json) => e.name === 'SHUTDOWN_GRACE_MS').value);
    const [cmd, seconds] = container.lifecycle.preStop.exec.command;
    expect(cmd).toBe('sleep');
    // 10 s = HARD_EXIT_MARGIN_MS in src/server/main.ts: the server's own last resort after the grace.
    expect(spec.terminationGracePeriodSeconds).toBe(Number(seconds) + graceMs / 1000 + 10);
  });

  it('sets only variables the server reads (and documents), and they load as meant', () => {
    const [container] = find('Deployment').spec.template.spec.containers;
    const env: Record<string, string> = { ...find('ConfigMap').data };
    for (const e of container.env) {
      // Secrets: a valid stand-in of the right shape.
      env[e.name] = e.value ?? (e.name === 'REDIS_URL' ? 'redis://127.0.0.1:6379' : 'secret');
    }
    // ENV_VARIABLES is the schema docs/configuration.md is checked against (test/docs.test.ts).
    const known = new Set(Object.keys(ENV_VARIABLES));
    for (const name of Object.keys(env)) expect(known, name).toContain(name);
    const config = loadConfig(env);
    expect(config.workers).toBe(2);
    expect(config.port).toBe(8080);
    expect(config.redis?.prefix).toBe('reward:');
    expect(config.shutdownGraceMs).toBe(30_000);
  });

  it('autoscalers follow metrics the server exports', () => {
    const names = new Set(
      createMetrics()
        .registry.getMetricsAsArray()
        .map((m) => m.name),
    );
    const hpa = find('HorizontalPodAutoscaler');
    const pods = hpa.spec.metrics.filter((m: Json) => m.type === 'Pods');
    expect(pods.length).toBeGreaterThan(0);
    for (const m of pods) expect(names).toContain(m.pods.metric.name);
    const keda = find('ScaledObject');
    const query: string = keda.spec.triggers.find((t: Json) => t.type === 'prometheus').metadata.query;
    for (const [name] of query.matchAll(/reward_[a-z_]+/g)) expect(names).toContain(name);
    expect(hpa.spec.scaleTargetRef.name).toBe(find('Deployment').metadata.name);
  });
});
