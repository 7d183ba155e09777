"""Question a pre-trained model: fill in blanks, judge sentence pairs, embed text, show attention.

import bertforge
bert = bertforge.load("runs/mini")          # a run directory or a model directory
bert.fill_mask("the cat sat on the [MASK].")
bert.pseudo_log_likelihood("the keys are here.")  # how natural it finds a text: {"pll", "pseudo_perplexity", ...}
bert.nsp("The cat sat down.", "It purred.")   # {"is_next_prob": ..., "label": "IsNext"}
bert.embed(["a sentence", "another"])         # (2, H) numpy array
bert.search(["a query"], corpus_texts)        # the nearest texts by cosine (a sentence-similarity model)
bert.neighbours(["monday"])                   # the words nearest in the embedding table: what it learned of words
"""

from __future__ import annotations

import contextlib
import math
import warnings
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tokenizers import Tokenizer

from .data.batching import TextBatcher, length_buckets, mean_over_windows
from .display import Record, markdown_table
from .engine.runtime import autocast, resolve_device, resolve_precision
from .errors import UserError
from .model.bert import BertForPreTraining
from .model.heads import pool, unit_length
from .modelfiles.directory import electra_generator, read_model_files
from .modelfiles.origin import Origin, read_origin
from .modelfiles.sentence import POOLING_MODES
from .objectives import objective, pair_objective
from .serving.served import ServedGraph, load_served
from .tasks.classification import Classifier
from .tasks.similarity import nearest
from .tokenizer import (
    MASK,
    all_special_ids,
    max_input_length,
    special_ids,
    special_tokens,
    token_text,
    word_starts,
)


class FillMaskResult(dict):
    """{"text", "masks": [{"position", "predictions": [{token, token_id, score, sequence}]}]}; tables in Jupyter."""

    def _repr_markdown_(self) -> str:
        parts = [f"**{self['text']}**"]
        for mask in self["masks"]:
            parts += [
                f"[MASK] at token {mask['position']}:",
                markdown_table(mask["predictions"], ["token", "score", "sequence"]),
            ]
        return "\n\n".join(parts)


class Bert:
    """A pre-trained model with its tokenizer, ready to answer questions.

    `precision` "bf16" (or "auto" on a machine measured fast at it) runs the
    network under bf16 autocast: faster on CPUs with AMX, and within the
    tolerance of the fp32 answers that tests/test_devices.py states (probabilities within 1e-2).
    """

    def __init__(
        self,
        model: BertForPreTraining,
        tokenizer: Tokenizer,
        device: str = "cpu",
        pair_objective: str = "nsp",
        precision: str = "fp32",
        origin: Origin | None = None,
        generator: str | None = None,
    ):
        self.device = resolve_device(device)
        self.precision = resolve_precision(precision, self.device)
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        self.ids = special_ids(tokenizer)
        self.pair_objective = pair_objective  # what the pair head learned: nsp, sop or none
        # Where the model was read from: its class, the heads its weights hold (answers from a head it lacks would
        # come from new random weights) and its sentence-transformers pipeline (how its vectors are pooled)
        self.origin = origin
        self.sentence = origin.sentence if origin is not None else None
        self.generator = generator  # an ELECTRA discriminator's: where its masked LM is
        self.limit = max_input_length(tokenizer, model.config.max_position_embeddings)  # tokens a text may have

    @classmethod
    def load(cls, path: str | Path, device: str = "cpu", trust_pickle: bool = False, precision: str = "fp32") -> Bert:
        files = read_model_files(path)
        info = files.pretraining
        discriminator = objective(info.get("objective")).discriminator  # it embeds, and fills in nothing
        _, model, tokenizer = load_served(files, trust_pickle=trust_pickle, keep_heads=not discriminator)
        generator = electra_generator(files.directory, info) if discriminator else None
        pair = info.get("pair_objective", "nsp")
        return cls(model, tokenizer, device, pair, precision, read_origin(files), generator)

    def _check_heads(self, what: str, head: str = "mlm") -> None:
        """Refuse to answer from a head the model does not have (it would be new random weights), saying why it
        has none: an ELECTRA discriminator's generator has it; a released encoder (BertModel, a sentence-embedding
        model) was saved without heads; a fine-tuned model kept only its task's; a masked LM never had a pair head."""
        if isinstance(self.model, ServedGraph):
            raise UserError(
                f"{self.origin.directory} is an exported model, which serves embed, classify, tag and answer; "
                f"{what} reads the PyTorch model it was exported from"
            )
        if self.generator is not None:
            raise UserError(
                f"{self.origin.describes} is an ELECTRA discriminator: it tells replaced tokens from original ones "
                f"and has no head to {what}; its generator does: {self.generator}"
            )
        untrained = getattr(self.model, "untrained_heads", frozenset())
        if head == "mlm":
            missing = "mlm_head" in untrained
        else:
            missing = self.model.nsp_head is None or not pair_objective(self.pair_objective).head
        if not missing:
            return
        name = "masked-LM" if head == "mlm" else "next-sentence"
        if self.origin.fine_tuned:
            task = " for sentence similarity" if self.sentence is not None else ""
            raise UserError(
                f"{self.origin.describes} was fine-tuned{task} and keeps only its task's head, no {name} head to "
                f"{what} with; use the pre-trained model it was fine-tuned from"
            )
        if (self.origin.encoder_only or self.sentence is not None) and "mlm_head" in untrained:
            kind = "a sentence-embedding model" if self.sentence is not None else "an encoder alone"
            train = f"; `bertforge pretrain --init-from {self.origin.directory}` trains a masked-LM head on your text"
            raise UserError(f"{self.origin.describes} has no {name} head to {what} with: it is {kind}{train}")
        if "mlm_head" in untrained:
            raise UserError(
                f"{self.origin.describes} has no {name} head to {what} with (a fine-tuned model keeps only its "
                "task's head); use the pre-trained model it was fine-tuned from"
            )
        raise UserError(
            f"{self.origin.describes} was pre-trained without a pair objective (masked LM only): it has no "
            f"{name} head to {what} with"
        )

    def _autocast(self):
        return autocast(self.device, self.precision)

    @contextlib.contextmanager
    def _beside_the_graph(self):
        """For an exported model, torch's own work between graph runs (pooling) on one thread: ONNX Runtime's
        threads still hold the cores, and two torch threads waiting for them made `embed` on all-MiniLM-L6-v2's
        int8 export 0.85x as fast (938 against 1,106 sentences/s, 2 cores). The PyTorch model keeps every thread."""
        threads = torch.get_num_threads()
        if isinstance(self.model, ServedGraph):
            torch.set_num_threads(1)
        try:
            yield
        finally:
            torch.set_num_threads(threads)

    def encode(self, text: str, pair: str | None = None):
        """(tokenizers Encoding, input_ids (1, T), token_type_ids (1, T)); too long an input is a user error."""
        encoding = self.tokenizer.encode(text, pair) if pair is not None else self.tokenizer.encode(text)
        limit = self.limit
        if len(encoding.ids) > limit:
            raise UserError(f"input is {len(encoding.ids)} tokens but the model reads at most {limit}")
        input_ids = torch.tensor([encoding.ids], device=self.device)  # (1, T)
        token_type_ids = torch.tensor([encoding.type_ids], device=self.device)  # (1, T)
        return encoding, input_ids, token_type_ids

    @torch.inference_mode()
    def fill_mask(self, text: str, top_k: int = 5, targets: list[str] | None = None) -> dict:
        """Top-k predictions for every [MASK] in `text` (or the model's own mask token, RoBERTa's <mask>), each
        position scored on its own."""
        self._check_heads("fill in blanks")
        mask = special_tokens(self.tokenizer)["mask"]
        text_in = text
        text = text.replace(MASK, mask)  # [MASK] means the mask token, whatever the tokenizer calls it
        if mask not in text:
            capitals = f" (write it in capitals: {MASK})" if MASK.lower() in text.lower() else ""
            own = f" or {mask}" if mask != MASK else ""
            raise UserError(f"the text has no {MASK}{own} to fill{capitals}: {text_in!r}")
        encoding, input_ids, token_type_ids = self.encode(text)
        positions = [i for i, token_id in enumerate(encoding.ids) if token_id == self.ids.mask]
        with self._autocast():
            hidden = self.model.bert(input_ids, token_type_ids).sequence_output[0, positions]  # (M, H)
            logits = self.model.mlm_head(hidden)  # (M, V): the decoder only where a mask is
        probs = logits.float().softmax(dim=-1)  # (M, V)
        if targets:
            candidates = torch.tensor([self._target_id(word) for word in targets], device=self.device)
        else:  # ids the tokenizer can write: a model table larger than the tokenizer has rows with no token
            candidates = torch.arange(min(probs.shape[-1], self.tokenizer.get_vocab_size()), device=self.device)
        k = min(top_k, len(candidates))
        scores, order = probs[:, candidates].topk(k, dim=-1)  # (M, k)
        masks = []
        for position, row_scores, row_order in zip(positions, scores.tolist(), order.tolist()):
            predictions = []
            for score, index in zip(row_scores, row_order):
                token_id = int(candidates[index])
                filled = [token_id if i == position else t for i, t in enumerate(encoding.ids)]
                predictions.append(
                    {
                        "token": token_text(self.tokenizer, token_id),
                        "token_id": token_id,
                        "score": score,
                        "sequence": self.tokenizer.decode(filled, skip_special_tokens=True),
                    }
                )
            masks.append({"position": position, "predictions": predictions})
        return FillMaskResult(text=text_in, masks=masks)

    @torch.inference_mode()
    def pseudo_log_likelihood(self, text: str, batch_size: int = 64) -> dict[str, Any]:
        """How natural the model finds `text`: each of its tokens masked in turn and scored by the log-probability
        of being what it is, given the rest, summed (Salazar et al. 2020). Of two texts that differ in a word
        ("the keys are here" / "the keys is here"), the model prefers the higher; the pseudo-perplexity,
        exp(-PLL / tokens), compares texts of different lengths. A word of several pieces scores high, as each of
        its pieces is guessed with the others in view."""
        self._check_heads("score a text")
        encoding, input_ids, token_type_ids = self.encode(text)
        positions = [i for i, special in enumerate(encoding.special_tokens_mask) if not special]
        if not positions:
            raise UserError(f"the text has no tokens to score: {text!r}")
        scores: list[float] = []
        for start in range(0, len(positions), batch_size):
            chunk = torch.tensor(positions[start : start + batch_size], device=self.device)  # (C,)
            rows = torch.arange(len(chunk), device=self.device)
            masked = input_ids.repeat(len(chunk), 1)  # (C, T): copy r has its token chunk[r] masked
            masked[rows, chunk] = self.ids.mask
            with self._autocast():
                hidden = self.model.bert(masked, token_type_ids.expand_as(masked)).sequence_output[
                    rows, chunk
                ]  # (C, H)
                logits = self.model.mlm_head(hidden)  # (C, V)
            log_probs = logits.float().log_softmax(dim=-1)  # (C, V)
            scores += log_probs[rows, input_ids[0, chunk]].tolist()
        pll = sum(scores)
        tokens = [{"token": encoding.tokens[p], "log_prob": score} for p, score in zip(positions, scores)]
        return {"text": text, "pll": pll, "pseudo_perplexity": math.exp(-pll / len(scores)), "tokens": tokens}

    def _target_id(self, word: str) -> int:
        """As `transformers`' pipeline: a token of the vocabulary as it is written there, else the first piece of
        the word."""
        if self.tokenizer.token_to_id(word) is not None:
            return self.tokenizer.token_to_id(word)
        pieces = self.tokenizer.encode(word, add_special_tokens=False).ids
        if not pieces:
            raise UserError(f"target {word!r} produces no token")
        return pieces[0]  # as `transformers` does: a multi-piece target is scored by its first piece

    @torch.inference_mode()
    def nsp(self, sentence_a: str, sentence_b: str) -> dict:
        """The pair head's answer: for NSP, the probability that B really follows A (class 0 = IsNext);
        for an SOP model, the probability that A and B are in their written order."""
        self._check_heads("judge sentence pairs", "nsp")
        task = pair_objective(self.pair_objective)
        key, (yes, no) = task.probability, task.labels
        _, input_ids, token_type_ids = self.encode(sentence_a, sentence_b)
        with self._autocast():
            pair_logits = self.model(input_ids, token_type_ids).nsp_logits  # (1, 2)
        probability = float(pair_logits.float().softmax(-1)[0, 0])
        return Record(a=sentence_a, b=sentence_b, **{key: probability}, label=yes if probability >= 0.5 else no)

    @cached_property
    def batcher(self) -> TextBatcher:
        """Built on first use (it copies the tokenizer), then shared by every embed call. A sentence-embedding
        model embeds at most its own max_seq_length tokens (sentence_bert_config.json), as it was trained."""
        own = self.sentence.max_seq_length if self.sentence is not None else None
        return TextBatcher(self.tokenizer, min(self.limit, own) if own else self.limit)

    def prompted(self, texts: list[str], prompt: str | None = None, role: str | None = None) -> list[str]:
        """The texts with the model's prompt before each, as sentence-transformers puts it (the one `prompt` names,
        else the model's for `role`, "query" or "document", else its default; `SentencePipeline.prompt`)."""
        if self.sentence is not None:
            before = self.sentence.prompt(prompt, role)
            return [before + text for text in texts] if before else texts
        if prompt is not None:
            raise UserError(f"--prompt {prompt}: the model has no prompts (config_sentence_transformers.json)")
        return texts

    @property
    def pooling_modes(self) -> tuple[str, ...]:
        """How its token vectors become one: a sentence-embedding model's own pooling, else the [CLS] vector."""
        return self.sentence.pooling if self.sentence is not None else ("cls",)

    @property
    def unit_vectors(self) -> bool:
        """Whether its vectors are unit length by default (a Normalize module)."""
        return self.sentence is not None and self.sentence.normalize

    def embed(
        self,
        texts: list[str],
        pooling: str | None = None,
        layer: int = -1,
        batch_size: int = 64,
        whole: bool = False,
        normalize: bool | None = None,
        prompt: str | None = None,
        dimensions: int | None = None,
        role: str | None = None,
    ) -> np.ndarray:
        """One vector per text, (len(texts), D), in input order; batched by length so there is little padding.

        By default a sentence-embedding model's vectors are made as its sentence-transformers modules say (its
        pooling, unit length where it has a Normalize module, its default prompt before each text), others' are the
        [CLS] vector; `pooling` (one of sentence.POOLING_MODES), `normalize` and `prompt` (a prompt's name) override;
        `role` ("query", "document") takes the model's prompt for it, as sentence-transformers' encode_query and
        encode_document do. `dimensions` keeps the first D of each vector (Matryoshka: a model trained so that its
        vectors' first dimensions hold the most), unit length again where the vectors are. A text longer than the
        model reads (its position table, or the length its files give) is cut to it, and how many were is said; with
        `whole` it is read in windows of that length overlapping by a quarter, its vector the mean of theirs."""
        modes = (pooling,) if pooling else self.pooling_modes
        self.check_dimensions(dimensions, modes)
        texts = self.prompted(texts, prompt, role)
        batcher = self.batcher
        encoded, owners = batcher.encode_windows(texts) if whole else (batcher.encode(texts), None)
        if not whole and batcher.cut:
            warnings.warn(
                f"{batcher.cut:,} of {len(texts):,} texts are longer than the {batcher.max_seq_len} tokens the model "
                "reads and were cut there (--whole reads each in windows)",
                stacklevel=2,
            )
        out = self.vectors(encoded, modes, layer, batch_size)  # (windows, D)
        vectors = mean_over_windows(out, owners, len(texts))[0] if whole else out  # (len(texts), D)
        return shaped(vectors, dimensions, self.unit_vectors if normalize is None else normalize)

    def check_dimensions(self, dimensions: int | None, modes: tuple[str, ...] | None = None) -> None:
        """A Matryoshka cut the vectors can take: 1 to their width."""
        width = self.model.config.hidden_size * len(modes or self.pooling_modes)
        if dimensions is not None and not 1 <= dimensions <= width:
            raise UserError(f"--dimensions {dimensions}: the model's vectors have {width}; give 1 to {width}")

    @torch.inference_mode()
    def vectors(
        self, encoded, modes: tuple[str, ...] | None = None, layer: int = -1, batch_size: int = 64
    ) -> np.ndarray:
        """(len(encoded), D) pooled vectors of texts encoded already (`TextBatcher.encode`: ids and segment ids each),
        in their order, neither normalised nor cut: what `embed` and the service's batches run."""
        if self.origin is not None:
            self.origin.check_computable()
        modes = modes or self.pooling_modes
        if any(mode not in POOLING_MODES for mode in modes):
            raise UserError(f"pooling must be one of {', '.join(POOLING_MODES)}, not {modes[0]!r}")
        layers = self.model.config.num_layers  # hidden states 0 (the embeddings) to L
        if not -(layers + 1) <= layer <= layers:
            raise UserError(
                f"--layer {layer} is out of range: the model has {layers} layers (0: the embeddings, -1: the last)"
            )
        if batch_size < 1:
            raise UserError(f"--batch-size {batch_size}: give at least 1")
        batcher = self.batcher
        out = np.zeros((len(encoded), self.model.config.hidden_size * len(modes)), dtype=np.float32)
        with self._beside_the_graph():
            for indices in length_buckets(encoded, batch_size):
                batch = {k: v.to(self.device) for k, v in batcher.batch(encoded, indices).items()}
                with self._autocast():
                    result = self.model.bert(**batch, output_hidden_states=layer != -1)
                hidden = result.sequence_output if layer == -1 else result.hidden_states[layer]  # (b, T, H)
                out[indices] = pool(hidden.float(), batch["attention_mask"], modes).cpu().numpy()  # (b, D)
        if not np.isfinite(out).all():  # weights within float range can still overflow: never a nan vector
            raise UserError(
                f"{self.origin.describes if self.origin else 'the model'}: it answered values that are "
                "not numbers (its weights overflow)"
            )
        return out

    def search(
        self,
        queries: list[str],
        corpus: list[str],
        top_k: int = 5,
        corpus_vectors: np.ndarray | None = None,
        whole: bool = False,
        reranker: Classifier | None = None,
        candidates: int = 50,
        relevant_label: str | None = None,
        prompt: str | None = None,
    ) -> list[list[dict[str, Any]]]:
        """For each query, the `top_k` corpus texts nearest in meaning, best first: {rank, index, text, score}, the
        score the cosine of the two vectors (pooled as `embed` pools them; `whole` as `embed` reads long texts).
        `corpus_vectors`, (len(corpus), H), are the corpus's own from `embed`: a large corpus is encoded once and
        searched many times.

        With a `reranker` (a classifier fine-tuned on (query, text) pairs: a cross-encoder), retrieve, then re-rank:
        the vectors' best `candidates` are ordered by the probability of `relevant_label` (label 1 by default; a
        regression model's value), and the best `top_k` kept; each hit keeps the cosine it was found by.

        A model with prompts reads its queries after its query prompt (or the one `prompt` names) and the corpus
        after its document prompt, as sentence-transformers' encode_query and encode_document do."""
        if reranker is None and relevant_label is not None:
            raise UserError("--relevant-label names a label of the --rerank classifier; give one")
        if reranker is not None:
            if candidates < top_k:
                raise UserError(f"--candidates ({candidates}) must be at least --top-k ({top_k})")
            reranker.relevant_label(relevant_label)  # a wrong label stops here, before the search
            found = self.search(queries, corpus, candidates, corpus_vectors, whole, prompt=prompt)
            return [_rerank(reranker, query, hits, top_k, relevant_label) for query, hits in zip(queries, found)]
        hidden_size = self.model.config.hidden_size
        if corpus_vectors is None:
            corpus_vectors = self.embed(corpus, whole=whole, role="document")
        elif corpus_vectors.shape != (len(corpus), hidden_size):
            raise UserError(
                f"the corpus vectors are {' x '.join(map(str, corpus_vectors.shape))}, but the corpus has "
                f"{len(corpus)} texts and the model {hidden_size} dimensions: were they embedded from this corpus "
                "with this model?"
            )
        query_vectors = self.embed(queries, whole=whole, prompt=prompt, role="query")
        indices, scores = nearest(query_vectors, corpus_vectors, top_k)  # (Q, k) each
        return [
            [
                {"rank": r + 1, "index": int(i), "text": corpus[i], "score": float(s)}
                for r, (i, s) in enumerate(zip(row, cosines))
            ]
            for row, cosines in zip(indices, scores)
        ]

    @torch.inference_mode()
    def word_vectors(self, words: list[str]) -> np.ndarray:
        """Each word's row of the token embedding table, (len(words), H), or the mean of its pieces' rows where
        WordPiece splits it: what the model learned of a word before it reads any context."""
        table = self.model.bert.embeddings.token.weight.float()  # (padded V, H)
        return torch.stack([table[self._word_pieces(word)].mean(0) for word in words]).cpu().numpy()

    def _word_pieces(self, word: str) -> list[int]:
        pieces = self.tokenizer.encode(word, add_special_tokens=False).ids
        if not pieces or self.ids.unk in pieces:
            raise UserError(f"{word!r} is not a word this tokenizer can write without [UNK]")
        return pieces

    @torch.inference_mode()
    def neighbours(self, words: list[str], top_k: int = 10) -> list[dict[str, Any]]:
        """For each word, the whole-word tokens nearest to it in the embedding table by cosine, {word, neighbours:
        [{token, score}]}: the words the model has learned to treat alike (after pre-training, "monday" comes to
        lie near "tuesday"). Special tokens, pieces that continue a word and the word's own pieces are left out."""
        vectors = torch.from_numpy(self.word_vectors(words))  # (W, H)
        table = self.model.bert.embeddings.token.weight[: len(self._whole_words)].float().cpu()  # (V, H)
        cosines = unit_length(vectors) @ unit_length(table).T  # (W, V)
        results = []
        for word, row in zip(words, cosines):  # row: (V,)
            row = row.masked_fill(~self._whole_words, float("-inf"))
            row[self._word_pieces(word)] = float("-inf")
            scores, ids = row.topk(min(top_k, len(row)))
            found = [
                {"token": token_text(self.tokenizer, i), "score": s} for i, s in zip(ids.tolist(), scores.tolist())
            ]
            results.append({"word": word, "neighbours": [n for n in found if n["score"] > float("-inf")]})
        return results

    @cached_property
    def _whole_words(self) -> torch.Tensor:
        """(V,) bool: the tokens a neighbour may be, neither special nor a piece that continues a word."""
        starts = word_starts(self.tokenizer)  # None: the tokenizer does not mark words, so every token may be one
        whole = torch.tensor(starts) if starts is not None else torch.ones(self.tokenizer.get_vocab_size(), dtype=bool)
        whole[all_special_ids(self.tokenizer)] = False
        return whole

    @torch.inference_mode()
    def attention(self, text: str, pair: str | None = None) -> tuple[list[str], torch.Tensor]:
        """Tokens and attention probabilities, (L, nh, T, T), for plots."""
        encoding, input_ids, token_type_ids = self.encode(text, pair)
        encoded = self.model.bert(input_ids, token_type_ids, output_attentions=True)
        return encoding.tokens, torch.stack([a[0] for a in encoded.attentions]).float().cpu()


def shaped(vectors: np.ndarray, dimensions: int | None = None, unit: bool = False) -> np.ndarray:
    """(n, D) vectors cut to their first `dimensions` (Matryoshka's cut) and, with `unit`, made unit length after
    the cut, as a model trained so reads them."""
    vectors = np.ascontiguousarray(vectors[:, :dimensions]) if dimensions else vectors  # (n, dimensions)
    return unit_length(torch.from_numpy(vectors)).numpy() if unit else vectors


def load(path: str | Path, device: str = "cpu", trust_pickle: bool = False, precision: str = "fp32") -> Bert:
    """Load a run or model directory for inference (a pickle-only directory needs trust_pickle)."""
    return Bert.load(path, device, trust_pickle, precision)


def _rerank(reranker: Classifier, query: str, found: list[dict], top_k: int, label: str | None) -> list[dict]:
    """A vector search's hits for `query` ordered by the cross-encoder's score, the best `top_k`; each keeps the
    cosine it was found by."""
    scores = reranker.relevance(query, [hit["text"] for hit in found], label)
    ordered = sorted(zip(scores, found), key=lambda pair: -pair[0])[:top_k]  # stable: ties keep the cosine's order
    return [{**hit, "rank": r + 1, "score": score, "cosine": hit["score"]} for r, (score, hit) in enumerate(ordered)]
