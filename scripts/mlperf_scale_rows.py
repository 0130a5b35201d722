"""Per-iteration times from MLPerf Training / HPC result logs (issue 38 item 4): the evidence behind the
corpus rows added above 64 GPUs. Reads result_*.txt of one submission from a local git mirror (git show
<commit>:<path>) and prints, per run, the epochs used and the median training rate, and over runs the median and
range, as the corpus records them. Nothing is fitted. An epoch's interval runs from epoch_start to the first of
throughput, eval_start, epoch_stop (v0.6 on; v0.5: train_epoch timestamps with no eval between), the first epoch
left out; its samples are its steps (MLLOG step_num) x the global batch where the log counts steps, preferred to a
logged rate, else train_samples. `--nested-evals`: logs that evaluate inside their epochs (nested_eval_run).
SOURCES.md (MLPerf, "How the rate was computed"). A repository with no mirror here is read from a hand
transcription of its logs' per-epoch values (mlperf_extracts/*.tsv, extract_submission): the same figures.
"""
from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys

IMAGENET = 1281167


def git_show(repo: str, commit: str, path: str) -> str:
    return subprocess.run(["git", "-C", repo, "show", f"{commit}:{path}"], check=True, capture_output=True,
                          text=True, errors="replace").stdout


def result_files(repo: str, commit: str, folder: str) -> list[str]:
    out = subprocess.run(["git", "-C", repo, "ls-tree", "--name-only", commit, folder.rstrip("/") + "/"],
                         check=True, capture_output=True, text=True).stdout.split()
    return sorted(p for p in out if re.search(r"result_\d+\.txt$", p))


def mllog_events(text: str) -> list[dict]:
    events = []
    for number, line in enumerate(text.splitlines(), 1):
        if ":::MLLOG" not in line:
            continue
        try:
            event = json.loads(line.split(":::MLLOG", 1)[1])
        except ValueError:
            continue
        event["_line"] = number
        events.append(event)
    return events


def point_values(events: list[dict]) -> dict:
    """Each POINT_IN_TIME key's value (the last one logged)."""
    return {e["key"]: e.get("value") for e in events if e["event_type"] == "POINT_IN_TIME"}


def nested_eval_run(text: str) -> dict:
    """A log that evaluates (and checkpoints) inside its epochs (MLPerf HPC v0.7 DeepCAM: every 100 steps of 59 an
    epoch): epoch k's training time is epoch_start -> epoch_stop minus every eval_start -> eval_stop and
    save_start -> save_stop inside it; its samples its steps (step_num) x the global batch. The first epoch and any
    epoch shorter than the usual (the last, stopped at the target) are left out."""
    events = mllog_events(text)
    keys = point_values(events)
    batch = keys["global_batch_size"]
    pauses = []
    for start_key, stop_key in (("eval_start", "eval_stop"), ("save_start", "save_stop")):
        opened = None
        for e in events:
            if e["key"] == start_key:
                opened = e["time_ms"]
            elif e["key"] == stop_key and opened is not None:
                pauses.append((opened, e["time_ms"]))
                opened = None
    starts = {e["metadata"]["epoch_num"]: e for e in events if e["key"] == "epoch_start"}
    stops = {e["metadata"]["epoch_num"]: e for e in events if e["key"] == "epoch_stop"}
    epochs = {}
    for k in sorted(set(starts) & set(stops))[1:]:
        t0, t1 = starts[k]["time_ms"], stops[k]["time_ms"]
        paused = sum(b - a for a, b in pauses if t0 <= a and b <= t1)
        steps = stops[k]["metadata"]["step_num"] - starts[k]["metadata"]["step_num"]
        epochs[k] = (steps, (t1 - t0 - paused) / 1000.0, paused / 1000.0, [starts[k]["_line"], stops[k]["_line"]])
    usual = statistics.mode(steps for steps, _, _, _ in epochs.values())
    used = {k: v for k, v in epochs.items() if v[0] == usual}
    first = min(used)
    return {"example": {"epoch": first, "lines": used[first][3], "steps": usual, "paused_s": used[first][2]},
            "global_batch": batch, "steps_per_epoch": [usual], "epochs_used": [first, max(used)],
            "n_epochs": len(used), "median_epoch_train_s": statistics.median(v[1] for v in used.values()),
            "throughput_from_timestamps": statistics.median(usual * batch / v[1] for v in used.values()),
            "throughput_logged": None}


def mllog_run(text: str) -> dict:
    events = mllog_events(text)
    keys = point_values(events)
    samples = keys.get("train_samples") or IMAGENET
    starts, ends, thr, lines, step0, step1 = {}, {}, {}, {}, {}, {}
    for e in events:
        md = e.get("metadata") or {}
        k = md.get("epoch_num")
        if e["key"] == "epoch_start" and k is not None:
            starts.setdefault(k, e["time_ms"])
            lines.setdefault(k, [e["_line"]])
            step0.setdefault(k, md.get("step_num"))
        elif e["key"] in ("throughput", "eval_start", "epoch_stop") and k is not None and k in starts:
            if k not in ends:
                ends[k] = e["time_ms"]
                lines[k].append(e["_line"])
            if e["key"] == "throughput":
                thr.setdefault(k, float(e["value"]))
            if e["key"] == "epoch_stop" and md.get("step_num") is not None:
                step1.setdefault(k, md["step_num"])
        elif e["key"] == "throughput" and k is None:  # ResNet logs: throughput right after epoch_stop, no epoch_num
            last = max(starts) if starts else None
            if last is not None:
                thr.setdefault(last, float(e["value"]))
    epochs = sorted(k for k in starts if k in ends)
    used = epochs[1:]
    if not used:
        return {"n_epochs": 0, "note": "no complete epoch after the first (aborted or truncated log): not used"}
    intervals = {k: (ends[k] - starts[k]) / 1000.0 for k in used}
    # samples an epoch ran: its steps (MLLOG step_num at epoch_stop minus at epoch_start) x the global batch where the
    # log counts steps (DeepCAM's loader drops each shard's remainder: 117 x 1024 = 119,808 of its 121,266), else
    # train_samples
    batch = keys.get("global_batch_size")
    steps = {k: step1[k] - step0[k] for k in used if step0.get(k) is not None and step1.get(k) is not None}
    counted = bool(batch) and len(steps) == len(used)
    per_epoch = {k: steps[k] * batch if counted else samples for k in used}
    from_ts = [per_epoch[k] / intervals[k] for k in used if intervals[k] > 0]
    logged = [thr[k] for k in used if k in thr]
    run_start = next((e["time_ms"] for e in events if e["key"] == "run_start"), None)
    run_stop = next((e["time_ms"] for e in events if e["key"] == "run_stop"), None)
    first = used[0]
    return {
        "example": {"epoch": first, "lines": lines[first], "time_ms": [starts[first], ends[first]],
                    "end_key": next(e["key"] for e in events if e["_line"] == lines[first][1])},
        "samples_per_epoch": samples, "global_batch": keys.get("global_batch_size"),
        "steps_per_epoch": sorted(set(steps.values())) if counted else None,
        "epochs_used": [used[0], used[-1]] if used else [], "n_epochs": len(used),
        "median_epoch_train_s": statistics.median(intervals.values()) if intervals else None,
        "throughput_from_timestamps": statistics.median(from_ts) if from_ts else None,
        "throughput_logged": statistics.median(logged) if logged else None,
        "run_s": (run_stop - run_start) / 1000.0 if run_start and run_stop else None,
        "nodes": keys.get("number_of_nodes"), "per_node": keys.get("accelerators_per_node"),
    }


V05 = re.compile(r":::MLPv0\.5\.0 \S+ (\d+\.\d+) \(.*?\) (train_epoch: (\d+)|eval_start|run_start|run_stop)")


def v05_run(text: str) -> dict:
    events = [(float(m.group(1)), m.group(2), m.group(3), n) for n, m in
              enumerate(map(V05.search, text.splitlines()), 1) if m]
    durations = []
    epochs = [(t, int(k), n) for t, what, k, n in events if k is not None]
    evals = [t for t, what, k, n in events if what == "eval_start"]
    example = None
    for (t0, k0, n0), (t1, k1, n1) in zip(epochs, epochs[1:]):
        if k1 != k0 + 1 or k0 == epochs[0][1]:  # first epoch left out
            continue
        if any(t0 < te < t1 for te in evals):
            continue
        durations.append((k0, t1 - t0))
        example = example or {"epoch": k0, "lines": [n0, n1], "timestamps_s": [t0, t1],
                              "end_key": f"train_epoch: {k1}"}
    rs = next((t for t, w, _, _ in events if w == "run_start"), None)
    rp = next((t for t, w, _, _ in events if w == "run_stop"), None)
    return {"example": example, "samples_per_epoch": IMAGENET, "n_epochs": len(durations),
            "epochs_used": [durations[0][0], durations[-1][0]] if durations else [],
            "median_epoch_train_s": statistics.median(d for _, d in durations),
            "throughput_from_timestamps": statistics.median(IMAGENET / d for _, d in durations),
            "throughput_logged": None, "run_s": rp - rs if rs and rp else None}


def submission(repo: str, commit: str, folder: str, nested_evals: bool = False) -> dict:
    runs = {}
    for path in result_files(repo, commit, folder):
        text = git_show(repo, commit, path)
        runs[path.rsplit("/", 1)[1]] = (v05_run(text) if ":::MLPv0.5.0" in text else
                                        nested_eval_run(text) if nested_evals else mllog_run(text))
    per_run = [r["throughput_from_timestamps"] if r.get("steps_per_epoch") else
               r["throughput_logged"] or r["throughput_from_timestamps"] for r in runs.values() if r["n_epochs"]]
    return {"runs": runs, "median": statistics.median(per_run), "range": [min(per_run), max(per_run)]}


def extract_submission(path: str) -> dict:
    """The same figures as submission(), from a hand transcription of the logs' per-epoch MLLOG values (mlperf_extracts/*.tsv:
    one `run` line per log, then `epoch_num epoch_start_ms epoch_stop_ms throughput` per epoch) for a repository that has no
    git mirror here. Epochs after the first are used, as mllog_run() does; the example gives the page of the stored file that
    holds them instead of line numbers (the file was read in pages, its lines were not counted)."""
    runs, cur = {}, None
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    for line in lines:
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if words[0] == "run":
            cur = {"name": words[1], **dict(zip(words[2::2], words[3::2])), "epochs": []}
            runs[cur["name"]] = cur
        else:
            cur["epochs"].append((int(words[0]), int(words[1]), int(words[2]), float(words[3])))
    out = {}
    for name, r in runs.items():
        assert [e[0] for e in r["epochs"]] == list(range(1, len(r["epochs"]) + 1)), (path, name)
        samples = int(r["train_samples"])
        used = r["epochs"][1:]
        intervals = [(stop - start) / 1000.0 for _, start, stop, _ in used]
        first = used[0]
        out[name] = {
            "example": {"epoch": first[0], "time_ms": [first[1], first[2]], "end_key": "epoch_stop",
                        "logged_throughput": first[3],
                        "located": f"the 16,000 characters from offset {int(r['epoch2_page_offset']):,} of the file "
                                   f"({int(r['total_chars']):,} characters), read through the stored file index; "
                                   f"line numbers not counted"},
            "samples_per_epoch": samples, "global_batch": int(r["global_batch_size"]),
            "epochs_used": [used[0][0], used[-1][0]], "n_epochs": len(used),
            "median_epoch_train_s": statistics.median(intervals),
            "throughput_from_timestamps": statistics.median(samples / i for i in intervals),
            "throughput_logged": statistics.median(e[3] for e in used),
            "run_s": (int(r["run_stop"]) - int(r["run_start"])) / 1000.0,
        }
    per_run = [r["throughput_logged"] for r in out.values()]
    return {"runs": out, "median": statistics.median(per_run), "range": [min(per_run), max(per_run)]}


def system_json(repo: str, commit: str, path: str) -> dict:
    return json.loads(git_show(repo, commit, path))


if __name__ == "__main__":
    if sys.argv[1] == "rows":  # the corpus records (YAML) of scripts/mlperf_scale_table.py's submissions
        from mlperf_scale_table import records
        import yaml
        class NoAliases(yaml.SafeDumper):  # the corpus reader refuses YAML aliases
            def ignore_aliases(self, data):
                return True
        print(yaml.dump(records(sys.argv[2] if len(sys.argv) > 2 else "/work/.mirror"), Dumper=NoAliases,
                        sort_keys=False, width=120, allow_unicode=True), end="")
    else:  # [--nested-evals] MIRROR COMMIT FOLDER: one submission's runs (nested_eval_run for logs that evaluate mid-epoch)
        nested = sys.argv[1] == "--nested-evals"
        repo, commit, folder = sys.argv[1 + nested:4 + nested]
        json.dump(submission(repo, commit, folder, nested), sys.stdout, indent=1)
        print()
