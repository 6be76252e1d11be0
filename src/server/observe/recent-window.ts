/** The running mean reward per graph behind `reward_recent_mean` (metrics.ts). */

/** Running mean of the last `size` rewards (ring buffer). */
class RecentWindow {
  readonly #values: Float64Array;
  #count = 0;
  #next = 0;
  #sum = 0;
  constructor(size: number) {
    this.#values = new Float64Array(size);
  }
  push(value: number): number {
    if (this.#count === this.#values.length) this.#sum -= this.#values[this.#next] ?? 0;
    else this.#count += 1;
    this.#values[this.#next] = value;
    this.#sum += value;
    this.#next = (this.#next + 1) % this.#values.length;
    return this.#sum / this.#count;
  }
}

/** One `RecentWindow` of `size` per graph label: pushes a reward, answers the graph's running mean. */
export function recentMeans(size: number): (graph: string, reward: number) => number {
  const windows = new Map<string, RecentWindow>();
  return (graph, reward) => {
    let window = windows.get(graph);
    if (window === undefined) {
      window = new RecentWindow(size);
      windows.set(graph, window);
    }
    return window.push(reward);
  };
}
