"""`predictor report`'s page: one self-contained HTML file (no script, stylesheet or image outside it: images are
base64 data URIs) that a planner can mail or attach to a ticket.

Sections: the answer (the sweep's findings), the scaling curves and table, the strategy table at one device
count, the winner's time and memory breakdown (stacked bars over the sweep and its terms at that count), the
profile's provenance (machine, how it was measured or which published sources it rests on), and the accuracy
known for this kind of prediction (predictor.known_accuracy, with dates). A few lines of inline script only
record, on the page itself, how many images decoded and how many tables it holds (body data attributes), so a
headless browser can check the page rendered; the page reads the same without it.
"""
from __future__ import annotations

import base64
import datetime as dt
import html
import math
from typing import Iterable, Optional, Sequence

from predictor.plan import Prediction
from predictor.report import interval_pct, time_text

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1100px;
       color: #1a1a1a; line-height: 1.4; padding: 0 1em; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; } h2 { font-size: 1.2em; margin-top: 1.8em;
     border-bottom: 1px solid #ccc; }
.meta { color: #555; font-size: 0.9em; } .answer li { margin: 0.2em 0; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.6em 0; }
th, td { border: 1px solid #ddd; padding: 3px 7px; text-align: right; white-space: nowrap; }
th { background: #f3f3f3; } td.l, th.l { text-align: left; } tr.win td { background: #eef7ee; }
td.w { white-space: normal; min-width: 16em; } .scroll { overflow-x: auto; }
img { max-width: 100%; border: 1px solid #eee; } .note { color: #555; font-size: 0.9em; }
.warn { color: #a00; font-weight: bold; }
"""
CHECK_SCRIPT = """
window.addEventListener('load', function () {
  var images = document.images, ok = 0;
  for (var i = 0; i < images.length; i++) {
    var img = images[i];
    if (img.complete && img.naturalWidth > 0) { ok++; img.setAttribute('data-natural', img.naturalWidth + 'x' + img.naturalHeight); }
  }
  document.body.setAttribute('data-images-total', images.length);
  document.body.setAttribute('data-images-ok', ok);
  document.body.setAttribute('data-tables', document.getElementsByTagName('table').length);
});
"""


def esc(value) -> str:
    return html.escape(str(value), quote=True)


def png_img(data: bytes, alt: str, element_id: str) -> str:
    """An <img> holding PNG bytes as a base64 data URI."""
    return (f'<img id="{esc(element_id)}" alt="{esc(alt)}" '
            f'src="data:image/png;base64,{base64.b64encode(data).decode("ascii")}">')


def table_html(header: Sequence[str], rows: Iterable[Sequence], left: Sequence[str] = (), element_id: str = "",
               highlight: Optional[int] = None, wrap: Sequence[str] = ()) -> str:
    """A plain table (scrolling sideways when wider than the page); columns named in `left` are left-aligned,
    those in `wrap` may wrap, row `highlight` (index) is marked."""
    classes = {i: " ".join(c for c, names in (("l", left), ("w", wrap)) if h in names) for i, h in enumerate(header)}
    attr = {i: f' class="{c}"' if c else "" for i, c in classes.items()}
    head = "".join(f"<th{attr[i]}>{esc(h)}</th>" for i, h in enumerate(header))
    body = []
    for k, row in enumerate(rows):
        cells = "".join(f"<td{attr.get(i, '')}>{esc(c)}</td>" for i, c in enumerate(row))
        body.append(f'<tr{" class=win" if k == highlight else ""}>{cells}</tr>')
    ident = f' id="{esc(element_id)}"' if element_id else ""
    return f"<div class=scroll><table{ident}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"


def strategy_rows(preds: Sequence[Prediction]) -> tuple[list[str], list[list[str]]]:
    """The ranked strategy table: every term `predictor run --wide` prints, as strings."""
    header = ["#", "strategy", "split", "iteration", "\u00b1", "compute f+b", "exposed comm", "hidden", "bubble",
              "update", "samples/s", "mem GB", "fits", "bottleneck"]
    rows = []
    for k, p in enumerate(preds, 1):
        if not p.feasible:
            rows.append([k, p.plan.strategy, p.plan.describe(), "infeasible", "", "", "", "", "", "", "", "", "",
                         p.reason.removeprefix("infeasible: ")[:70]])
            continue
        comm = ", ".join(f"{kind} {time_text(v)}" for kind, v in p.comm_exposed_s.items() if v > 0) or "-"
        rows.append([k, p.plan.strategy, p.plan.describe(), time_text(p.iteration_s), interval_pct(p),
                     time_text(p.compute_fwd_s + p.compute_bwd_s), comm, time_text(p.comm_hidden_total_s),
                     time_text(p.bubble_s) if p.bubble_s else "-", time_text(p.update_s),
                     f"{p.throughput_samples_per_s:,.0f}", f"{p.memory_bytes / 1e9:.2f}",
                     "yes" if p.fits else "OOM", p.bottleneck])
    return header, rows


def breakdown_rows(pred: Prediction) -> tuple[list[list[str]], list[list[str]]]:
    """(time terms, memory terms) of one prediction with their shares."""
    time_terms = [("forward", pred.compute_fwd_s), ("backward", pred.compute_bwd_s), ("update", pred.update_s),
                  ("bubble", pred.bubble_s), ("swap", pred.swap_s), ("recompute", pred.recompute_s),
                  ("input pipeline", pred.input_s)]
    time_terms += [(f"exposed {k}", v) for k, v in pred.comm_exposed_s.items()]
    time_terms += [(f"hidden {k} (overlapped, not in the total)", v) for k, v in pred.comm_hidden_s.items()]
    total = pred.iteration_s
    times = [[name, time_text(v), f"{v / total:.0%}" if "hidden" not in name and total > 0 else ""]
             for name, v in time_terms if v > 0]
    memory = [[name.replace("_", " "), f"{getattr(pred, f'{name}_bytes') / 1e9:.3f}",
               f"{getattr(pred, f'{name}_bytes') / pred.memory_bytes:.0%}" if pred.memory_bytes else ""]
              for name in ("weights", "grads", "optimizer", "activations", "comm_buffers", "workspace")
              if getattr(pred, f"{name}_bytes") > 0]
    memory.append(["total", f"{pred.memory_bytes / 1e9:.3f}", ""])
    if math.isfinite(pred.device_memory_bytes):
        memory.append(["device memory", f"{pred.device_memory_bytes / 1e9:.3f}",
                       f"{pred.memory_bytes / pred.device_memory_bytes:.0%} used"])
    return times, memory


def page(*, title: str, meta_lines: Sequence[str], findings: Sequence[str], scaling_png: bytes,
         scaling_header: Sequence[str], scaling_rows: Sequence[Sequence[str]], compare_devices: int,
         compare_batch: int, strategy_preds: Sequence[Prediction], breakdown_png: Optional[bytes],
         winner: Optional[Prediction], provenance: dict, accuracy: dict, warnings: Sequence[str] = ()) -> str:
    """The whole page as a string."""
    parts = [f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{esc(title)}</title>",
             f"<style>{STYLE}</style><script>{CHECK_SCRIPT}</script></head><body>",
             f"<h1>{esc(title)}</h1>", "".join(f'<div class=meta>{esc(line)}</div>' for line in meta_lines)]
    parts += [f'<p class=warn>{esc(w)}</p>' for w in warnings]
    parts.append('<h2 id="answer">The answer</h2><ul class=answer>'
                 + "".join(f"<li>{esc(line)}</li>" for line in findings) + "</ul>")
    parts.append('<h2 id="scaling">Scaling curves</h2>')
    parts.append(png_img(scaling_png, "throughput and scaling efficiency against devices", "scaling-plot"))
    parts.append('<p class=note>Top: samples/s (log scale) with the prediction interval as a band; crosses: plans '
                 'that do not fit in memory. Bottom: scaling efficiency, samples/s per device over the best at the '
                 'smallest count where a plan fits; the dashed line is the threshold, dotted verticals mark where '
                 'the fastest strategy changes.</p>')
    parts.append(table_html(scaling_header, scaling_rows, left=("line", "plan", "bottleneck"),
                            element_id="scaling-table"))
    header, rows = strategy_rows(strategy_preds)
    parts.append(f'<h2 id="strategies">Every strategy on {compare_devices} devices (batch {compare_batch})</h2>')
    parts.append(table_html(header, rows, left=("strategy", "split", "exposed comm", "bottleneck"),
                            element_id="strategy-table", highlight=0, wrap=("exposed comm",)))
    if winner is not None:
        parts.append(f'<h2 id="breakdown">Where the time and memory go: {esc(winner.plan.strategy)} '
                     f'({esc(winner.plan.describe())}) on {compare_devices} devices</h2>')
        if breakdown_png:
            parts.append(png_img(breakdown_png, "iteration time and memory per device by term, stacked",
                                 "breakdown-plot"))
            parts.append("<p class=note>The leading line's plan at every count: left, the share of the iteration "
                         "each term takes; right, what fills each device's memory, against its capacity.</p>")
        times, memory = breakdown_rows(winner)
        parts.append(f"<p class=note>On {compare_devices} devices: iteration {esc(time_text(winner.iteration_s))}"
                     f", {winner.memory_bytes / 1e9:.2f} GB per device.</p>")
        parts.append(table_html(["time term", "per iteration", "share"], times, left=("time term",),
                                element_id="time-terms"))
        parts.append(table_html(["memory term", "GB per device", "share"], memory, left=("memory term",),
                                element_id="memory-terms"))
    parts.append('<h2 id="profile">The profile</h2>')
    parts.append(table_html(["field", "value"], provenance["rows"], left=("field", "value"),
                            element_id="provenance", wrap=("value",)))
    if provenance.get("sources"):
        parts.append(f"<details class=note><summary>{len(provenance['sources'])} published sources the "
                     "coefficients cite, most cited first (the profile names each number's own)</summary><ul>"
                     + "".join(f"<li>{esc(s)}</li>" for s in provenance["sources"]) + "</ul></details>")
    parts.append(f'<h2 id="accuracy">Known accuracy: {esc(accuracy["title"])}</h2>')
    parts.append(f'<p class=note>From {esc(accuracy["source"])}, generated {esc(accuracy["date"])}. Accuracy = '
                 '1 - |predicted - measured| / measured time per iteration, averaged over runs.</p>')
    parts.append(table_html(["what", "accuracy", "detail"],
                            [[w, f"{a:.1%}", d] for w, a, d in accuracy["rows"]], left=("what", "detail"),
                            element_id="accuracy-table", wrap=("detail",)))
    if accuracy.get("note"):
        parts.append(f'<p class=note>{esc(accuracy["note"])}</p>')
    parts.append(f'<p class=meta>Written by paraoracle `predictor report` on '
                 f'{dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}.</p></body></html>')
    return "\n".join(parts)
