"""``import crfhead``, a CRF on CPU and ``crfhead --help`` import no heavy package; ``crfhead --version``.

Each check runs in a fresh interpreter (the test process has imported everything already) and reads
its ``sys.modules``. The heavy packages: ``torch._dynamo`` (seconds; :mod:`crfhead.engine.backends.select`
marks its tracing constants without it), Lightning, transformers, datasets.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import torch

import crfhead

HEAVY = ("torch._dynamo", "pytorch_lightning", "lightning", "transformers", "datasets")

_REPORT = """
import json, sys
heavy = {heavy!r}
print(json.dumps(sorted({{m for m in sys.modules if m in heavy or m.startswith(tuple(h + "." for h in heavy))}})))
"""


def _heavy_imported(code: str) -> list[str]:
    """The heavy modules in ``sys.modules`` after running ``code`` in a fresh interpreter."""
    script = textwrap.dedent(code) + _REPORT.format(heavy=HEAVY)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


def test_import_crfhead_and_a_crf_on_cpu_import_nothing_heavy() -> None:
    code = """
    import torch
    import crfhead
    from crfhead import CRF
    crf = CRF(3)
    em, mask = torch.randn(2, 4, 3), torch.tensor([[1, 1, 0, 1], [0, 0, 0, 0]])
    loss = crf(em, torch.zeros(2, 4, dtype=torch.long), mask)
    loss.backward()
    crf.decode(em, mask.bool())
    crf.marginals(em, mask)
    """
    assert _heavy_imported(code) == []


def test_crfhead_help_imports_nothing_heavy() -> None:
    code = """
    from crfhead.cli import main
    assert main(["--help"]) == 0
    """
    assert _heavy_imported(code) == []


def test_version_prints_crfhead_and_torch() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "crfhead", "--version"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"crfhead {crfhead.__version__} (torch {torch.__version__})\n"


def test_select_sets_what_assume_constant_result_sets() -> None:
    """The constants of tracing carry exactly the attributes torch's decorator would give them."""
    from crfhead.engine.backends import select

    def plain() -> None: ...

    def decorated() -> None: ...

    torch.compiler.assume_constant_result(decorated)
    added = set(vars(decorated)) - set(vars(plain))
    assert added == {"_dynamo_marked_constant"}
    for fn in (select._ambient, select._cpu_kernel_ready):
        assert {name: vars(fn)[name] for name in added} == {
            name: vars(decorated)[name] for name in added
        }


def test_training_and_span_scoring_import_no_scikit_learn() -> None:
    """``seqeval.metrics`` imports scikit-learn, pandas and pyarrow (~100 MiB resident): the
    training CLI and strict span scoring stay off it; only the IO scheme's conlleval reading loads it."""
    code = """
    import crfhead.training.cli
    from crfhead.evaluation.metrics import TaggingMetrics
    metrics = TaggingMetrics("BIOES")
    metrics.update([["B-X", "E-X", "O"]], [["S-X", "O", "O"]])
    assert metrics.compute()["f1"] == 0.0
    import sys
    assert not [m for m in sys.modules if m.split(".")[0] in ("sklearn", "pandas", "pyarrow")]
    TaggingMetrics("IO").update([["I-X"]], [["I-X"]])
    assert "sklearn" in sys.modules  # the lazy import still happens where it is needed
    """
    _heavy_imported(code)
