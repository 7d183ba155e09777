"""Build src/bertforge/assets/toy_corpus.txt: the classic tutorials' little world, written by us.

Short stories on six topics (a cat on a mat, a dog on a rug, a fisherman on a
river bank, money in a bank, a bird in a tree, a king and a queen). Each
document tells one story with some sentences left out, so next-sentence
prediction has real continuations to learn and masked words have clear answers.

    python scripts/make_toy_corpus.py
"""

from __future__ import annotations

import random
from pathlib import Path

STORIES = {
    "cat": [
        "the cat sat on the mat.",
        "the cat chased a small mouse.",
        "the mouse ran under the old bed.",
        "the cat waited by the bed.",
        "the cat drank some warm milk.",
        "then the cat slept on the mat.",
    ],
    "dog": [
        "the dog slept on the rug.",
        "the dog woke up and barked.",
        "the dog ran into the garden.",
        "the dog dug a hole in the garden.",
        "the dog found an old bone.",
        "the dog carried the bone to the rug.",
    ],
    "river": [
        "the fisherman sat on the river bank.",
        "the river was calm and deep.",
        "he cast his line into the water.",
        "a fish pulled on the line.",
        "he caught a big silver fish.",
        "he walked home along the river bank.",
    ],
    "money": [
        "she walked to the bank in town.",
        "she deposited the money in the bank.",
        "the clerk counted the money twice.",
        "the bank paid a little interest.",
        "she saved money for a new house.",
        "she left the bank with a receipt.",
    ],
    "bird": [
        "the bird sang in the tree.",
        "the tree stood near the pond.",
        "the bird built a nest in the tree.",
        "three eggs lay in the nest.",
        "the eggs hatched in the spring.",
        "the young birds flew over the pond.",
    ],
    "royal": [
        "the king lived in a castle.",
        "the queen sat beside the king.",
        "the king and the queen ruled the land.",
        "the people loved the kind queen.",
        "the king gave a great feast.",
        "the queen danced with the king.",
    ],
}


def main(out: str = "src/bertforge/assets/toy_corpus.txt", documents: int = 360, seed: int = 0) -> None:
    rng = random.Random(seed)
    topics = sorted(STORIES)
    docs = []
    for i in range(documents):
        story = STORIES[topics[i % len(topics)]]
        keep = sorted(rng.sample(range(len(story)), rng.randint(4, len(story))))
        docs.append("\n".join(story[k] for k in keep))
    Path(out).write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    print(f"{documents} documents -> {out}")


if __name__ == "__main__":
    main()
