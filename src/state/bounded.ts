/**
 * The bound on the in-process maps (LRU cache, idempotency records, outage write buffer, stagger keys): a
 * `Map` iterates in insertion order, so its first key is the oldest entry (the least recently used when a
 * hit re-inserts its key).
 */

export interface EvictOptions<K> {
  /** Removes one entry (default `map.delete`); a caller that keeps a tally per entry settles it here. */
  drop?: ((key: K) => void) | undefined;
  /** A second bound besides the entry count (e.g. items held across entries); evicts while it says so. */
  over?: (() => boolean) | undefined;
}

/**
 * Drops the oldest entries of `map` while it holds more than `maxEntries` (or `over()` holds). Stops when
 * the map is empty, whatever `over` says, so a tally that never settles cannot loop forever.
 */
export function evictOldest<K, V>(map: Map<K, V>, maxEntries: number, options: EvictOptions<K> = {}): void {
  const drop = options.drop ?? ((key: K) => map.delete(key));
  const over = options.over;
  while (map.size > maxEntries || (over !== undefined && over())) {
    const oldest = map.keys().next();
    if (oldest.done === true) return;
    const size = map.size;
    drop(oldest.value);
    // A `drop` that does not remove the key would spin on it.
    if (map.size === size) map.delete(oldest.value);
  }
}
