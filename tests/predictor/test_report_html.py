"""`predictor report` (issue 39): one self-contained HTML page (every image a PNG data URI, nothing fetched), its
sections and tables, the accuracy it states read from the validation reports, no clobbering; and, marked slow,
the page opened in headless Chromium: every image decoded and every table there."""
import base64
import os
import re
import subprocess
import tempfile
from pathlib import Path

import pytest

from calibrate.shipped import shipped_profile
from predictor import known_accuracy
from predictor.cli import main

V100 = str(shipped_profile("v100-abci-4gpu.published"))
REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
TABLES = ("scaling-table", "strategy-table", "time-terms", "memory-terms", "provenance", "accuracy-table")
ARGS = ["report", "--model", "small_cnn2d", "--profile", V100, "--batch-per-gpu", "16", "--gpus", "1-16"]


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("report") / "out"
    assert main(ARGS + ["--out", str(folder)]) == 0
    return folder / "report.html"


def test_the_page_is_self_contained(page):
    text = page.read_text(encoding="utf-8")
    assert not re.search(r'(src|href)="(?!data:)', text), "the page refers to a file or URL outside it"
    assert "<link" not in text and "@import" not in text and "url(" not in text
    images = re.findall(r'<img id="([\w-]+)"[^>]* src="data:image/png;base64,([A-Za-z0-9+/=]+)"', text)
    assert [name for name, _ in images] == ["scaling-plot", "breakdown-plot"]
    for _, data in images:
        assert base64.b64decode(data)[:8] == b"\x89PNG\r\n\x1a\n"
    for table in TABLES:
        assert f'<table id="{table}">' in text, table
    for section in ("answer", "scaling", "strategies", "breakdown", "profile", "accuracy"):
        assert f'<h2 id="{section}">' in text, section


def test_the_page_states_the_known_accuracy_with_its_date(page):
    text = page.read_text(encoding="utf-8")
    cnn = known_accuracy.load()["published_cnn"]
    assert f"generated {cnn['date']}" in text and cnn["source"] in text
    assert f"{cnn['overall']['analytical']:.1%}" in text and f"{cnn['by_system']['v100-abci-4gpu']['analytical']:.1%}" in text
    assert "Published profile" in text  # the page says the machine's figures are not measured ones


def test_no_clobber_and_bad_outputs(page, tmp_path, capsys):
    assert main(ARGS + ["--out", str(page.parent)]) == 2
    assert "--force" in capsys.readouterr().err
    assert main(ARGS + ["--out", str(tmp_path / "no" / "such")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(ARGS + ["--html", str(tmp_path / "report.pdf")]) == 2
    assert "--html" in capsys.readouterr().err
    single = tmp_path / "one.html"
    assert main(ARGS + ["--html", str(single), "--compare-at", "4"]) == 0
    assert "Every strategy on 4 devices (batch 64)" in single.read_text(encoding="utf-8")


def test_carried_accuracy_equals_the_reports():
    """predictor/data/known_accuracy.yaml holds what docs/published-*.md say (regenerate: python -m
    predictor.known_accuracy --write); the transformer report carries no date of its own (its commit's is used)."""
    if not (REPO / known_accuracy.CNN_DOC).is_file():
        pytest.skip("the docs folder is not here (an installed package)")
    carried, fresh = known_accuracy.load(), known_accuracy.from_docs(REPO)
    for key in ("published_cnn", "published_transformer"):
        a, b = dict(carried[key]), dict(fresh[key])
        if key == "published_transformer":
            a.pop("date"), b.pop("date")
        assert a == b, f"{key} differs from the report: run python -m predictor.known_accuracy --write"


def test_accuracy_for_each_kind_of_prediction():
    data = known_accuracy.load()
    cpu = known_accuracy.for_prediction("cnn", "mine.yaml", "calibrated", True, (1, 2), data)
    assert cpu["title"] == "measured CPU training runs" and cpu["rows"][0][1] == data["measured_cpu"]["figures"][0]["accuracy"]
    gpt = known_accuracy.for_prediction("transformer", "a100-dgx-8gpu.published.yaml", "published", False,
                                        (1, 8, 64), data)
    assert gpt["title"] == "published multi-GPU transformer runs"
    whats = [row[0] for row in gpt["rows"]]
    counts = data["published_transformer"]
    assert whats[0].startswith(f"all {counts['overall']['rows']} published transformer runs")
    assert f"runs on 1 GPU ({counts['by_gpus']['1']['rows']})" in whats
    assert any(w.startswith("runs on 9-64 GPUs") for w in whats) and any("a100-dgx-8gpu" in w for w in whats)
    gpu = known_accuracy.for_prediction("cnn", "h200.yaml", "calibrated", False, (1,), data)
    assert gpu["note"].startswith("No measured multi-GPU runs validate a calibrated GPU profile")
    assert [known_accuracy.bucket(d) for d in (1, 2, 8, 9, 64, 65, 512, 513)] == [
        "1", "2-8", "2-8", "9-64", "9-64", "65-512", "65-512", ">512"]


def _chromium(*args: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="chromium-") as home:
        return subprocess.run([str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                               f"--user-data-dir={home}", *args], capture_output=True, text=True, timeout=180,
                              env={**os.environ, "HOME": home})


@pytest.mark.slow
def test_the_page_renders_in_headless_chromium(page, tmp_path):
    if not CHROMIUM.is_file():
        pytest.skip("no /usr/bin/chromium: `apt-get install -y chromium chromium-driver` (scripts/test.sh does it "
                    "where it can)")
    dom = _chromium("--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    body = re.search(r"<body([^>]*)>", dom.stdout).group(1)
    attrs = dict(re.findall(r'data-([\w-]+)="([^"]*)"', body))
    assert attrs["images-total"] == "2" and attrs["images-ok"] == "2", attrs  # both PNGs decoded
    assert int(attrs["tables"]) == len(TABLES)
    sizes = re.findall(r'data-natural="(\d+)x(\d+)"', dom.stdout)
    assert len(sizes) == 2 and all(int(w) >= 400 and int(h) >= 300 for w, h in sizes)
    for table in TABLES:
        assert f'id="{table}"' in dom.stdout
    shot = tmp_path / "page.png"
    done = _chromium("--hide-scrollbars", "--window-size=1200,2400", f"--screenshot={shot}", page.as_uri())
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    from PIL import Image

    with Image.open(shot) as image:
        assert image.size == (1200, 2400)
        colours = image.convert("RGB").resize((120, 240)).getcolors(maxcolors=1 << 16)
    assert colours is not None and len(colours) > 50  # text, tables and plots: not a blank page


def test_a_language_models_strategy_table_holds_the_searched_3d_layout(tmp_path):
    """The page's "every strategy" table had no data+tensor+pipeline row (predict_all leaves it out) while its answer
    was a 3-D layout: the table now takes the searched layout at the compared count, as `predictor run --strategy
    all` does, so the table and the answer agree."""
    folder = tmp_path / "out"
    argv = ["report", "--model", "gpt", "--model-arg", "layers=8", "--model-arg", "hidden=2048", "--model-arg",
            "heads=16", "--model-arg", "seq=1024", "--profile", str(shipped_profile("h100-dgx-8gpu.published")),
            "--dtype", "bf16", "--optimizer", "adam", "--batch", "64", "--gpus", "8-16", "--out", str(folder)]
    assert main(argv) == 0
    text = (folder / "report.html").read_text(encoding="utf-8")
    table = text[text.index('<table id="strategy-table">'):]
    table = table[:table.index("</table>")]
    assert "data+tensor+pipeline" in table
