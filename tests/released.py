"""Tiny checkpoints laid out exactly as the released encoders people download are, built here with `transformers`
and `tokenizers` (no hub at run time): their file names, weight names, config keys and tokenizer files.

    bert_gamma_beta   bert-base-uncased: BertForPreTraining, LayerNorm weights named gamma/beta, WordPiece,
                      a tokenizer_config.json with do_lower_case alone
    bert_bin_only     an older hub repository: BertForMaskedLM in pytorch_model.bin only
    roberta           roberta-base: byte-level BPE, <s> </s> <mask>, tokenizer.json alone (no tokenizer_config.json)
    xlm_roberta       xlm-roberta-base: SentencePiece unigram (▁ word starts), <mask> the last id
    camembert         camembert-base's layout with a SentencePiece BPE tokenizer (PreTrainedTokenizerFast's)
    distilbert        distilbert-base-uncased: DistilBertForMaskedLM, WordPiece
    electra_generator / electra_discriminator
                      google/electra-small-*: ElectraForMaskedLM (embedding_size below hidden_size) and
                      ElectraForPreTraining
    modernbert        ModernBERT-base: byte-level BPE with its special tokens at the end of the vocabulary and an
                      embedding table padded past them to a multiple of 64
    mpnet             microsoft/mpnet-base: MPNetForMaskedLM, MPNet's WordPiece tokenizer (<s> </s> <mask>, [UNK])
    deberta_v3        microsoft/deberta-v3-base: DebertaV2ForMaskedLM (disentangled attention, 256 buckets), its
                      SentencePiece tokenizer

Every parameter is random (biases and norms too, N(0, 0.2)), so nothing matches by accident.
"""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

WORDS = (
    "the cat sat on mat dog walked to river bank a bird sang in tree my friend painted red house teacher found "
    "small boat old man carried green chair child cleaned window her brother watched garden money covid vaccine "
    "lockdown pandemic quarantine epidemiologist"
).split()


def sentences(n: int = 300, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 10))).capitalize() + "." for _ in range(n)]


def randomised(model):
    torch.manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.2)
    return model.eval()


def _save(model, directory: Path, pickle_only: bool = False) -> None:
    model.save_pretrained(directory)
    if pickle_only:  # an older repository: pytorch_model.bin, no safetensors
        weights = directory / "model.safetensors"
        torch.save(load_file(weights), directory / "pytorch_model.bin")
        weights.unlink()


def _write_json(path: Path, value) -> None:
    path.write_text(json.dumps(value, indent=2), encoding="utf-8")


# ----------------------------------------------------------------------------------------- tokenizers


def wordpiece(vocab_size: int = 150) -> Tokenizer:
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, min_frequency=1, special_tokens=specials)
    tok.train_from_iterator(sentences(), trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    return tok


def byte_level_bpe(specials_first: list[str], specials_last: list[str] = (), vocab_size: int = 300) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=1,
        special_tokens=specials_first,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(sentences(), trainer)
    tok.add_special_tokens(list(specials_last))
    return tok


def _mask_lstrip(tok: Tokenizer, mask: str) -> Tokenizer:
    """The mask token takes the space before it (RoBERTa's, XLM-R's and ModernBERT's <mask>/[MASK] do)."""
    spec = json.loads(tok.to_str())
    for token in spec["added_tokens"]:
        if token["content"] == mask:
            token["lstrip"] = True
    return Tokenizer.from_str(json.dumps(spec))


def metaspace(kind: str, vocab_size: int = 200) -> Tokenizer:
    """A SentencePiece tokenizer (▁ marks a word's start): unigram as XLM-R's, or BPE."""
    specials = ["<s>", "<pad>", "</s>", "<unk>"]
    if kind == "unigram":
        tok = Tokenizer(models.Unigram())
        trainer = trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=specials, unk_token="<unk>")
    else:
        tok = Tokenizer(models.BPE(unk_token="<unk>"))
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=1, special_tokens=specials)
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.train_from_iterator(sentences(), trainer)
    tok.add_special_tokens(["<mask>"])  # the last id, as in xlm-roberta-base
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", 0), ("</s>", 2)]
    )
    return _mask_lstrip(tok, "<mask>")


# ----------------------------------------------------------------------------------------- checkpoints

# RoBERTa's layout at a tiny size: one segment row, <pad> = 1 (positions from 2), <s> = 0, </s> = 2.
ROBERTA_SHAPE = dict(
    hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, max_position_embeddings=66,
    type_vocab_size=1, pad_token_id=1, bos_token_id=0, eos_token_id=2, layer_norm_eps=1e-5,
)  # fmt: skip


def bert_gamma_beta(directory: Path) -> Path:
    import transformers

    tok = wordpiece()
    config = transformers.BertConfig(
        vocab_size=tok.get_vocab_size(), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=64,
    )  # fmt: skip
    _save(randomised(transformers.BertForPreTraining(config)), directory)
    weights = directory / "model.safetensors"
    renamed = {
        k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
        for k, v in load_file(weights).items()
    }
    save_file(renamed, weights, metadata={"format": "pt"})
    tok.save(str(directory / "tokenizer.json"))
    vocab = sorted(tok.get_vocab().items(), key=lambda item: item[1])
    (directory / "vocab.txt").write_text("".join(t + "\n" for t, _ in vocab), encoding="utf-8")
    _write_json(directory / "tokenizer_config.json", {"do_lower_case": True, "model_max_length": 64})
    return directory


def bert_bin_only(directory: Path) -> Path:
    import transformers

    tok = wordpiece()
    config = transformers.BertConfig(
        vocab_size=tok.get_vocab_size(), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=64,
    )  # fmt: skip
    _save(randomised(transformers.BertForMaskedLM(config)), directory, pickle_only=True)
    transformers.BertTokenizer(tokenizer_object=tok).save_pretrained(directory)
    return directory


def roberta(directory: Path) -> Path:
    import transformers

    tok = _mask_lstrip(byte_level_bpe(["<s>", "<pad>", "</s>", "<unk>", "<mask>"]), "<mask>")
    tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    config = transformers.RobertaConfig(vocab_size=tok.get_vocab_size(), **ROBERTA_SHAPE)
    _save(randomised(transformers.RobertaForMaskedLM(config)), directory)
    tok.save(str(directory / "tokenizer.json"))  # roberta-base has no tokenizer_config.json
    return directory


def xlm_roberta(directory: Path) -> Path:
    import transformers

    tok = metaspace("unigram")
    config = transformers.XLMRobertaConfig(vocab_size=tok.get_vocab_size(), **ROBERTA_SHAPE)
    _save(randomised(transformers.XLMRobertaForMaskedLM(config)), directory)
    transformers.XLMRobertaTokenizer(tokenizer_object=tok).save_pretrained(directory)
    return directory


def camembert(directory: Path) -> Path:
    """CamemBERT's layout (RoBERTa's) with a SentencePiece BPE tokenizer, which PreTrainedTokenizerFast reads (the
    CamemBERT tokenizer class assumes a unigram model)."""
    import transformers

    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=metaspace("bpe"), bos_token="<s>", eos_token="</s>", unk_token="<unk>", sep_token="</s>",
        cls_token="<s>", pad_token="<pad>", mask_token="<mask>", model_input_names=["input_ids", "attention_mask"],
    )  # fmt: skip
    config = transformers.CamembertConfig(vocab_size=len(tokenizer), **ROBERTA_SHAPE)
    _save(randomised(transformers.CamembertForMaskedLM(config)), directory)
    tokenizer.save_pretrained(directory)
    return directory


def distilbert(directory: Path) -> Path:
    import transformers

    tok = wordpiece()
    config = transformers.DistilBertConfig(
        vocab_size=tok.get_vocab_size(), dim=32, n_layers=2, n_heads=2, hidden_dim=64, max_position_embeddings=64
    )
    _save(randomised(transformers.DistilBertForMaskedLM(config)), directory)
    transformers.DistilBertTokenizer(tokenizer_object=tok).save_pretrained(directory)
    return directory


def _electra(directory: Path, cls_name: str, hidden: int) -> Path:
    import transformers

    tok = wordpiece()
    config = transformers.ElectraConfig(
        vocab_size=tok.get_vocab_size(), embedding_size=16, hidden_size=hidden, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=2 * hidden, max_position_embeddings=64,
    )  # fmt: skip
    _save(randomised(getattr(transformers, cls_name)(config)), directory)
    transformers.ElectraTokenizer(tokenizer_object=tok).save_pretrained(directory)
    return directory


def electra_generator(directory: Path) -> Path:
    return _electra(directory, "ElectraForMaskedLM", 24)


def electra_discriminator(directory: Path) -> Path:
    return _electra(directory, "ElectraForPreTraining", 32)


def modernbert(directory: Path) -> Path:
    import transformers

    specials = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]
    tok = byte_level_bpe(["<|padding|>", "<|endoftext|>"], [AddedToken(t, special=True) for t in specials])
    tok = _mask_lstrip(tok, "[MASK]")
    ids = {t: tok.token_to_id(t) for t in specials}
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0",
        pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])],
    )
    rows = -(-tok.get_vocab_size() // 64) * 64  # more rows than tokens, as the released table
    config = transformers.ModernBertConfig(
        vocab_size=rows, hidden_size=32, num_hidden_layers=3, num_attention_heads=2, intermediate_size=48,
        max_position_embeddings=128, local_attention=16, pad_token_id=ids["[PAD]"], cls_token_id=ids["[CLS]"],
        bos_token_id=ids["[CLS]"], sep_token_id=ids["[SEP]"], eos_token_id=ids["[SEP]"],
    )  # fmt: skip
    _save(randomised(transformers.ModernBertForMaskedLM(config)), directory)
    transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]",
        mask_token="[MASK]", model_input_names=["input_ids", "attention_mask"],
    ).save_pretrained(directory)  # fmt: skip
    return directory


def mpnet_tokenizer():
    """MPNet's own tokenizer class over a WordPiece vocabulary laid out as all-mpnet-base-v2's: <s> <pad> </s>
    <unk> first, BERT's [UNK] among the pieces, <mask> the last id."""
    import transformers

    pieces = [t for t, _ in sorted(wordpiece().get_vocab().items(), key=lambda item: item[1]) if t != "[MASK]"]
    pieces = [t for t in pieces if t not in ("[PAD]", "[CLS]", "[SEP]")]
    vocab = ["<s>", "<pad>", "</s>", "<unk>", *pieces, "<mask>"]
    return transformers.MPNetTokenizer(vocab={token: i for i, token in enumerate(vocab)})


def mpnet_config(vocab_size: int):
    import transformers

    return transformers.MPNetConfig(
        vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=514, pad_token_id=1, bos_token_id=0, eos_token_id=2,
    )  # fmt: skip


def mpnet(directory: Path) -> Path:
    """microsoft/mpnet-base's layout: MPNetForMaskedLM (a relative attention bias shared by the layers, RoBERTa's
    positions, no segments) and MPNet's tokenizer, positions for 512 tokens so that long texts reach the
    logarithmic buckets."""
    import transformers

    tokenizer = mpnet_tokenizer()
    _save(randomised(transformers.MPNetForMaskedLM(mpnet_config(len(tokenizer)))), directory)
    tokenizer.save_pretrained(directory)
    return directory


def deberta_tokenizer():
    """DeBERTa-v3's own tokenizer class over a SentencePiece unigram model laid out as the released one's: [PAD]
    [CLS] [SEP] [UNK] first, [MASK] the last id."""
    import sentencepiece
    import transformers

    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences(2000)), model_writer=model, vocab_size=120, model_type="unigram",
        pad_id=0, bos_id=1, eos_id=2, unk_id=3, pad_piece="[PAD]", bos_piece="[CLS]", eos_piece="[SEP]",
        unk_piece="[UNK]", minloglevel=2,
    )  # fmt: skip
    processor = sentencepiece.SentencePieceProcessor(model_proto=model.getvalue())
    pieces = [(processor.id_to_piece(i), processor.get_score(i)) for i in range(processor.get_piece_size())]
    return transformers.DebertaV2Tokenizer(vocab=[*pieces, ("[MASK]", 0.0)], unk_id=3)


def deberta_config(vocab_size: int):
    """DeBERTa-v3-base's config at a tiny width: every setting that chooses the computation as released."""
    import transformers

    return transformers.DebertaV2Config(
        vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=512, relative_attention=True, position_buckets=256, max_relative_positions=-1,
        pos_att_type=["p2c", "c2p"], share_att_key=True, norm_rel_ebd="layer_norm", position_biased_input=False,
        type_vocab_size=0, pooler_hidden_size=32, pooler_hidden_act="gelu", pooler_dropout=0, layer_norm_eps=1e-7,
        pad_token_id=0,
    )  # fmt: skip


def deberta_v3(directory: Path) -> Path:
    """microsoft/deberta-v3-base's layout, with a masked-LM head: DebertaV2ForMaskedLM and its SentencePiece
    tokenizer, positions for 512 tokens so that long texts reach the logarithmic buckets."""
    import transformers

    tokenizer = deberta_tokenizer()
    _save(randomised(transformers.DebertaV2ForMaskedLM(deberta_config(len(tokenizer)))), directory)
    tokenizer.save_pretrained(directory)
    return directory


def deberta_v3_model(directory: Path) -> Path:
    """A headless DebertaV2Model, as most released DeBERTa-v3 checkpoints are read (replaced-token detection left
    them no masked-LM head)."""
    import transformers

    tokenizer = deberta_tokenizer()
    randomised(transformers.DebertaV2Model(deberta_config(len(tokenizer)))).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


# ------------------------------------------------------------------------- what people download most

SENTENCE_LENGTH = 128  # sentence-transformers' tokenizer files pad and truncate to this (all-MiniLM-L6-v2's)


def padded(tok: Tokenizer, length: int = SENTENCE_LENGTH) -> Tokenizer:
    """The tokenizer as sentence-transformers' released files have it: padding and truncation to `length` set in
    tokenizer.json itself."""
    tok.enable_truncation(max_length=length)
    tok.enable_padding(length=length, pad_id=tok.token_to_id("[PAD]"), pad_token="[PAD]")
    return tok


def bert_encoder_config(vocab_size: int, **shape):
    import transformers

    return transformers.BertConfig(
        vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=160, **shape,
    )  # fmt: skip


def sentence_transformers_modules():
    """sentence-transformers' module classes (Transformer, Pooling, Normalize), where the installed version keeps
    them (v6 moved them out of `sentence_transformers.models`)."""
    try:
        from sentence_transformers.sentence_transformer import modules

        return modules if hasattr(modules, "Transformer") else _models()
    except ImportError:
        return _models()


def _models():
    from sentence_transformers import models

    return models


def mean_normalized(encoder: Path, directory: Path, width: int, max_seq_length: int) -> Path:
    """The encoder saved at `encoder` as sentence-transformers' mean-pooling, normalising pipeline, written into
    `directory` by `SentenceTransformer.save` (all-MiniLM-L6-v2's and all-mpnet-base-v2's modules)."""
    from sentence_transformers import SentenceTransformer

    models = sentence_transformers_modules()
    modules = [
        models.Transformer(str(encoder), max_seq_length=max_seq_length),
        models.Pooling(width, "mean"),
        models.Normalize(),
    ]
    SentenceTransformer(modules=modules, device="cpu").save(str(directory))
    return directory


def sentence_embedding(directory: Path) -> Path:
    """all-MiniLM-L6-v2's layout, saved by `SentenceTransformer.save`: a headless BertModel with its pooler, mean
    pooling, Normalize, and a tokenizer.json that pads and truncates every text to 128."""
    import transformers

    tok = padded(wordpiece())
    encoder = directory.parent / f"{directory.name}_encoder"
    randomised(transformers.BertModel(bert_encoder_config(tok.get_vocab_size()))).save_pretrained(encoder)
    transformers.BertTokenizerFast(tokenizer_object=tok, model_max_length=SENTENCE_LENGTH).save_pretrained(encoder)
    return mean_normalized(encoder, directory, 32, SENTENCE_LENGTH)


def mpnet_sentence_embedding(directory: Path) -> Path:
    """all-mpnet-base-v2's layout, saved by `SentenceTransformer.save`: a headless MPNetModel with its pooler, mean
    pooling and Normalize."""
    import transformers

    tokenizer = mpnet_tokenizer()
    encoder = directory.parent / f"{directory.name}_encoder"
    randomised(transformers.MPNetModel(mpnet_config(len(tokenizer)))).save_pretrained(encoder)
    tokenizer.save_pretrained(encoder)
    return mean_normalized(encoder, directory, 32, 384)


def bert_model(directory: Path) -> Path:
    """A headless BertModel (with its pooler) as `save_pretrained` writes it, its tokenizer padding to 128."""
    import transformers

    tok = padded(wordpiece())
    randomised(transformers.BertModel(bert_encoder_config(tok.get_vocab_size()))).save_pretrained(directory)
    transformers.BertTokenizerFast(tokenizer_object=tok).save_pretrained(directory)
    return directory


def roberta_model(directory: Path) -> Path:
    """A headless RobertaModel (with its pooler), byte-level BPE."""
    import transformers

    tok = _mask_lstrip(byte_level_bpe(["<s>", "<pad>", "</s>", "<unk>", "<mask>"]), "<mask>")
    tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    config = transformers.RobertaConfig(vocab_size=tok.get_vocab_size(), **ROBERTA_SHAPE)
    randomised(transformers.RobertaModel(config)).save_pretrained(directory)
    tok.save(str(directory / "tokenizer.json"))
    return directory


def distilbert_model(directory: Path) -> Path:
    import transformers

    tok = wordpiece()
    config = transformers.DistilBertConfig(
        vocab_size=tok.get_vocab_size(), dim=32, n_layers=2, n_heads=2, hidden_dim=64, max_position_embeddings=64
    )
    randomised(transformers.DistilBertModel(config)).save_pretrained(directory)
    transformers.DistilBertTokenizer(tokenizer_object=tok).save_pretrained(directory)
    return directory


def electra_model(directory: Path) -> Path:
    return _electra(directory, "ElectraModel", 32)


def modernbert_model(directory: Path) -> Path:
    """ModernBertModel: the released ModernBERT layout without its masked-LM head."""
    import transformers

    built = modernbert(directory.parent / f"{directory.name}_masked_lm")
    config = transformers.ModernBertConfig.from_pretrained(built)
    randomised(transformers.ModernBertModel(config)).save_pretrained(directory)
    transformers.AutoTokenizer.from_pretrained(built).save_pretrained(directory)
    return directory


def roberta_bpe_files(directory: Path) -> Path:
    """roberta-base's older files: a RobertaForMaskedLM with vocab.json and merges.txt, as the `tokenizers`
    library saves a BPE model, and no tokenizer.json."""
    import transformers

    tok = byte_level_bpe(["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    config = transformers.RobertaConfig(vocab_size=tok.get_vocab_size(), **ROBERTA_SHAPE)
    _save(randomised(transformers.RobertaForMaskedLM(config)), directory)
    tok.model.save(str(directory))  # vocab.json, merges.txt
    return directory


def xlm_roberta_sentencepiece(directory: Path) -> Path:
    """xlm-roberta-base's older files: an XLMRobertaForMaskedLM with the SentencePiece model its trainer writes
    (sentencepiece.bpe.model), and no tokenizer.json."""
    import sentencepiece
    import transformers

    prefix = directory / "sentencepiece.bpe"
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences(2000)), model_prefix=str(prefix), vocab_size=100, model_type="unigram",
        minloglevel=2,
    )  # fmt: skip
    Path(f"{prefix}.vocab").unlink()  # the readable copy, which released repositories leave out
    vocab_size = 100 + 2  # XLM-R's fairseq specials shift the pieces by one; <mask> is the last id
    config = transformers.XLMRobertaConfig(vocab_size=vocab_size, **ROBERTA_SHAPE)
    _save(randomised(transformers.XLMRobertaForMaskedLM(config)), directory)
    return directory


# The models without a masked-LM head, as people download them: name -> the class bertforge reads them as
HEADLESS = {
    "sentence_embedding": sentence_embedding,
    "bert_model": bert_model,
    "roberta_model": roberta_model,
    "distilbert_model": distilbert_model,
    "electra_model": electra_model,
    "modernbert_model": modernbert_model,
    "mpnet_sentence_embedding": mpnet_sentence_embedding,
    "deberta_v3_model": deberta_v3_model,
}
OLDER_TOKENIZER_FILES = {"roberta_bpe_files": roberta_bpe_files, "xlm_roberta_sentencepiece": xlm_roberta_sentencepiece}

LAYOUTS = {
    "bert_gamma_beta": bert_gamma_beta,
    "bert_bin_only": bert_bin_only,
    "roberta": roberta,
    "xlm_roberta": xlm_roberta,
    "camembert": camembert,
    "distilbert": distilbert,
    "electra_generator": electra_generator,
    "modernbert": modernbert,
    "mpnet": mpnet,
    "deberta_v3": deberta_v3,
}
# The masked LMs above, and the one that is not (its model tells replaced tokens from original ones)
DISCRIMINATORS = {"electra_discriminator": electra_discriminator}


def build(name: str, root: Path) -> Path:
    directory = root / name
    directory.mkdir(parents=True)
    return {**LAYOUTS, **DISCRIMINATORS, **HEADLESS, **OLDER_TOKENIZER_FILES}[name](directory)


# The families whose task classes tests build with `transformers` itself (each head class saved by save_pretrained):
# model_type -> (its tokenizer, its config for a vocabulary size, its classes' prefix)
TASK_LAYOUTS = {
    "mpnet": (mpnet_tokenizer, mpnet_config, "MPNet"),
    "deberta-v2": (deberta_tokenizer, deberta_config, "DebertaV2"),
}
