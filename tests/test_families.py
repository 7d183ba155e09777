"""A family is the one home of its facts (bertforge/families/): the tokenizer loader, the model code, the card and
the help read its record; a model directory is read in one pass; and docs/architecture.md's two walkthroughs of
adding a family are tests: its ERNIE block is run as written, and the files it says a family that computes
differently touched are the files that name that difference."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bertforge.errors import UserError
from bertforge.families import BERT_SPECIALS, FAMILIES, titles
from bertforge.model.bert import BertForPreTraining
from bertforge.modelfiles.directory import load_model_and_tokenizer, read_model_files, save_model
from bertforge.modelfiles.origin import read_origin
from bertforge.tokenizer import load_tokenizer, special_tokens
from bertforge.training.config import TrainConfig

from conftest import bertforge, needs, one_line_error
from released import build, randomised, wordpiece

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "bertforge"
GUIDE = ROOT / "docs" / "architecture.md"


def guide_section(heading: str) -> str:
    """The text of docs/architecture.md under the ### heading that starts with `heading`, up to the next heading."""
    text = GUIDE.read_text(encoding="utf-8")
    start = re.search(rf"^### {re.escape(heading)}", text, re.M).end()
    following = re.search(r"^#{2,3} ", text[start:], re.M)
    return text[start : start + following.start()] if following else text[start:]


# ------------------------------------------------------------------------- the record is the one home


@pytest.mark.parametrize("model_type", sorted(FAMILIES))
def test_a_tokenizer_without_its_own_special_tokens_takes_its_familys(tmp_path, model_type):
    """roberta-base ships no tokenizer_config.json: the tokenizer loader takes each role's token from the record of
    the family config.json names, and from the family whose tokenizer class tokenizer_config.json names."""
    family = FAMILIES.get(model_type)
    specials = list(dict.fromkeys(family.specials.values()))
    tok = wordpiece()
    tok.add_special_tokens(specials)
    tok.save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": model_type}), encoding="utf-8")
    assert special_tokens(load_tokenizer(tmp_path)) == family.specials
    (tmp_path / "config.json").unlink()
    named = {"tokenizer_class": f"{family.tokenizer_class}TokenizerFast"}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(named), encoding="utf-8")
    assert special_tokens(load_tokenizer(tmp_path)) == family.specials


def test_no_module_outside_the_families_names_a_family_record():
    """hf.py, the card, the tokenizer and the loops ask a model's record (family_of, family_named, FAMILIES); none
    imports one family's record by name to compare with it."""
    records = {name for name, value in vars(sys.modules["bertforge.families"]).items() if value in FAMILIES.records()}
    assert {"BERT", "ROBERTA", "MODERNBERT"} <= records
    naming = []
    for path in PACKAGE.rglob("*.py"):
        if path.relative_to(PACKAGE).parts[0] in ("families", "assets"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and "families" in (node.module or ""):
                naming += [f"{path.relative_to(PACKAGE)}: {a.name}" for a in node.names if a.name in records]
    assert not naming, naming


def test_the_help_names_every_family_from_the_records():
    help_text = TrainConfig.__dataclass_fields__["init_from"].metadata["help"]
    assert all(family.title in help_text for family in FAMILIES.records()) and titles() in help_text


# ------------------------------------------------------------------------- one pass

COUNT_OPENS = """
import collections, json, sys
from pathlib import Path
import bertforge.modelfiles.directory as directory

root, verb = Path(sys.argv[1]), sys.argv[2]
opened = collections.Counter()
for name in ("load_file",):  # safetensors opens the file in Rust, out of the audit hook's sight
    real = getattr(directory, name)
    def counted(path, *args, _real=real, _name=name, **kwargs):
        opened[f"{Path(path).relative_to(root).as_posix()} ({_name})"] += 1
        return _real(path, *args, **kwargs)
    setattr(directory, name, counted)
sys.addaudithook(
    lambda event, args: event == "open" and isinstance(args[0], str) and args[0].startswith(str(root))
    and opened.update([Path(args[0]).relative_to(root).as_posix()])
)
if verb == "embed":
    from bertforge.inference import Bert
    Bert.load(root).embed(["a cat sat on the mat"])
else:
    from bertforge.tasks.classification import Classifier
    Classifier(root).classify(["a cat sat on the mat"])
print(json.dumps(opened))
"""


def opens(directory: Path, verb: str) -> dict[str, int]:
    done = subprocess.run(
        [sys.executable, "-c", COUNT_OPENS, str(directory), verb], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_loading_a_model_opens_each_of_its_files_once(tmp_path):
    """A sentence-embedding model as SentenceTransformer.save writes it: config.json, the safetensors header and
    every module file are opened once, from loading to the first answer, and the tensors read once (config.json
    was read five times, the header four, each module file twice)."""
    needs("sentence_transformers")
    directory = build("sentence_embedding", tmp_path)
    counts = opens(directory, "embed")
    assert counts["config.json"] == 1 and counts["model.safetensors"] == 1, counts  # its header, read by bytes
    assert counts["model.safetensors (load_file)"] == 1, counts
    assert counts["modules.json"] == 1 and counts["1_Pooling/config.json"] == 1, counts
    assert set(counts.values()) == {1}, counts


def test_a_fine_tuned_model_is_read_in_one_pass(tmp_path, fine_tuned_classifier):
    counts = opens(fine_tuned_classifier, "classify")
    assert counts["config.json"] == 1 and set(counts.values()) == {1}, counts


@pytest.fixture
def fine_tuned_classifier(tmp_path):
    """A classifier as finetune saves one, from a tiny model: BertForSequenceClassification with its labels."""
    from bertforge import ModelConfig
    from bertforge.model.heads import BertForSequenceClassification

    tok = wordpiece()
    config = ModelConfig(
        vocab_size=tok.get_vocab_size(), hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64
    )
    model = BertForSequenceClassification(config, num_labels=2)
    directory = tmp_path / "classifier"
    save_model(model, directory, tok, {"id2label": {"0": "no", "1": "yes"}, "label2id": {"no": 0, "yes": 1}})
    return directory


# ------------------------------------------------------------------------- the guide's walkthroughs


def ernie_checkpoint(directory: Path) -> Path:
    """ERNIE 1.0's layout as `transformers` saves it: ErnieForPreTraining, BERT's WordPiece tokenizer."""
    transformers = needs("transformers")
    tok = wordpiece()
    config = transformers.ErnieConfig(
        vocab_size=tok.get_vocab_size(), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=64,
    )  # fmt: skip
    randomised(transformers.ErnieForPreTraining(config)).save_pretrained(directory)
    transformers.BertTokenizerFast(tokenizer_object=tok).save_pretrained(directory)
    return directory


def test_a_family_that_computes_as_bert_is_its_record_alone(tmp_path):
    """Before its record is registered an ERNIE is refused in one line naming the families bertforge reads; with
    it, the checkpoint `transformers` saved gives `transformers`' own masked-LM and next-sentence logits, and goes
    back out as an ERNIE that `transformers` loads with nothing missing, its card naming the family."""
    transformers = needs("transformers")
    directory = ernie_checkpoint(tmp_path / "ernie")
    one_line_error(bertforge("fill-mask", str(directory), "a [MASK]"), "model_type 'ernie' is not one bertforge reads")
    ids = torch.tensor([[2, 40, 41, 42, 3, 50, 51, 3, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 1, 1, 1, 0]])
    segments = torch.tensor([[0, 0, 0, 0, 0, 1, 1, 1, 0]])
    theirs = transformers.ErnieForPreTraining.from_pretrained(directory).eval()
    with torch.no_grad():
        expected = theirs(input_ids=ids, attention_mask=mask, token_type_ids=segments)
    ernie = _register_from_the_guide()
    try:
        files, model, tokenizer = load_model_and_tokenizer(directory)
        assert (
            files.family is ernie and files.pretraining == {"pair_objective": "nsp"} and files.heads == {"mlm", "nsp"}
        )
        assert tokenizer.specials == BERT_SPECIALS
        with torch.no_grad():
            ours = model(ids, segments, mask)
        real = mask[0].bool()
        vocab = tokenizer.get_vocab_size()
        torch.testing.assert_close(
            ours.mlm_logits[0, real, :vocab], expected.prediction_logits[0, real], atol=1e-5, rtol=0
        )
        torch.testing.assert_close(ours.nsp_logits, expected.seq_relationship_logits, atol=1e-5, rtol=0)
        out = save_model(model, tmp_path / "again", tokenizer, origin=read_origin(files))
    finally:
        FAMILIES.unregister("ernie")
    saved = json.loads((out / "config.json").read_text(encoding="utf-8"))
    assert saved["model_type"] == "ernie" and saved["architectures"] == ["ErnieForPreTraining"]
    assert '"ernie"' in (out / "README.md").read_text(encoding="utf-8").split("---")[1]
    again, info = transformers.AutoModelForPreTraining.from_pretrained(out, output_loading_info=True)
    assert type(again).__name__ == "ErnieForPreTraining" and not info["missing_keys"], info
    with torch.no_grad():
        logits = again.eval()(input_ids=ids, attention_mask=mask, token_type_ids=segments).prediction_logits
    torch.testing.assert_close(logits[0, real], expected.prediction_logits[0, real], atol=1e-5, rtol=0)


def _register_from_the_guide():
    """The guide's ERNIE block, run as it is written (it registers the record): the record."""
    block = re.search(r"```python\n(.*?)```", guide_section("A checkpoint of a family that computes as one"), re.S)
    namespace: dict = {}
    exec(block.group(1), namespace)  # the guide's own code, as a reader would paste it
    return namespace["ERNIE"]


def files_naming(word: str) -> set[str]:
    """The package's files whose code (docstrings and comments aside) names `word`."""
    found = set()
    for path in PACKAGE.rglob("*.py"):
        if "assets" in path.relative_to(PACKAGE).parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        names |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        names |= {n.arg for n in ast.walk(tree) if isinstance(n, ast.keyword) and n.arg}
        names |= {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        if word in names:
            found.add(path.relative_to(PACKAGE).as_posix())
    return found


def test_the_guide_lists_every_file_a_family_that_computes_differently_touched():
    """The guide's walkthrough of MPNet names the files its block touched: exactly the package's files that name
    MPNet at all; bert.py is not among them."""
    section = guide_section("A family that computes differently")
    listed = set(re.findall(r"`([^`]+)`", re.search(r"^- files: (.*)$", section, re.M).group(1)))
    naming = {
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if "assets" not in path.parts and "mpnet" in path.read_text(encoding="utf-8").lower()
    }
    assert listed == naming and "model/bert.py" not in naming


def test_the_guide_lists_every_file_a_difference_of_a_known_block_touched():
    """The guide's walkthrough of a field names the files DistilBERT's and ELECTRA's pooler activation touched:
    they are exactly the files whose code names `pooler_activation`."""
    section = guide_section("A difference that is a field")
    listed = re.search(r"^- files: (.*)$", section, re.M).group(1)
    assert set(re.findall(r"`([^`]+)`", listed)) == files_naming("pooler_activation")
    assert files_naming("pooler_activation") >= {"model/bert.py", "families/electra.py"}  # the check sees


def test_a_model_of_a_registered_family_is_read_whole_before_a_tensor(tmp_path):
    """read_model_files reads config.json and the safetensors header, and answers what the directory holds from
    them: a BertModel's pooler without its heads, a BertForPreTraining's two heads."""
    model = randomised(BertForPreTraining(_tiny_config()))
    save_model(model, tmp_path / "m", wordpiece())
    files = read_model_files(tmp_path / "m")
    assert files.heads == {"mlm", "nsp"} and files.pooler and files.pretraining["pair_objective"] == "nsp"
    encoder = build("bert_model", tmp_path)
    files = read_model_files(encoder)
    assert files.heads == frozenset() and files.pooler and files.architecture == "BertModel"


def _tiny_config():
    from bertforge import ModelConfig

    return ModelConfig(
        vocab_size=wordpiece().get_vocab_size(), hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64
    )


@pytest.mark.parametrize("model_type", sorted(FAMILIES))
def test_a_familys_record_types_its_own_config_keys(model_type):
    """Each family's config.json keys are typed in its record (`config_keys`), and the one schema applies them: a
    key of the family's holding the wrong kind of value is refused naming it, before any value is used; the schema
    itself keeps only the keys every family shares."""
    from bertforge.modelfiles.schema import CONFIG, check_config

    family = FAMILIES.get(model_type)
    assert family.config_keys and not set(family.config_keys) & set(CONFIG)
    for key in family.config_keys:
        with pytest.raises(UserError, match=f"{key} "):
            check_config({"model_type": model_type, key: [1, 2]}, "config.json")
