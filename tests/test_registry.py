"""One registry primitive for every kind of record bertforge looks up by name: the same verbs for each, from the
package and from a user's code alike (bertforge.registry)."""

from __future__ import annotations

import dataclasses

import pytest

from bertforge import families
from bertforge.errors import UserError
from bertforge.formats import catalog
from bertforge.model import variants
from bertforge.registry import Registry, resolve
from bertforge.tasks import registry as tasks


def task_maker(*args):
    return None


def kinds() -> list[tuple[str, Registry, object]]:
    """(what it is, its registry, a record of one's own that would work)."""
    return [
        ("task", tasks.TASKS, tasks.TaskRecord("my-task", task_maker, summary="mine")),
        ("format", catalog.FORMATS, catalog.Format("my-format", (".mine",), catalog.LINES, "a mine file", "lines")),
        ("model family", families.FAMILIES, dataclasses.replace(families.FAMILIES.get("bert"), model_type="my-bert")),
        ("position scheme", variants.POSITION_SCHEMES, variants.PositionScheme("my-positions", "none", added=False)),
        ("attention bias", variants.ATTENTION_BIASES, variants.AttentionBias("my-bias", "none at all")),
        (
            "feed-forward kind",
            variants.FEED_FORWARDS,
            variants.FeedForwardKind("my-mlp", "BERT's again", "bertforge.model.bert:FeedForward"),
        ),
        (
            "norm style",
            variants.NORM_STYLES,
            variants.NormStyle("my-post", "BERT's again", "bertforge.model.bert:EncoderLayer"),
        ),
    ]


@pytest.mark.parametrize("kind", range(7), ids=[k[0] for k in kinds()])
def test_every_kind_registers_gets_refuses_and_forgets_through_the_same_verbs(kind):
    what, registry, record = kinds()[kind]
    registry = registry.copy()  # the built-in registry stays as it is
    name = registry._name_of(record)
    before = list(registry)
    assert registry.register(record) is record
    assert registry.get(name) is record and name in registry and list(registry) == [*before, name]
    with pytest.raises(UserError, match=f"^a {what} named '{name}' is registered already; give yours another name$"):
        registry.register(record)
    with pytest.raises(UserError, match=f"^a {what} is registered as a {type(record).__name__}, not 'x'$"):
        registry.register("x")
    with pytest.raises(UserError, match=f"^unknown {what} 'nope'; choose one of {before[0]}, "):
        registry.get("nope")
    assert registry.unregister(name) is record and name not in registry and list(registry) == before


def test_a_registered_feed_forward_and_norm_style_build_the_model_they_name():
    """A variant is its record: registered, it is a config choice at once, and the model is built from the blocks
    it names (here BERT's own, under other names: the same weights give the same outputs)."""
    import torch

    from bertforge.model.bert import BertModel
    from bertforge.model.config import ModelConfig

    mine = [
        (variants.FEED_FORWARDS, variants.FeedForwardKind("plain", "BERT's", "bertforge.model.bert:FeedForward")),
        (variants.NORM_STYLES, variants.NormStyle("after", "BERT's", "bertforge.model.bert:EncoderLayer")),
    ]
    for registry, record in mine:
        registry.register(record)
    try:
        torch.manual_seed(0)
        ours = BertModel(ModelConfig.preset("tiny", vocab_size=60, feed_forward="plain", norm_style="after")).eval()
        bert = BertModel(ModelConfig.preset("tiny", vocab_size=60)).eval()
        bert.load_state_dict(ours.state_dict())
        ids = torch.randint(5, 60, (2, 9))
        torch.testing.assert_close(ours(ids).sequence_output, bert(ids).sequence_output, rtol=0, atol=0)
    finally:
        for registry, record in mine:
            registry.unregister(record.name)
    with pytest.raises(UserError, match="feed_forward must be one of mlp, glu, not 'plain'"):
        ModelConfig.preset("tiny", feed_forward="plain")


def test_the_lazy_resolver_imports_on_first_use_and_says_what_it_cannot_find():
    assert resolve("bertforge.model.positions:rotate").__name__ == "rotate"
    assert resolve(".classification:ClassificationTask", "bertforge.tasks").__name__ == "ClassificationTask"
    assert resolve(task_maker) is task_maker  # an object is itself
    for target in ("bertforge.model.positions:nothing", "no_such_module:x", "bertforge.model.positions"):
        with pytest.raises(UserError, match="names nothing importable"):
            resolve(target)
