"""The lab page in a real browser: headless Chromium (Debian's package) driven by Playwright for Python.

Skipped, with the reason, when Playwright or a ``chromium`` on the PATH is missing
(``bash scripts/lab_deps.sh`` installs both). Playwright is pointed at the system browser, so no
browser download is needed. Each tab's screenshot is written to a temporary folder, or, to refresh the
README's, to ``$CRFHEAD_LAB_SCREENSHOTS`` (``CRFHEAD_LAB_SCREENSHOTS=docs/lab pytest
tests/lab/test_browser.py``); a tab whose payload is missing is always shot to the temporary folder,
so a committed screenshot is never replaced by a "payload missing" one.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from crfhead.lab.server import STATIC, LabServer, load_model, make_server

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="Playwright is not installed (bash scripts/lab_deps.sh)"
)
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    pytest.skip(
        "no chromium on the PATH (apt-get install chromium, or bash scripts/lab_deps.sh)",
        allow_module_level=True,
    )

ROOT = Path(__file__).resolve().parents[2]
SHOTS_ENV = os.environ.get("CRFHEAD_LAB_SCREENSHOTS")
SHOTS = Path(SHOTS_ENV).resolve() if SHOTS_ENV else None  # None: the test's temporary folder
DATA_TABS = ["trellis", "learning_curves", "label_bias", "perceptron", "finance", "higher_order"]
TABS = [*DATA_TABS[:5], "model", "higher_order"]
TEXT = "Solenne Power guided to 4 percent growth in the first quarter, said CEO Mara Voss."


def _serve(**kwargs: Any) -> Iterator[LabServer]:
    server = make_server(0, **kwargs)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        try:
            b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        except Exception as err:  # a chromium that cannot start here: say why, do not fail
            pytest.skip(f"chromium at {CHROMIUM} does not start: {str(err).splitlines()[0]}")
        yield b
        b.close()


@pytest.fixture(scope="module")
def server(lab_model_path: Path) -> Iterator[LabServer]:
    yield from _serve(tagger=load_model(lab_model_path), model_path=str(lab_model_path))


class Page:
    """A page with its console errors and uncaught exceptions collected."""

    def __init__(self, browser: Any, url: str) -> None:
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        self.errors: list[str] = []
        self.page.on(
            "console",
            lambda m: (
                self.errors.append(f"console.{m.type}: {m.text}") if m.type == "error" else None
            ),
        )
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.goto(url)
        self.page.wait_for_selector("body[data-ready='true']", timeout=30000)

    def tab(self, name: str) -> Any:
        self.page.click(f"#tab-{name}")
        panel = self.page.locator(f"#panel-{name}")
        assert panel.is_visible()
        return panel

    def close(self) -> None:
        self.page.close()


@pytest.fixture
def page(browser: Any, server: LabServer) -> Iterator[Page]:
    p = Page(browser, server.url)
    yield p
    p.close()


def _payload(tab: str) -> dict[str, Any] | None:
    path = STATIC / "data" / f"{tab}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _needs(tab: str) -> dict[str, Any]:
    data = _payload(tab)
    if data is None:
        pytest.skip(f"crfhead/lab/static/data/{tab}.json is not written yet")
    return data


# ------------------------------------------------------------------------------------ the page
def test_every_tab_renders_its_figure_with_no_console_error(page: Page, tmp_path: Path) -> None:
    if SHOTS is not None:
        SHOTS.mkdir(parents=True, exist_ok=True)
    for tab in TABS:
        panel = page.tab(tab)
        if tab == "model":
            page.page.fill("#model-text", TEXT)
            page.page.click("#model-submit")
            page.page.wait_for_selector("#model-output[data-state='done']", timeout=30000)
            assert page.page.locator("#model-trellis").is_visible()
            where = SHOTS or tmp_path
        elif _payload(tab) is None:
            assert panel.get_attribute("data-state") == "missing"
            assert "payload missing" in panel.inner_text()
            where = tmp_path
        else:
            assert panel.get_attribute("data-state") == "ready", panel.inner_text()[:500]
            figure = panel.locator(".lab-figure")
            assert figure.count() == 1 and figure.is_visible()
            box = figure.bounding_box()
            assert box is not None and box["width"] > 200 and box["height"] > 100
            where = SHOTS or tmp_path
        page.page.screenshot(path=str(where / f"{tab}.png"), full_page=True)
    assert page.errors == []


def test_the_page_fits_a_laptop(page: Page) -> None:
    for tab in TABS:
        page.tab(tab)
        width = page.page.evaluate("document.documentElement.scrollWidth")
        assert width <= 1280, (tab, width)


def test_tabs_follow_the_address_and_the_keyboard(browser: Any, server: LabServer) -> None:
    p = Page(browser, server.url + "#perceptron")
    try:
        assert p.page.locator("#panel-perceptron").is_visible()
        assert not p.page.locator("#panel-trellis").is_visible()
        p.page.focus("#tab-perceptron")
        p.page.keyboard.press("ArrowRight")
        assert p.page.locator("#panel-finance").is_visible()
        assert p.page.get_attribute("#tab-finance", "aria-selected") == "true"
    finally:
        p.close()


# ------------------------------------------------------------------------------------ trellis
def _cells(page: Page) -> dict[tuple[int, int], str]:
    raw = page.page.eval_on_selector_all(
        "#trellis-svg text.cell-value",
        "els => els.map(e => [Number(e.dataset.t), Number(e.dataset.k), e.textContent])",
    )
    return {(t, k): text for t, k, text in raw}


def test_the_semiring_toggle_and_the_viterbi_path_reads_exactly_1(page: Page) -> None:
    d = _needs("trellis")
    page.tab("trellis")
    T, K = len(d["marginals"]), len(d["marginals"][0])
    assert (T, K) == (24, 8)
    summed = _cells(page)
    assert len(summed) == T * K
    page.page.check("input[name='semiring'][value='max']")
    assert page.page.get_attribute("#trellis-svg", "data-semiring") == "max"
    maxed = _cells(page)
    assert summed != maxed
    for t in range(T):
        assert maxed[(t, d["viterbi"][t])] == "1", t
        values = page.page.eval_on_selector_all(
            f"#trellis-svg rect.cell[data-t='{t}']", "els => els.map(e => Number(e.dataset.value))"
        )
        assert values[d["viterbi"][t]] == 1.0
        assert max(values) == 1.0  # no state beats the best path
    page.page.check("input[name='semiring'][value='sum']")
    assert _cells(page) == summed
    for t in range(T):
        values = page.page.eval_on_selector_all(
            f"#trellis-svg rect.cell[data-t='{t}']", "els => els.map(e => Number(e.dataset.value))"
        )
        assert abs(sum(values) - 1.0) < 1e-4
    stats = page.page.inner_text("#panel-trellis .stats")
    assert f"{d['correct_viterbi']} / {T}" in stats
    assert f"{d['correct_posterior']} / {T}" in stats
    assert f"{d['expected_correct_viterbi']:.3f} / {d['expected_correct_posterior']:.3f}" in stats
    assert page.errors == []


def test_the_position_picker_updates_the_column(page: Page) -> None:
    d = _needs("trellis")
    page.tab("trellis")

    def column() -> list[float]:
        return [
            float(v)
            for v in page.page.eval_on_selector_all(
                "#column-values td.value", "els => els.map(e => e.dataset.value)"
            )
        ]

    start = int(page.page.get_attribute("#trellis-svg", "data-selected") or -1)
    assert start == (d["disagree_at"][0] if d["disagree_at"] else 0)
    assert column() == d["marginals"][start]
    page.page.fill("#position", "5")
    assert page.page.inner_text("#position-value") == "t = 5"
    assert page.page.get_attribute("#trellis-svg", "data-selected") == "5"
    assert column() == d["marginals"][5]
    page.page.click("button[aria-label='next position']")
    assert column() == d["marginals"][6]
    page.page.check("input[name='semiring'][value='max']")
    assert column() == d["max_marginals_relative"][6]
    cell = page.page.locator("#trellis-svg rect.cell[data-t='11'][data-k='0']")
    cell.dispatch_event("click")
    assert page.page.inner_text("#position-value") == "t = 11"
    assert column() == d["max_marginals_relative"][11]
    viterbi_row = page.page.locator(f"#column-values tr[data-k='{d['viterbi'][11]}']")
    assert "Viterbi" in viterbi_row.inner_text()
    assert page.errors == []


# ------------------------------------------------------------------------------------ your model
def test_your_model_shows_the_entities_of_the_sentence(page: Page, server: LabServer) -> None:
    panel = page.tab("model")
    assert "CRF" in panel.locator("#model-info").inner_text()
    text = "Kestrel Power guided to 9 percent growth in the second half, said CEO Mara Voss."
    page.page.fill("#model-text", text)
    page.page.press("#model-text", "Enter")
    page.page.wait_for_selector("#model-output[data-state='done']", timeout=30000)
    marks = page.page.eval_on_selector_all(
        "#entities mark.ent",
        "els => els.map(e => ({text: e.querySelector('.ent-text').textContent, start: Number(e.dataset.start),"
        " end: Number(e.dataset.end), label: e.dataset.label, p: e.dataset.probability,"
        " shown: e.innerText}))",
    )
    tagger = server.state.tagger
    assert tagger is not None
    expected = tagger.tag(text)
    assert len(marks) == len(expected) > 0
    for mark, ent in zip(marks, expected, strict=True):
        assert mark["text"] == text[mark["start"] : mark["end"]] == ent.text
        assert mark["label"] == ent.label
        assert abs(float(mark["p"]) - ent.probability) < 1e-9
        assert ent.label in mark["shown"] and f"p = {ent.probability:.3f}" in mark["shown"]
    # The whole text is there, entities in place.
    assert page.page.inner_text("#entities").count("Mara") == 1
    rows = page.page.locator("#topk-table tbody tr")
    assert rows.count() == 5
    cells = page.page.locator("#model-trellis rect.cell")
    assert cells.count() == len(tagger.labels) * len(tagger.tokenizer.tokenize(text))  # type: ignore[union-attr]
    page.page.select_option("#model-k", "3")
    page.page.click("#model-submit")
    sync_api.expect(page.page.locator("#topk-table tbody tr")).to_have_count(3)
    assert page.errors == []


def test_your_model_pins_a_span_and_clears_it(page: Page, server: LabServer) -> None:
    """Pin "Mara Voss" as PERSON by offsets: the page shows the tagger's constrained entities, the
    pin marked, what it changed; a pin that cuts a token is the server's message; Clear unpins."""
    panel = page.tab("model")
    assert panel.locator("#model-pins").is_visible()
    text = "Kestrel Power guided to 9 percent growth in the second half, said CEO Mara Voss."
    page.page.fill("#model-text", text)
    page.page.press("#model-text", "Enter")
    page.page.wait_for_selector("#model-output[data-state='done']", timeout=30000)
    start = text.index("Mara Voss")
    page.page.fill("#pin-start", str(start))
    page.page.fill("#pin-end", str(start + len("Mara Voss")))
    page.page.select_option("#pin-type", "PERSON")
    page.page.click("#pin-add")
    pinned = page.page.locator("#entities mark.ent[data-pinned='true']")
    sync_api.expect(pinned).to_have_count(1, timeout=30000)
    assert pinned.locator(".ent-text").inner_text() == "Mara Voss"
    assert "pinned" in pinned.inner_text()
    assert page.page.locator("#pin-list li").count() == 1
    tagger = server.state.tagger
    assert tagger is not None
    expected = tagger.tag(text, spans=[(start, start + len("Mara Voss"), "PERSON")])
    labels = page.page.eval_on_selector_all(
        "#entities mark.ent", "els => els.map(e => e.dataset.label)"
    )
    assert labels == [e.label for e in expected]
    assert page.page.locator("#pin-effect").is_visible()
    # A pin that cuts a token: the server's message, in the page.
    page.page.fill("#pin-start", "0")
    page.page.fill("#pin-end", "3")
    page.page.click("#pin-add")
    sync_api.expect(page.page.locator("#model-error")).to_contain_text("cuts token", timeout=30000)
    page.page.click("#pins-clear")
    sync_api.expect(page.page.locator("#pin-list li")).to_have_count(0)
    sync_api.expect(page.page.locator("#entities")).to_have_attribute(
        "data-conditioned", "false", timeout=30000
    )
    assert page.page.locator("#pin-effect").count() == 0
    # The refused pin's 400 is the only console error the browser logs (the failed request itself).
    refused = [e for e in page.errors if "status of 400" in e]
    assert len(refused) == 1
    assert [e for e in page.errors if e not in refused] == []


def test_no_model_says_so(browser: Any) -> None:
    for server in _serve():
        p = Page(browser, server.url + "#model")
        try:
            notice = p.page.locator("#no-model")
            assert notice.is_visible()
            assert "crfhead lab --model PATH" in notice.inner_text()
            assert p.page.get_attribute("#panel-model", "data-state") == "no-model"
            assert p.errors == []
        finally:
            p.close()


# ------------------------------------------------------------------------------------ payloads
def test_missing_and_broken_payloads_never_break_the_page(browser: Any, tmp_path: Path) -> None:
    static = tmp_path / "static"
    shutil.copytree(STATIC, static, ignore=shutil.ignore_patterns("data"))
    (static / "data").mkdir()
    (static / "data" / "perceptron.json").write_text('{"tab": "perceptron", "margins": 3}')
    for server in _serve(static=static):
        p = Page(browser, server.url)
        try:
            for tab in DATA_TABS:
                panel = p.tab(tab)
                text = panel.inner_text()
                if tab == "perceptron":
                    assert panel.get_attribute("data-state") == "error"
                    assert "could not be drawn" in text
                else:
                    assert panel.get_attribute("data-state") == "missing"
                    assert "payload missing" in text and f"data/{tab}.json" in text
            assert p.errors == []
        finally:
            p.close()


# ------------------------------------------------------------------------------------ joint mode
@pytest.fixture(scope="module")
def joint_server(lab_higher_order_path: Path) -> Iterator[LabServer]:
    yield from _serve(
        tagger=load_model(lab_higher_order_path), model_path=str(lab_higher_order_path)
    )


def test_lines_decoded_jointly_by_a_higher_order_model(
    browser: Any, joint_server: LabServer, tmp_path: Path
) -> None:
    lines = [
        "Solenne Power guided to 4 percent growth in the first quarter, said CEO Mara Voss.",
        "",
        "Mara Voss said Solenne Power grew.",
        "nothing to see here",
    ]
    texts = [line for line in lines if line]
    tagger = joint_server.state.tagger
    assert tagger is not None
    p = Page(browser, joint_server.url + "#model")
    try:
        assert p.page.locator("#model-one").is_visible()
        assert not p.page.locator("#model-joint").is_visible()
        p.page.check("input[name='model-mode'][value='joint']")
        assert p.page.locator("#model-joint").is_visible()
        assert not p.page.locator("#model-one").is_visible()
        p.page.fill("#joint-texts", "\n".join(lines))

        def decode(group: str) -> None:
            p.page.select_option("#joint-group", group)
            p.page.click("#joint-submit")
            # The click sets the state to busy before it returns; done means this answer drawn.
            p.page.wait_for_selector(
                "#joint-output[data-state='done'] #joint-result", timeout=30000
            )

        decode("auto")
        groups = tagger.groups_for(texts, "auto")
        assert groups == [[0, 1], [2]]
        boxes = p.page.locator("#joint-result .joint-group")
        assert boxes.count() == 2
        assert "lines 1, 3" in boxes.nth(0).locator("h3").inner_text()  # line numbers as typed
        want = tagger.annotate(texts, group="auto")
        alone = tagger.annotate(texts)
        for g, members in enumerate(groups):
            badge = boxes.nth(g).locator(".badge").inner_text()
            certified = want[members[0]].certified
            assert ("certified optimal" in badge) == bool(certified), badge
        shown = p.page.eval_on_selector_all(
            "#joint-result .joint-line",
            "els => els.map(e => ({line: Number(e.dataset.line), text: Number(e.dataset.text),"
            " ents: [...e.querySelectorAll('mark.ent')].map(m => m.dataset.label),"
            " changed: [...e.querySelectorAll('.tok.changed')].map(t => Number(t.dataset.t))}))",
        )
        assert [s["line"] for s in shown] == [1, 3, 4]
        for s in shown:
            i = s["text"]
            assert s["ents"] == [e.label for e in want[i].entities]
            diff = [
                t
                for t, (a, b) in enumerate(zip(want[i].tags, alone[i].tags, strict=True))
                if a != b
            ]
            assert s["changed"] == diff
        assert any(s["changed"] for s in shown)  # this model relabels some token
        count = sum(len(s["changed"]) for s in shown)
        assert p.page.inner_text("#joint-changed") == str(count)
        p.page.screenshot(path=str((SHOTS or tmp_path) / "model_joint.png"), full_page=True)

        decode("none")
        assert p.page.locator("#joint-result .tok.changed").count() == 0
        assert p.page.inner_text("#joint-groups") == "0"
        decode("all")
        assert p.page.locator("#joint-result .joint-group").count() == 1
        width = p.page.evaluate("document.documentElement.scrollWidth")
        assert width <= 1280
        # The one-sentence mode is still there, trellis and all.
        p.page.check("input[name='model-mode'][value='one']")
        assert not p.page.locator("#model-joint").is_visible()
        p.page.fill("#model-text", texts[1])
        p.page.click("#model-submit")
        p.page.wait_for_selector("#model-output[data-state='done'] #model-trellis", timeout=30000)
        assert p.errors == []
    finally:
        p.close()


def test_a_chain_model_offers_no_joint_mode(page: Page) -> None:
    page.tab("model")
    assert page.page.locator("input[name='model-mode']").count() == 0
    assert page.page.locator("#joint-texts").count() == 0
