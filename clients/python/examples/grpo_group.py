#!/usr/bin/env python3
"""Send one GRPO group (one prompt, several rollouts) to the reward server; print rewards and advantages.

    npm start                                   # in the repo root: serves :8080 (offline backend)
    python clients/python/examples/grpo_group.py [--url http://127.0.0.1:8080] [--graph default]

Exit status: 0 when every judgment succeeded, 2 when some failed (their reward is None, shown as
"failed"), 1 when the server could not be used at all.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

try:
    from debate_reward import RewardClient, RewardServerError
except ImportError:  # running from a repo checkout without `pip install ./clients/python`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from debate_reward import RewardClient, RewardServerError

QUESTION = "How can a retrieval-augmented language model decide when retrieval is worth its cost?"
GROUND_TRUTH = (
    "We train a lightweight confidence probe on the language model's hidden states to predict whether "
    "the model already knows the answer. Retrieval is triggered only when the probe's confidence falls "
    "below a threshold calibrated on held-out questions, which cuts retrieval calls while keeping the "
    "accuracy of always retrieving."
)
ROLLOUTS = [
    # Same core method: a probe on hidden states gates retrieval by calibrated confidence.
    "Attach a small probe to the model's hidden states that predicts whether the model knows the answer, "
    "and call the retriever only when the probe's confidence is below a threshold calibrated on held-out "
    "questions.",
    # Different method: always retrieve, then rerank.
    "Always retrieve the top fifty passages with BM25, rerank them with a cross-encoder trained on click "
    "logs, and feed the best three to the generator.",
    # Same method, different wording and extra detail on calibration.
    "Gate retrieval with a confidence estimate: a linear probe reads hidden states, outputs the chance "
    "that the model already knows the answer, and retrieval happens only under a threshold that is "
    "calibrated on held-out questions so accuracy matches always retrieving.",
    # A degenerate "master key" answer: rejected without any LLM call, a real 0.
    "Thought process:",
]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default=os.environ.get("DEBATE_REWARD_URL", "http://127.0.0.1:8080"))
    parser.add_argument("--graph", default=None, help="judge graph preset (default: the server's)")
    parser.add_argument("--api-key", default=os.environ.get("DEBATE_REWARD_API_KEY"))
    parser.add_argument("--max-retries", type=int, default=3, help="retries on 503 / connection errors")
    args = parser.parse_args()

    client = RewardClient(args.url, api_key=args.api_key, graph=args.graph, max_retries=args.max_retries)
    with client:
        try:
            group = client.reward_details(QUESTION, GROUND_TRUTH, ROLLOUTS)
        except RewardServerError as exc:
            print(f"reward server error: {exc}", file=sys.stderr)
            return 1

    print(f"graph {group.graph.get('name')} ({group.graph.get('hash')}), backend {group.backend}")
    std = group.std or 0.0
    print(f"{'#':>2}  {'reward':>6}  {'score':>6}  {'adv (Dr. GRPO)':>14}  {'adv (GRPO)':>10}  status")
    for i, (item, adv) in enumerate(zip(group.results, group.advantages)):
        reward = "failed" if item.reward is None else f"{item.reward:.0f}"
        score = "-" if item.score is None else f"{item.score:.3f}"
        dr = "-" if adv is None else f"{adv:+.3f}"
        # Classic GRPO divides by the group std; a group with identical rewards teaches nothing.
        classic = "-" if adv is None else f"{adv / (std + 1e-4):+.3f}"
        status = item.status + (f" ({item.reason})" if item.reason else "")
        print(f"{i:>2}  {reward:>6}  {score:>6}  {dr:>14}  {classic:>10}  {status}")
    mean = "-" if group.mean is None else f"{group.mean:.3f}"
    print(f"rewards {group.rewards}")
    print(f"advantages {[None if a is None else round(a, 4) for a in group.advantages]}")
    print(f"group mean {mean}, std {std:.3f}, ok {group.n_ok}, failed {group.n_failed}, "
          f"LLM calls {group.usage.get('calls')}")
    return 2 if group.n_failed else 0


if __name__ == "__main__":
    sys.exit(main())
