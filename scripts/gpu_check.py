"""The first-device check: timings, a bf16 step, and the Triton kernels on CUDA against the portable engine.

Run on a machine with a GPU (``bash scripts/gpu_check.sh`` finds the Python, unpacks the carried
wheels, runs this, then ``bench_chain.py --device cuda``)::

    python scripts/gpu_check.py [--device cuda] [--quick] [--budget SECONDS]

Three parts, in this order (the headline numbers compile two kernels; the agreement compiles them all),
each timed, each run even when one before it failed; the exit status is 1 if any failed:

1. **Timing**: the loss (forward + backward) at (64, 128, 17), crfhead (triton) against pytorch-crf
   when installed (goal >= 20x), median of 20 calls after warm-up, CUDA-synchronised.
2. **bf16**: one training step of a transformer-CRF (a tiny random BERT, so no download) under
   ``torch.autocast(bfloat16)``: finite loss, finite gradients, the chain in float32.
3. **Agreement** (every mismatch printed): on random chains with holes, empty rows, forbidden
   (``-inf``) starts / transitions / ends / emissions, rows with no valid path, shared and per-edge
   transitions, float32 and float64, scores x1e-3 ... x1e4: every op of the table, Triton against
   portable on the same device: ``log Z``, node, edge and max-marginals, Viterbi scores and paths,
   the entropy, the k-best (scores, and each path scoring what it claims), the loss with its
   gradients, and the samples (allowed paths only, reproducible from the generator, node frequencies
   within 5 standard errors of the marginals).

The agreement runs its toy cases first (every op at small sizes), then the full ones unless
``--quick``; with ``--budget`` it starts no full case after that many seconds and says how many ran.
On a CPU, ``--device cpu --budget 0`` with ``TRITON_INTERPRET=1`` runs the three with the toy cases
through Triton's interpreter (``bash scripts/gpu_check.sh --rehearse``, how this script is itself
tested); ``--quick`` also shrinks the timing to (4, 16, 5).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable

import torch

from crfhead import make_potentials
from crfhead.engine import (
    edge_marginals,
    entropy,
    log_partition,
    marginals,
    max_marginals,
    nll,
    sample,
    score,
    topk,
    viterbi,
)
from crfhead.engine.backends import available

INF = math.inf


def _chain(
    seed: int,
    B: int,
    T: int,
    K: int,
    per_position: bool,
    scale: float,
    dtype: torch.dtype,
    device: str,
) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    em = torch.randn(B, T, K, generator=g, dtype=torch.float64) * scale
    shape = (B, max(T - 1, 0), K, K) if per_position else (K, K)
    tr = torch.randn(*shape, generator=g, dtype=torch.float64) * scale
    start, end = (
        torch.randn(K, generator=g, dtype=torch.float64),
        torch.randn(K, generator=g, dtype=torch.float64),
    )
    for x, p in ((em, 0.1), (tr, 0.25), (start, 0.2), (end, 0.2)):
        x[torch.rand(x.shape, generator=g) < p] = -INF
    start[0] = end[0] = 0.0  # keep most rows possible; some still have no valid path
    mask = torch.rand(B, T, generator=g) < 0.85
    if B > 1:
        mask[1] = False  # an empty row
    if B > 2 and T > 1:
        em[2, T // 2] = -INF  # a row with no valid path
    return (*(x.to(device, dtype) for x in (em, tr, start, end)), mask.to(device))


def _close(name: str, got: torch.Tensor, want: torch.Tensor, atol: float, rtol: float) -> list[str]:
    got, want = got.detach().double().cpu(), want.detach().double().cpu()
    if got.shape != want.shape:
        return [f"{name}: shape {tuple(got.shape)} != {tuple(want.shape)}"]
    both_inf = torch.isinf(got) & torch.isinf(want) & (torch.sign(got) == torch.sign(want))
    if bool((torch.isnan(got) | torch.isnan(want)).any()):
        return [f"{name}: NaN"]
    diff = torch.where(both_inf, 0.0, (got - want).abs())
    tol = atol + rtol * torch.where(both_inf, 0.0, want.abs())
    bad = diff > tol
    if bool(bad.any()):
        i = tuple(int(v) for v in bad.nonzero()[0])
        return [
            f"{name}: max error {float(diff.max()):.3g} (first at {i}: {float(got[i])} vs {float(want[i])})"
        ]
    return []


QUICK = ([(4, 7, 5), (3, 1, 3)], [1e-3, 1.0, 1e4])
"""The toy cases' sizes ``(B, T, K)`` and score scales (the interpreter: each op takes seconds)."""
FULL = ([(8, 33, 9), (5, 1, 4), (6, 64, 17), (3, 0, 5)], [1e-3, 1.0, 1e2, 1e4])
"""The device's cases besides: each block size, lengths 0, 1 and multiples of 16 or not."""

Case = tuple[int, int, int, bool, torch.dtype, float, bool]


def cases(quick: bool) -> list[Case]:
    """``(B, T, K, per_position, dtype, scale, more)`` in the order they run: the toy ones first
    (every op, the k-best, samples and edge/max-marginals at scale 1 only), then unless ``quick``
    the full ones (every op at every scale). ``more``: the k-best, samples and edge/max-marginals too."""
    out: list[Case] = []
    for (sizes, scales), full in ((QUICK, False), *(() if quick else ((FULL, True),))):
        for B, T, K in sizes:
            for per_position in (False, True):
                for dtype in (torch.float32, torch.float64):
                    for scale in scales:
                        out.append((B, T, K, per_position, dtype, scale, full or scale == 1.0))
    return out


def agreement(device: str, quick: bool, budget_s: float = math.inf) -> tuple[list[str], int, int]:
    """Every mismatch between the triton and portable backends, as lines; the cases run and all.

    The toy cases always run (they reach every op); no full case starts once ``budget_s`` seconds
    have passed (a first GPU compiles every kernel variant: the budget keeps the run inside its
    lease, and the count says what it covered).
    """
    problems: list[str] = []
    todo, always = cases(quick), len(cases(True))
    t0 = time.perf_counter()
    done = 0
    for seed, (B, T, K, per_position, dtype, scale, more) in enumerate(todo, start=1):
        if done >= always and time.perf_counter() - t0 > budget_s:
            break
        problems += _case(seed, B, T, K, per_position, dtype, scale, more, device)
        done += 1
        if done == len(todo) or (done < always, todo[done][:3]) != (done - 1 < always, (B, T, K)):
            print(
                f"  agreement up to ({B}, {T}, {K}): {done} cases, {time.perf_counter() - t0:.1f} s"
            )
    return problems, done, len(todo)


def _case(
    seed: int,
    B: int,
    T: int,
    K: int,
    per_position: bool,
    dtype: torch.dtype,
    scale: float,
    more: bool,
    device: str,
) -> list[str]:
    """One chain's mismatches: every op, triton against portable; ``more``: the rarer ops too."""
    problems: list[str] = []
    args = _chain(seed, B, T, K, per_position, scale, dtype, device)
    leaves = [x.clone().requires_grad_(True) for x in args[:4]]
    tag = f"B={B} T={T} K={K} per_position={per_position} {dtype} x{scale:g}"
    tol = (1e-9, 1e-9) if dtype == torch.float64 else (1e-4, 1e-5)
    out = {}
    for backend in ("triton", "portable"):
        pot = make_potentials(*args)
        out[backend] = (
            log_partition(pot, backend=backend),
            marginals(pot, backend=backend),
            *viterbi(pot, backend=backend),
            entropy(pot, backend=backend),
        )
    for name, a, b in zip(
        ("log Z", "marginals", "viterbi score", "paths", "entropy"),
        out["triton"],
        out["portable"],
        strict=True,
    ):
        if name != "paths":
            problems += [f"{tag}: {p}" for p in _close(name, a, b, *tol)]
    if not torch.equal(out["triton"][3].cpu(), out["portable"][3].cpu()):
        problems.append(f"{tag}: Viterbi paths differ")
    if more:
        problems += [f"{tag}: {p}" for p in _more_ops(args, device, tol)]
    tags = out["portable"][3].clamp(min=0)
    grads = {}
    for backend in ("triton", "portable"):
        pot = make_potentials(*leaves, args[4])
        loss, _ = nll(pot, tags, backend=backend)
        finite = torch.where(torch.isfinite(loss), loss, 0.0).sum()
        grads[backend] = torch.autograd.grad(finite, leaves, allow_unused=True)
    for i, (a, b) in enumerate(zip(grads["triton"], grads["portable"], strict=True)):
        if a is not None and b is not None:
            problems += [f"{tag}: {p}" for p in _close(f"grad {i}", a, b, *tol)]
    return problems


def _more_ops(args: tuple[torch.Tensor, ...], device: str, tol: tuple[float, float]) -> list[str]:
    """Edge and max-marginals, k-best and samples: triton against portable (or against the chain)."""
    problems: list[str] = []
    pot = make_potentials(*args)
    for name, op in (("edge marginals", edge_marginals), ("max-marginals", max_marginals)):
        problems += _close(name, op(pot, backend="triton"), op(pot, backend="portable"), *tol)
    k = 4
    got_s, got_p = topk(pot, k, backend="triton")
    want_s, _ = topk(pot, k, backend="portable")
    problems += _close("k-best scores", got_s, want_s, *tol)
    B, T = args[4].shape
    found = got_s > -INF
    for r in range(k):
        paths = got_p[:, r]
        s_r = score(pot, paths.clamp(min=0))
        problems += _close(
            f"k-best rank {r} rescored", torch.where(found[:, r], s_r, -INF), got_s[:, r], *tol
        )
    gen = torch.Generator(device=device)
    draws = sample(pot, 2000, gen.manual_seed(7), backend="triton")
    again = sample(pot, 2000, gen.manual_seed(7), backend="triton")
    if not torch.equal(draws, again):
        problems.append("samples: not reproducible from the generator")
    logz = log_partition(pot, backend="portable")
    ok_rows = torch.isfinite(logz) & args[4].any(1)
    if bool(((draws >= 0) != (args[4] & ok_rows[:, None])[None]).any()):
        problems.append("samples: a tag at a masked position, or -1 at an unmasked one")
    S = 100  # each of the first S draws scores a finite path
    s_draws = score(
        make_potentials(
            *(x.repeat(S, *([1] * (x.dim() - 1))) if x.dim() in (3, 4) else x for x in args[:4]),
            args[4].repeat(S, 1),
        ),
        draws[:S].reshape(-1, T).clamp(min=0),
    ).reshape(S, B)
    if bool((~torch.isfinite(s_draws[:, ok_rows])).any()):
        problems.append("samples: a forbidden path")
    if bool(ok_rows.any()) and T > 0:
        K = args[0].shape[2]
        freq = torch.nn.functional.one_hot(draws.clamp(min=0), K).double().mean(0)
        mu = marginals(pot, backend="portable").double()
        on = (args[4] & ok_rows[:, None])[..., None].expand_as(mu)
        err = (freq - mu).abs()[on]
        bound = (5 * (mu * (1 - mu) / 2000).sqrt() + 2e-3)[on]
        if bool((err > bound).any()):
            problems.append(f"samples: node frequency off its marginal by {float(err.max()):.3g}")
    return problems


def _median_ms(fn: Callable[[], object], device: str, repeats: int = 20) -> float:
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeats):
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    times.sort()
    return 1e3 * times[len(times) // 2]


def timing(device: str, B: int = 64, T: int = 128, K: int = 17, repeats: int = 20) -> None:
    """The loss (forward + backward) at ``(B, T, K)``: crfhead (triton on CUDA) against pytorch-crf."""
    g = torch.Generator().manual_seed(0)
    em = torch.randn(B, T, K, generator=g).to(device).requires_grad_(True)
    tags = torch.randint(0, K, (B, T), generator=g).to(device)
    from crfhead import CRF

    crf = CRF(K).to(device)

    def ours() -> None:
        crf.nll(em, tags).backward()

    size = f"({B}, {T}, {K})"
    print(f"crfhead loss {size} on {device}: {_median_ms(ours, device, repeats):.3f} ms")
    try:
        import torchcrf
    except ImportError:
        print("pytorch-crf not installed: no comparison")
        return
    theirs_crf = torchcrf.CRF(K, batch_first=True).to(device)

    def theirs() -> None:
        (-theirs_crf(em, tags, reduction="mean")).backward()

    t_ours, t_theirs = _median_ms(ours, device, repeats), _median_ms(theirs, device, repeats)
    print(f"pytorch-crf {size}: {t_theirs:.3f} ms; ratio {t_theirs / t_ours:.1f}x (goal >= 20x)")


def bf16_step(device: str) -> None:
    """One transformer-CRF training step under bf16 autocast on a tiny random BERT."""
    import tempfile
    from pathlib import Path

    from transformers import BertConfig, BertModel, BertTokenizerFast

    from crfhead import CRF
    from crfhead.data.batching import Collator
    from crfhead.data.sentence import LabelVocab, Sentence
    from crfhead.encoders import TransformerEncoder

    with tempfile.TemporaryDirectory() as tmp:
        letters = "abcdefghijklmnopqrstuvwxyz"
        pieces = [
            "[PAD]",
            "[UNK]",
            "[CLS]",
            "[SEP]",
            "[MASK]",
            *letters,
            *(f"##{c}" for c in letters),
        ]
        (Path(tmp) / "vocab.txt").write_text("\n".join(pieces) + "\n", encoding="utf-8")
        tok = BertTokenizerFast.from_pretrained(tmp, local_files_only=True)
        cfg = BertConfig(
            vocab_size=len(pieces),
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=37,
        )
        BertModel(cfg).save_pretrained(tmp)
        tok.save_pretrained(tmp)
        labels = LabelVocab.from_types(["ORG"], "BIO")
        enc = TransformerEncoder(len(labels), model=tmp).to(device)
        crf = CRF(len(labels), labels=labels.labels, scheme="BIO").to(device)
        sents = [
            Sentence(["solenne", "power", "rose"], ["B-ORG", "I-ORG", "O"]),
            Sentence(["it", "fell"], ["O", "O"]),
        ]
        batch = Collator(labels=labels)(sents).to(device)
        opt = torch.optim.AdamW([*enc.parameters(), *crf.parameters()], lr=1e-3)
        with torch.autocast(device_type=device, dtype=torch.bfloat16):
            em = enc(batch)
            loss = crf.nll(em, batch.tags, batch.mask)
        loss.backward()
        grads_ok = all(
            p.grad is None or bool(torch.isfinite(p.grad).all()) for p in crf.parameters()
        )
        opt.step()
        print(
            f"bf16 transformer-CRF step: emissions {em.dtype}, loss {float(loss.detach()):.4f} ({loss.dtype}), finite grads {grads_ok}"
        )
        if not (math.isfinite(float(loss.detach())) and grads_ok):
            raise RuntimeError("bf16 step: non-finite loss or gradients")


def _step(name: str, fn: Callable[[], object]) -> bool:
    """Run one part, say how long it took; an exception is printed and counted, not raised."""
    t0 = time.perf_counter()
    try:
        fn()
    except Exception as e:  # each part reports on its own: a failure must not hide the others
        print(f"{name}: FAILED ({type(e).__name__}: {e})", file=sys.stderr)
        return False
    finally:
        print(f"({name}: {time.perf_counter() - t0:.1f} s)")
    return True


def agreement_step(device: str, quick: bool, budget_s: float) -> None:
    problems, done, total = agreement(device, quick, budget_s)
    covered = "" if done == total else f" on {done} of {total} cases (budget {budget_s:g} s spent)"
    verdict = "OK" if not problems else f"{len(problems)} mismatches"
    print(f"agreement, triton vs portable: {verdict}{covered}")
    for p in problems[:50]:
        print("  " + p, file=sys.stderr)
    if problems:
        raise RuntimeError(f"{len(problems)} mismatches")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--quick", action="store_true", help="fewer, smaller agreement cases; a toy timing size"
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=math.inf,
        help="seconds after which the agreement starts no new case (default: none)",
    )
    args = parser.parse_args()
    ok, why = available("triton")
    if not ok:
        raise SystemExit(f"the triton backend is unavailable here: {why}")
    print(
        f"device {args.device}"
        + (f" ({torch.cuda.get_device_name()})" if args.device == "cuda" else "")
    )
    # The headline numbers first (two kernels to compile), then the agreement (every kernel).
    size = (4, 16, 5, 3) if args.quick else (64, 128, 17, 20)
    results = [
        _step("timing", lambda: timing(args.device, *size)),
        _step("bf16 step", lambda: bf16_step(args.device)),
        _step("agreement", lambda: agreement_step(args.device, args.quick, args.budget)),
    ]
    raise SystemExit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
