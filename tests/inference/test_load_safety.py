"""Loading and saving a model safely: no code from a model folder runs, checkpoints load weights-only,
saves replace atomically, clean up after crashed saves, never delete a user's files, follow the umask,
and ``config.json`` is checked against the rest of the folder (issue 27)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest
import torch
from helpers import train_tiny_finance

import crfhead
from crfhead.heads.crf import CRF
from crfhead.inference import saved
from crfhead.model import build
from crfhead.model.checkpoints import TRUST_ENV, read_checkpoint

__all__: list[str] = []


class UserCRF(CRF):
    """A user's own head: loads from a saved model only once registered."""


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_tiny_finance(tmp_path_factory.mktemp("tiny"))


@pytest.fixture
def folder(checkpoint: Path, tmp_path: Path) -> Path:
    return crfhead.load(checkpoint).save(tmp_path / "model")


def _edit(folder: Path, **changes: object) -> None:
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))


def _load_in_subprocess(cwd: Path) -> subprocess.CompletedProcess[str]:
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [sys.executable, "-c", "import crfhead; crfhead.load('.')"],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        check=False,
    )


# Item 1: class paths -------------------------------------------------------------------------


def test_a_module_in_the_model_folder_never_runs(folder: Path) -> None:
    marker = folder.parent / "ran.txt"
    (folder / "evil.py").write_text(
        f"open({str(marker)!r}, 'w').write('ran')\nclass X:\n    pass\n"
    )
    _edit(folder, encoder={"class_path": "evil.X", "init_args": {}})
    out = _load_in_subprocess(folder)
    assert out.returncode != 0
    assert not marker.exists()
    last = out.stderr.strip().splitlines()[-1]
    assert "'evil.X'" in last and "config.json" in last and "register_component" in last


def test_this_is_never_imported(folder: Path) -> None:
    _edit(folder, head={"class_path": "this.X"})
    out = _load_in_subprocess(folder)
    assert out.returncode != 0
    assert "Beautiful is better" not in out.stdout + out.stderr
    assert "'this.X'" in out.stderr and "refused" in out.stderr


def test_a_nested_spec_in_a_saved_model_is_strict_too(folder: Path) -> None:
    _edit(
        folder,
        encoder={
            "class_path": "crfhead.encoders.IndicatorEncoder",
            "init_args": {"x": {"class_path": "os.system"}},
        },
    )
    with pytest.raises(ValueError, match=r"'os\.system' refused"):
        crfhead.load(folder)


def test_a_stdlib_class_reexported_by_crfhead_is_refused(folder: Path) -> None:
    _edit(folder, encoder={"class_path": "crfhead.lab.server.ThreadingHTTPServer"})
    with pytest.raises(ValueError, match="not a class defined in crfhead"):
        crfhead.load(folder)


def test_a_saved_user_class_loads_only_once_registered(folder: Path) -> None:
    path = f"{UserCRF.__module__}.{UserCRF.__qualname__}"
    _edit(folder, head={"class_path": path})
    with pytest.raises(ValueError, match=r"register_component"):
        crfhead.load(folder)
    try:
        crfhead.register_component(UserCRF)
        assert isinstance(crfhead.load(folder).model.head, UserCRF)
    finally:
        build._REGISTERED.pop(path, None)


def test_training_from_ones_own_config_may_still_import_user_classes() -> None:
    from crfhead.data.sentence import LabelVocab

    labels = LabelVocab(["O", "B-X", "I-X"], "BIO")
    path = f"{UserCRF.__module__}.{UserCRF.__qualname__}"
    assert isinstance(build.build_head({"class_path": path}, labels), UserCRF)
    with build.strict_components("saved.ckpt"), pytest.raises(ValueError, match=r"saved\.ckpt"):
        build.build_head({"class_path": path}, labels)


def test_a_checkpoint_naming_a_foreign_class_is_refused(checkpoint: Path, tmp_path: Path) -> None:
    ckpt = torch.load(checkpoint, map_location="cpu", weights_only=True)
    ckpt["hyper_parameters"]["encoder"] = {"class_path": "this.X"}
    bad = tmp_path / "bad.ckpt"
    torch.save(ckpt, bad)
    with pytest.raises(ValueError, match=r"bad\.ckpt.*'this\.X' refused"):
        crfhead.load(bad)


# Item 2: checkpoints -------------------------------------------------------------------------


def test_a_checkpoint_with_arbitrary_objects_loads_only_if_trusted(
    checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ckpt = torch.load(checkpoint, map_location="cpu", weights_only=True)
    ckpt["hyper_parameters"]["extra"] = Fraction(1, 3)  # any class: unpickling would call it
    odd = tmp_path / "odd.ckpt"
    torch.save(ckpt, odd)
    with pytest.raises(ValueError, match=r"odd\.ckpt.*pickle that can run code.*trust=True"):
        read_checkpoint(odd)
    assert read_checkpoint(odd, trust=True)["hyper_parameters"]["extra"] == Fraction(1, 3)
    monkeypatch.setenv(TRUST_ENV, "1")
    assert "state_dict" in read_checkpoint(odd)


def test_a_plain_checkpoint_loads_weights_only(
    checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[object] = []
    real = torch.load

    def spy(*args: object, **kwargs: object) -> object:
        calls.append(kwargs.get("weights_only"))
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(torch, "load", spy)
    read_checkpoint(checkpoint)
    assert calls == [True]


# Item 3: save --------------------------------------------------------------------------------


def test_a_failed_replacement_leaves_the_old_model_in_place(
    checkpoint: Path, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = (folder / "config.json").read_text()
    monkeypatch.setattr(saved, "_exchange", lambda a, b: False)  # the two-rename fallback
    real = Path.rename
    calls = []

    def rename(self: Path, target: Path) -> Path:
        calls.append(self)
        if len(calls) == 2:  # the new folder into place
            raise OSError("disk gone")
        return real(self, target)

    monkeypatch.setattr(Path, "rename", rename)
    with pytest.raises(OSError, match="disk gone"):
        crfhead.load(checkpoint).save(folder, overwrite=True)
    monkeypatch.undo()
    assert (folder / "config.json").read_text() == before
    crfhead.load(folder)
    assert not list(folder.parent.glob(".model*"))


def test_a_crash_between_the_renames_is_named_and_recovered(checkpoint: Path, folder: Path) -> None:
    old = folder.with_name(".model.old")
    folder.rename(old)  # what a kill -9 between the two renames leaves
    with pytest.raises(ValueError, match=r"\.model\.old"):
        crfhead.load(folder)
    crfhead.load(checkpoint).save(folder, overwrite=True)
    assert not old.exists()
    crfhead.load(folder)


def test_overwrite_swaps_atomically_where_the_kernel_can(checkpoint: Path, folder: Path) -> None:
    swapped = saved._exchange  # real on Linux; False elsewhere, which the fallback test covers
    crfhead.load(checkpoint).save(folder, overwrite=True)
    assert (folder / "config.json").is_file() and callable(swapped)
    assert not list(folder.parent.glob(".model*"))


def test_stale_temporary_folders_of_dead_saves_are_removed(
    checkpoint: Path, tmp_path: Path
) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    stale = tmp_path / f".model.tmp-{int(dead.stdout)}-abcd"
    live = tmp_path / f".model.tmp-{os.getppid()}-efgh"  # a live process: must be kept
    other = tmp_path / f".other.tmp-{int(dead.stdout)}-ijkl"  # another destination's
    for p in (stale, live, other):
        p.mkdir()
    crfhead.load(checkpoint).save(tmp_path / "model")
    assert not stale.exists() and live.is_dir() and other.is_dir()


def test_overwrite_never_deletes_a_folder_of_other_files(folder: Path, checkpoint: Path) -> None:
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not a crfhead model folder"):
        crfhead.load(checkpoint).save(folder, overwrite=True)
    assert (folder / "notes.txt").read_text() == "mine"


def test_saved_files_follow_the_umask(checkpoint: Path, tmp_path: Path) -> None:
    from crfhead.training.callbacks import AtomicCheckpointIO

    mask = os.umask(0o027)
    try:
        folder = crfhead.load(checkpoint).save(tmp_path / "model")
        AtomicCheckpointIO().save_checkpoint({"a": 1}, tmp_path / "x.ckpt")
    finally:
        os.umask(mask)
    assert folder.stat().st_mode & 0o777 == 0o750
    assert (folder / "config.json").stat().st_mode & 0o777 == 0o640
    assert (tmp_path / "x.ckpt").stat().st_mode & 0o777 == 0o640


# Item 4: config.json checks ------------------------------------------------------------------


def test_a_non_integer_format_version_is_named(folder: Path) -> None:
    _edit(folder, format_version="two")
    with pytest.raises(ValueError, match=r"config\.json: format_version must be an integer"):
        crfhead.load(folder)


def test_labels_edited_in_config_disagree_with_the_vocabularies(folder: Path) -> None:
    config = json.loads((folder / "config.json").read_text())
    _edit(folder, labels=[*config["labels"][:-1], "B-EDITED"])
    with pytest.raises(ValueError, match=r"config\.json and .*vocabs\.json disagree on labels"):
        crfhead.load(folder)
    _edit(folder, labels=config["labels"], scheme="IOBES" if config["scheme"] != "IOBES" else "BIO")
    with pytest.raises(ValueError, match="disagree on scheme"):
        crfhead.load(folder)


def test_constrained_must_be_a_bool(folder: Path) -> None:
    _edit(folder, constrained="no")
    with pytest.raises(ValueError, match="constrained must be true or false, got 'no'"):
        crfhead.load(folder)


def test_a_flipped_byte_in_the_weights_is_caught(folder: Path) -> None:
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0x01  # in the last tensor's data: safetensors itself would not notice
    weights.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"model\.safetensors: corrupt weights \(SHA-256"):
        crfhead.load(folder)


def test_a_version_1_folder_without_checksum_still_loads(folder: Path) -> None:
    config = json.loads((folder / "config.json").read_text())
    assert config["format_version"] == 2 and len(config["weights_sha256"]) == 64
    del config["weights_sha256"]
    config["format_version"] = 1
    (folder / "config.json").write_text(json.dumps(config))
    crfhead.load(folder)


def _site_with_package(root: Path, *, declare: bool) -> Path:
    """A folder for ``sys.path`` holding ``mypkg`` (its import writes a marker), installed as a
    distribution that declares ``mypkg.heads:MyCRF`` as a crfhead component when ``declare``."""
    site = root / "site"
    (site / "mypkg").mkdir(parents=True)
    (site / "mypkg" / "__init__.py").write_text("")
    (site / "mypkg" / "heads.py").write_text(
        "from pathlib import Path\n"
        f"Path({str(root / 'imported')!r}).write_text('yes')\n"
        "from crfhead.heads.crf import CRF\n"
        "class MyCRF(CRF):\n    pass\n"
    )
    info = site / "mypkg-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mypkg\nVersion: 0.1\n")
    if declare:
        (info / "entry_points.txt").write_text(
            f"[{build.ENTRY_POINTS}]\nMyCRF = mypkg.heads:MyCRF\n"
        )
    return site


@pytest.mark.parametrize("declare", [True, False])
def test_an_installed_package_opts_a_class_in_by_entry_point(
    folder: Path, tmp_path: Path, declare: bool
) -> None:
    site = _site_with_package(tmp_path, declare=declare)
    _edit(folder, head={"class_path": "mypkg.heads.MyCRF"})
    root = Path(__file__).resolve().parents[2]
    code = f"import crfhead; print(type(crfhead.load({str(folder)!r}).model.head).__name__)"
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{site}"},
        check=False,
    )
    if declare:
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "MyCRF"
    else:
        assert done.returncode != 0
        assert "'mypkg.heads.MyCRF' refused" in done.stderr
        assert "entry points" in done.stderr
        assert not (tmp_path / "imported").exists()
