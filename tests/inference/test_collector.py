"""The cyclic collector paused during ``annotate``/``tag``: restored after (on error too), nested and
overlapping pauses, and the premise that tagging makes no reference cycles (so a pause frees
nothing later that a collection would have freed earlier), for each kind of encoder.
"""

from __future__ import annotations

import collections
import gc
import threading
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import crfhead
from crfhead.data.corpora import FinanceCorpus
from crfhead.data.datamodule import TaggingDataModule
from crfhead.inference import TextTagger
from crfhead.inference.collector import collector_paused
from crfhead.model.tagger import Tagger
from tests.helpers import letter_bert

CONFIG = {"encoder": None, "head": None, "constrained": True, "decoder": None, "grouping": None}
TEXTS = [
    "Solenne Power guided to 4 percent growth in the first quarter, said CEO Mara Voss.",
    "Aiko said. Mara left.",
    "",
    "Kestrel Capital raised its outlook.",
] * 5


@pytest.fixture(autouse=True)
def _collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


@pytest.fixture(scope="module")
def vocabs() -> dict[str, Any]:
    return TaggingDataModule(corpus=FinanceCorpus(train_docs=2, dev_docs=1, test_docs=1)).vocabs


def _tagger(vocabs: dict[str, Any], encoder: dict[str, Any] | None = None) -> TextTagger:
    torch.manual_seed(0)
    model = Tagger.build(vocabs, encoder=encoder)
    return TextTagger(model, vocabs, {**CONFIG, "encoder": encoder})


def test_restores_the_collector_on_exit_and_on_error() -> None:
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(KeyError), collector_paused():
        raise KeyError("x")
    assert gc.isenabled()
    gc.disable()
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()  # left as the caller had it


def test_nested_and_overlapping_pauses_restore_once_the_last_ends() -> None:
    with collector_paused():
        with collector_paused():
            pass
        assert not gc.isenabled()  # the inner pause does not end the outer one
    assert gc.isenabled()
    inside, release = threading.Event(), threading.Event()

    def other() -> None:
        with collector_paused():
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=other)
    with collector_paused():
        thread.start()
        assert inside.wait(10)
    assert not gc.isenabled()  # the other thread's pause is still on
    release.set()
    thread.join(10)
    assert gc.isenabled()


def test_annotate_and_tag_pause_and_the_streaming_calls_do_not(
    vocabs: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    tagger = _tagger(vocabs)
    seen: list[bool] = []
    finish = TextTagger._finish

    def spy(self: TextTagger, *args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return finish(self, *args, **kwargs)

    monkeypatch.setattr(TextTagger, "_finish", spy)
    tagger.tag(TEXTS)
    tagger.tag(TEXTS[0])
    tagger.annotate([["Mara", "Voss"]])
    assert seen and not any(seen)
    assert gc.isenabled()
    seen.clear()
    list(tagger.iter_tag(TEXTS))
    assert seen and all(seen)
    with pytest.raises(ValueError, match="texts\\[1\\] is an int"):
        tagger.tag([TEXTS[0], 3])  # type: ignore[list-item]
    assert gc.isenabled()


PACKAGE = str(Path(crfhead.__file__).parent)


def _of_crfhead(obj: object) -> bool:
    """Whether a garbage object is crfhead's: an instance of its classes, or its code's frame or
    function (a cycle through an exception's traceback holds the frames). Other threads of the
    process (pytest-xdist's message loop) may leave their own garbage in the same window."""
    if isinstance(obj, types.FrameType):
        return obj.f_code.co_filename.startswith(PACKAGE)
    if isinstance(obj, types.FunctionType):
        return obj.__code__.co_filename.startswith(PACKAGE)
    return type(obj).__module__.split(".")[0] == "crfhead"


@pytest.mark.parametrize("kind", ["indicator", "bilstm", "transformer"])
def test_tagging_makes_no_reference_cycles(
    kind: str, vocabs: dict[str, Any], tmp_path: Path
) -> None:
    """What the pause rests on: everything a call allocates is freed by reference counting, so a
    collection after it finds nothing of crfhead's (with marginals and k-best too)."""
    encoder = None
    if kind == "bilstm":
        encoder = {"class_path": "crfhead.encoders.BiLSTMEncoder", "init_args": {"hidden_size": 8}}
    if kind == "transformer":
        pytest.importorskip("transformers")
        folder = letter_bert(tmp_path / "bert")
        encoder = {
            "class_path": "crfhead.encoders.TransformerEncoder",
            "init_args": {"model": str(folder)},
        }
    tagger = _tagger(vocabs, encoder)
    tagger.tag(TEXTS)  # warm-up: caches, lazy imports
    tagger.annotate(TEXTS[:2], marginals=True, k=2)
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        out = tagger.tag(TEXTS)
        tagger.annotate(TEXTS[:2], marginals=True, k=2)
        gc.collect()
        garbage = list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert len(out) == len(TEXTS)
    ours = [o for o in garbage if _of_crfhead(o)]
    kinds = collections.Counter(type(o).__qualname__ for o in ours)
    assert not ours, f"{len(ours)} crfhead objects in cycles: {kinds.most_common(8)}"
