/**
 * Between-epoch variance (`ablate --epochs N`): every item judged N times, each time with its own seeded
 * nonce. The intervals of the report are over epoch 1 (items are the sampling unit); this spread says how
 * much of a difference the judge's own per-call noise alone makes. Pure.
 */
import { isFailure, type ItemRecord } from '../records.js';
import { countInto, emptyConfusion, rates } from '../stats/confusion.js';
import type { DatasetItem } from '../dataset.js';
import type { EpochRate, EpochSpread, EpochSummary } from '../types.js';

function spreadOf(values: (number | null)[]): EpochRate {
  const known = values.filter((v): v is number => v !== null);
  if (known.length === 0) return { perEpoch: values, mean: null, sd: null };
  const mean = known.reduce((a, b) => a + b, 0) / known.length;
  const sd =
    known.length < 2 ? null : Math.sqrt(known.reduce((a, v) => a + (v - mean) ** 2, 0) / (known.length - 1));
  return { perEpoch: values, mean, sd };
}

const decided = (r: ItemRecord | undefined): 0 | 1 | null =>
  r === undefined || isFailure(r) || r.reward === null ? null : r.reward;

/** One graph's spread over its epochs (`byEpoch[k][i]` = the record of item i in epoch k). */
export function epochSpread(
  items: readonly DatasetItem[],
  byEpoch: readonly (readonly ItemRecord[])[],
): EpochSpread {
  const perEpoch = byEpoch.map((records) => {
    const cm = emptyConfusion();
    items.forEach((item, i) => {
      const p = decided(records[i]);
      if (p !== null) countInto(cm, item.label, p);
    });
    return rates(cm);
  });
  let decidedEveryEpoch = 0;
  let sameVerdict = 0;
  let variance = 0;
  items.forEach((_, i) => {
    const rewards = byEpoch.map((records) => decided(records[i]));
    if (rewards.some((r) => r === null)) return;
    const known = rewards.filter((r): r is 0 | 1 => r !== null);
    decidedEveryEpoch += 1;
    const p = known.reduce<number>((a, b) => a + b, 0) / known.length;
    if (p === 0 || p === 1) sameVerdict += 1;
    variance += p * (1 - p);
  });
  return {
    f1: spreadOf(perEpoch.map((r) => r.f1)),
    accuracy: spreadOf(perEpoch.map((r) => r.accuracy)),
    precision: spreadOf(perEpoch.map((r) => r.precision)),
    recall: spreadOf(perEpoch.map((r) => r.recall)),
    decidedEveryEpoch,
    sameVerdict,
    meanItemVariance: decidedEveryEpoch === 0 ? null : variance / decidedEveryEpoch,
  };
}

export function epochSummary(
  items: readonly DatasetItem[],
  outcomes: ReadonlyMap<string, readonly (readonly ItemRecord[])[]>,
): EpochSummary {
  let epochs = 0;
  const graphs: Record<string, EpochSpread> = {};
  for (const [label, byEpoch] of outcomes) {
    epochs = Math.max(epochs, byEpoch.length);
    graphs[label] = epochSpread(items, byEpoch);
  }
  return { epochs, graphs };
}
