"""Cases on the command line: flags out of range or of the wrong type, outputs that must not be written
(existing files without --force, the input itself, a device, an over-long name), and valid controls."""
from __future__ import annotations

from . import materials as m
from .core import Case

RUN = ["predictor", "run", "--profile", "{d}/good.yaml", *m.RUN_TAIL]
SEARCH = ["predictor", "search", "--profile", "{d}/good.yaml", "--model", "small_cnn2d", "--batch", "8"]
CALIBRATE = ["profiler", "calibrate", "--device", "cpu", "--only", "compute", "--out", "{d}/new.yaml"]
VALIDATE = ["predictor", "validate", "--profile", "{d}/good.yaml", "--suite", "smoke", "--out", "{d}/runs.jsonl"]
TRAIN = ["predictor", "train-correction", "--profile", "{d}/good.yaml", "--runs", "{d}/runs.jsonl"]
#: a small mixture of experts on data+tensor+pipeline (issue 41 item 4)
MOE = ["predictor", "run", "--profile", "{d}/good.yaml", "--model", "gpt", "--model-arg", "layers=2", "--model-arg",
       "experts=4", "--batch", "8", "--gpus", "4", "--strategy", "data+tensor+pipeline", "--tensor-parallel", "1",
       "--pipeline-stages", "1"]
SCALE = ["predictor", "scale", "--profile", "{d}/good.yaml", *m.RUN_TAIL[:6]]  # the small model, no batch yet
REPORT = ["predictor", "report", "--profile", "{d}/good.yaml", *m.RUN_TAIL[:6], "--batch-per-gpu", "8", "--gpus", "1-4"]

LONG = "n" * 300  # a file or folder name longer than NAME_MAX (255)
DEEP = "/".join(["d" * 200] * 25)  # a path longer than PATH_MAX (4096)

BAD_FLAGS = [  # (label, argv, flag the error must name)
    ("threads-zero", CALIBRATE + ["--threads", "0"], "--threads"),
    ("threads-million", CALIBRATE + ["--threads", "1000000"], "--threads"),
    ("threads-text", CALIBRATE + ["--threads", "many"], "--threads"),
    ("ranks-zero", CALIBRATE + ["--ranks", "0"], "--ranks"),
    ("ranks-million", CALIBRATE + ["--ranks", "1000000"], "--ranks"),
    ("master-port-70000", CALIBRATE + ["--ranks", "2", "--master-port", "70000"], "--master-port"),
    ("master-port-zero", CALIBRATE + ["--ranks", "2", "--master-port", "0"], "--master-port"),
    ("max-message-1e15", CALIBRATE + ["--max-message-bytes", "1000000000000000"], "--max-message-bytes"),
    ("max-message-float", CALIBRATE + ["--max-message-bytes", "1e15"], "--max-message-bytes"),
    ("timeout-inf", CALIBRATE + ["--timeout-s", "inf"], "--timeout-s"),
    ("timeout-nan", CALIBRATE + ["--timeout-s", "nan"], "--timeout-s"),
    ("startup-timeout-negative", CALIBRATE + ["--startup-timeout-s", "-5"], "--startup-timeout-s"),
    ("only-unknown", CALIBRATE[:-4] + ["--only", "everything", "--out", "{d}/new.yaml"], "--only"),
    ("device-unknown", ["profiler", "calibrate", "--device", "tpu", "--out", "{d}/new.yaml"], "--device"),
    ("seed-negative", ["profiler", "fit", "{d}/good.yaml", "--out", "{d}/f.yaml", "--seed", "-1"], "--seed"),
    ("seed-2-70", ["profiler", "fit", "{d}/good.yaml", "--out", "{d}/f.yaml", "--seed", str(2 ** 70)], "--seed"),
    ("seed-huge-digits", ["profiler", "fit", "{d}/good.yaml", "--out", "{d}/f.yaml", "--seed", "9" * 5000], "--seed"),
    ("train-seed-negative", TRAIN + ["--seed", "-3"], "--seed"),
    ("batch-zero", RUN[:-4] + ["--batch", "0", "--gpus", "2"], "--batch"),
    ("batch-1e12", RUN[:-4] + ["--batch", "1e12", "--gpus", "2"], "--batch"),
    ("batch-2-40", RUN[:-4] + ["--batch", str(2 ** 40), "--gpus", "2"], "--batch"),
    ("gpus-1e9", RUN[:-4] + ["--batch", "8", "--gpus", "1000000000"], "--gpus"),
    ("gpus-negative", RUN[:-4] + ["--batch", "8", "--gpus", "-4"], "--gpus"),
    ("gpus-per-node-not-dividing", RUN[:-4] + ["--batch", "8", "--gpus", "8", "--gpus-per-node", "3", "--strategy", "data+spatial"],
     "--gpus-per-node"),
    ("gpus-per-node-zero", RUN + ["--gpus-per-node", "0"], "--gpus-per-node"),
    ("memory-cap-inf", RUN + ["--memory-cap", "inf"], "--memory-cap"),
    ("memory-cap-nan", RUN + ["--memory-cap", "nan"], "--memory-cap"),
    ("memory-cap-negative", RUN + ["--memory-cap", "-16"], "--memory-cap"),
    ("micro-batches-zero", RUN + ["--micro-batches", "0"], "--micro-batches"),
    ("micro-batches-above-batch", RUN + ["--micro-batches", "64", "--strategy", "pipeline"], "--micro-batches"),
    ("dataset-size-negative", RUN + ["--dataset-size", "-1"], "--dataset-size"),
    ("input-shape-garbage", ["predictor", "run", "--profile", "{d}/good.yaml", "--model", "predictor.zoo.small:small_cnn2d",
                             "--batch", "8", "--gpus", "2", "--input-shape", "3,x,32"], "--input-shape"),
    ("input-shape-zero", ["predictor", "run", "--profile", "{d}/good.yaml", "--model", "predictor.zoo.small:small_cnn2d",
                          "--batch", "8", "--gpus", "2", "--input-shape", "3,0,32"], "--input-shape"),
    ("input-shape-huge", ["predictor", "run", "--profile", "{d}/good.yaml", "--model", "predictor.zoo.small:small_cnn2d",
                          "--batch", "8", "--gpus", "2", "--input-shape", f"3,{10 ** 9},32"], "--input-shape"),
    ("model-arg-huge", RUN + ["--model-arg", "width=1000000000"], "width"),
    ("model-arg-nan", RUN + ["--model-arg", "width=NaN"], "width"),
    ("model-arg-no-equals", RUN + ["--model-arg", "width"], "--model-arg"),
    ("model-arg-unknown", RUN + ["--model-arg", "colour=3"], "colour"),
    ("strategy-unknown", RUN + ["--strategy", "diagonal"], "--strategy"),
    ("dtype-unknown", RUN + ["--dtype", "fp8"], "--dtype"),
    ("max-gpus-1e7", SEARCH + ["--max-gpus", "10000000"], "--max-gpus"),
    ("max-gpus-zero", SEARCH + ["--max-gpus", "0"], "--max-gpus"),
    ("top-zero", SEARCH + ["--max-gpus", "4", "--top", "0"], "--top"),
    ("validate-threads-zero", VALIDATE + ["--threads", "0"], "--threads"),
    ("validate-threads-million", VALIDATE + ["--threads", "1000000"], "--threads"),
    ("validate-iterations-zero", VALIDATE + ["--iterations", "0"], "--iterations"),
    ("validate-warmup-negative", VALIDATE + ["--warmup", "-1"], "--warmup"),
    ("validate-plot-jpg", VALIDATE + ["--plot", "{d}/scatter.jpg"], "--plot"),
    ("history-plot-jpg", ["profiler", "history", "{d}/good.yaml", "{d}/good.yaml", "--plot", "{d}/h.jpg"], "--plot"),
    ("history-min-effect-nan", ["profiler", "history", "{d}/good.yaml", "{d}/good.yaml", "--min-effect", "nan"], "--min-effect"),
    ("drift-alpha-2", ["profiler", "drift", "{d}/good.yaml", "{d}/good.yaml", "--alpha", "2"], "--alpha"),
    ("drift-min-effect-inf", ["profiler", "drift", "{d}/good.yaml", "{d}/good.yaml", "--min-effect", "inf"], "--min-effect"),
    ("nccl-op-unknown", ["profiler", "import-nccl-tests", "{d}/ar.txt", "--out", "{d}/i.yaml", "--op", "allsum"], "--op"),
    ("unknown-flag", RUN + ["--turbo"], "--turbo"),
    ("unknown-command", ["predictor", "explode"], "explode"),
    ("shapes-without-batch", ["predictor", "shapes", "--model", "small_cnn2d", "--out", "{d}/s.yaml"], "--batch"),
    ("out-folder-missing", ["profiler", "fit", "{d}/good.yaml", "--out", "{d}/no/such/folder/f.yaml"], "--out"),
    ("out-is-a-folder", ["profiler", "fit", "{d}/good.yaml", "--out", "{d}"], "--out"),
    ("out-name-too-long", ["profiler", "fit", "{d}/good.yaml", "--out", "{d}/" + "n" * 300 + ".yaml"], "--out"),
    ("out-is-dev-null", ["profiler", "fit", "{d}/good.yaml", "--out", "/dev/null", "--force"], "--out"),
    ("trace-folder-missing", RUN + ["--trace", "{d}/nowhere/t.json"], "--trace"),
    ("calibrate-out-missing-folder", ["profiler", "calibrate", "--device", "cpu", "--out", "{d}/no/p.yaml"], "--out"),
    # names longer than the file system allows (ENAMETOOLONG from a stat before the output was checked)
    ("out-folder-name-too-long", ["profiler", "fit", "{d}/good.yaml", "--out", f"{{d}}/{LONG}/f.yaml"], "--out"),
    ("out-path-too-long", ["profiler", "fit", "{d}/good.yaml", "--out", f"{{d}}/{DEEP}/f.yaml"], "--out"),
    ("trace-folder-name-too-long", RUN + ["--trace", f"{{d}}/{LONG}/t.json"], "--trace"),
    ("train-out-folder-name-too-long", TRAIN + ["--out", f"{{d}}/{LONG}/c.json"], "--out"),
    ("validate-out-folder-name-too-long", VALIDATE[:-1] + [f"{{d}}/{LONG}/r.jsonl"], "--out"),
    ("calibrate-out-name-too-long", CALIBRATE[:-1] + [f"{{d}}/{LONG}.yaml"], "--out"),
    ("calibrate-out-folder-name-too-long", CALIBRATE[:-1] + [f"{{d}}/{LONG}/p.yaml"], "--out"),
    ("nccl-out-name-too-long", ["profiler", "import-nccl-tests", "{d}/ar.txt", "--out", f"{{d}}/{LONG}.yaml"], "--out"),
    ("deepbench-out-name-too-long", ["profiler", "import-deepbench", "{d}/ar.txt", "--out", f"{{d}}/{LONG}.yaml"], "--out"),
    ("nccl-into-shipped", ["profiler", "import-nccl-tests", "{d}/ar.txt", "--into", "v100-dgx1-8gpu.published"], "--into"),
    ("fit-shipped-in-place", ["profiler", "fit", "v100-dgx1-8gpu.published"], "PROFILE"),
    ("model-error-write-shipped", ["predictor", "model-error", "--profile", "v100-dgx1-8gpu.published", "{d}/runs.jsonl",
                                   "--write"], "--profile"),
    ("train-attach-shipped", ["predictor", "train-correction", "--profile", "v100-dgx1-8gpu.published",
                              "{d}/runs.jsonl"], "--profile"),
    ("train-two-runs-files", TRAIN + ["{d}/runs.jsonl"], "RUNS"),
    ("show-profile-twice", ["profiler", "show", "{d}/good.yaml", "--profile", "{d}/good.yaml"], "PROFILE"),
    ("profile-unknown-shipped-name", ["predictor", "run", "--profile", "v100-nowhere", *m.RUN_TAIL], "--profile"),
    ("shapes-out-folder-name-too-long", ["predictor", "shapes", "--model", "small_cnn2d", "--batch", "8", "--gpus", "2",
                                         "--out", f"{{d}}/{LONG}/s.yaml"], "--out"),
    ("profile-name-too-long", ["predictor", "run", "--profile", f"{{d}}/{LONG}.yaml", *m.RUN_TAIL], "--profile"),
    ("suite-folder-name-too-long", ["predictor", "shapes", "--suite", f"{{d}}/{LONG}/s.yaml", "--out", "{d}/s.yaml"], "suite"),
    ("history-name-too-long", ["profiler", "history", f"{{d}}/{LONG}.yaml", "{d}/good.yaml"], LONG[:40]),
    ("scale-gpus-zero", SCALE + ["--batch-per-gpu", "8", "--gpus", "0"], "--gpus"),
    ("scale-gpus-backwards", SCALE + ["--batch-per-gpu", "8", "--gpus", "8-4"], "--gpus"),
    ("scale-gpus-too-many", SCALE + ["--batch-per-gpu", "8", "--gpus", ",".join(map(str, range(1, 101)))], "--gpus"),
    ("scale-gpus-text", SCALE + ["--batch-per-gpu", "8", "--gpus", "lots"], "--gpus"),
    ("scale-gpus-huge", SCALE + ["--batch-per-gpu", "8", "--gpus", "1-" + "9" * 40], "--gpus"),
    ("scale-batch-and-per-gpu", SCALE + ["--batch-per-gpu", "8", "--batch", "8"], "--batch"),
    ("scale-batch-per-gpu-zero", SCALE + ["--batch-per-gpu", "0"], "--batch-per-gpu"),
    ("scale-global-batch-too-large", SCALE + ["--batch-per-gpu", "100000", "--gpus", "1-1024"], "--batch-per-gpu"),
    ("scale-threshold-nan", SCALE + ["--batch", "8", "--efficiency-threshold", "nan"], "--efficiency-threshold"),
    ("scale-cost-without-dataset", SCALE + ["--batch", "8", "--gpu-hour-cost", "3"], "--gpu-hour-cost"),
    ("scale-strategy-unknown", SCALE + ["--batch", "8", "--strategy", "diagonal"], "--strategy"),
    ("scale-plot-jpg", SCALE + ["--batch", "8", "--plot", "{d}/s.jpg"], "--plot"),
    ("report-html-pdf", REPORT + ["--html", "{d}/r.pdf"], "--html"),
    ("report-out-missing-parent", REPORT + ["--out", "{d}/no/such/dir"], "--out"),
    ("report-compare-at-zero", REPORT + ["--out", "{d}/r", "--compare-at", "0"], "--compare-at"),
    ("search-memory-format-unknown", SEARCH + ["--max-gpus", "4", "--memory-format", "chwn"], "--memory-format"),
    ("run-bn-group-zero", RUN + ["--bn-group", "0"], "--bn-group"),
    ("run-bn-group-text", RUN + ["--bn-group", "pairs"], "--bn-group"),
    ("run-cuda-graphs-value", RUN + ["--cuda-graphs", "yes"], "yes"),
    ("search-cross-entropy-unknown", SEARCH + ["--max-gpus", "4", "--cross-entropy", "fp8"], "--cross-entropy"),
    ("scale-bn-group-zero", SCALE + ["--batch", "8", "--bn-group", "0"], "--bn-group"),
    ("scale-memory-format-unknown", SCALE + ["--batch", "8", "--memory-format", "NCHW"], "--memory-format"),
    # issue 38: the at-scale flags (stragglers, other jobs on the fabric, shared storage)
    ("cudnn-benchmark-word", RUN + ["--cudnn-benchmark", "maybe"], "--cudnn-benchmark"),
    ("cluster-load-word", RUN + ["--cluster-load", "loud"], "--cluster-load"),
    ("cluster-load-negative", RUN + ["--cluster-load", "-5"], "--cluster-load"),
    ("cluster-load-above-100", RUN + ["--cluster-load", "150"], "--cluster-load"),
    ("cluster-load-nan", RUN + ["--cluster-load", "nan"], "--cluster-load"),
    ("nccl-algo-unknown", RUN + ["--nccl-algo", "collnet"], "--nccl-algo"),
    ("scale-nccl-algo-case", SCALE + ["--batch", "8", "--nccl-algo", "Ring"], "--nccl-algo"),
    ("scale-cluster-load-inf", SCALE + ["--batch", "8", "--cluster-load", "inf"], "--cluster-load"),
    ("search-cluster-load-percent-text", SEARCH + ["--max-gpus", "4", "--cluster-load", "50%%"], "--cluster-load"),
    ("sample-bytes-zero", RUN + ["--sample-bytes", "0"], "--sample-bytes"),
    ("sample-bytes-inf", RUN + ["--sample-bytes", "inf"], "--sample-bytes"),
    ("sample-bytes-huge", RUN + ["--sample-bytes", "1e30"], "--sample-bytes"),
    ("files-per-sample-negative", RUN + ["--files-per-sample", "-1"], "--files-per-sample"),
    ("files-per-sample-nan", RUN + ["--files-per-sample", "nan"], "--files-per-sample"),
    ("dataset-unknown", RUN + ["--dataset", "mnist"], "--dataset"),
    ("decode-unknown", RUN + ["--decode", "pillow"], "--decode"),
    ("decode-zero", RUN + ["--decode", "0"], "--decode"),
    ("decode-nan", RUN + ["--decode", "nan"], "--decode"),
    ("storage-without-path", ["profiler", "calibrate", "--device", "cpu", "--only", "storage", "--out", "{d}/s.yaml"],
     "--path"),
    ("storage-path-missing", ["profiler", "calibrate", "--device", "cpu", "--only", "storage", "--path", "{d}/nowhere",
                              "--out", "{d}/s.yaml"], "--path"),
    ("storage-path-is-a-file", ["profiler", "calibrate", "--device", "cpu", "--only", "storage", "--path",
                                "{d}/good.yaml", "--out", "{d}/s.yaml"], "--path"),
    ("storage-path-cannot-write", ["profiler", "calibrate", "--device", "cpu", "--only", "storage", "--path", "/proc",
                                   "--out", "{d}/s.yaml"], "--path"),
    ("storage-path-name-too-long", ["profiler", "calibrate", "--device", "cpu", "--only", "storage", "--path",
                                    f"{{d}}/{LONG}", "--out", "{d}/s.yaml"], "--path"),
    ("path-without-storage", CALIBRATE[:-2] + ["--path", "{d}", "--out", "{d}/new.yaml"], "--path"),
    ("readers-zero", ["profiler", "calibrate", "--device", "cpu", "--only", "storage", "--path", "{d}", "--readers", "0",
                      "--out", "{d}/s.yaml"], "--readers"),
    ("readers-million", ["profiler", "calibrate", "--device", "cpu", "--only", "storage", "--path", "{d}", "--readers",
                         "1000000", "--out", "{d}/s.yaml"], "--readers"),
    ("readers-text", ["profiler", "calibrate", "--device", "cpu", "--only", "storage", "--path", "{d}", "--readers",
                      "many", "--out", "{d}/s.yaml"], "--readers"),
    ("repeat-over-zero", ["profiler", "calibrate", "--device", "cpu", "--only", "collectives", "--ranks", "2",
                          "--repeat-over", "0", "--out", "{d}/c.yaml"], "--repeat-over"),
    ("repeat-over-nan", ["profiler", "calibrate", "--device", "cpu", "--only", "collectives", "--ranks", "2",
                         "--repeat-over", "nan", "--out", "{d}/c.yaml"], "--repeat-over"),
    ("repeat-over-a-year", ["profiler", "calibrate", "--device", "cpu", "--only", "collectives", "--ranks", "2",
                            "--repeat-over", "525600", "--out", "{d}/c.yaml"], "--repeat-over"),
    ("repeat-over-without-collectives", CALIBRATE + ["--repeat-over", "5"], "--repeat-over"),
    # issue 41 item 4: mixture of experts and context parallelism
    ("context-parallel-zero", RUN + ["--context-parallel", "0"], "--context-parallel"),
    ("context-parallel-text", RUN + ["--context-parallel", "two"], "--context-parallel"),
    ("expert-parallel-1e9", RUN + ["--expert-parallel", "1000000000"], "--expert-parallel"),
    ("expert-parallel-with-data", RUN + ["--expert-parallel", "2", "--strategy", "data"], "--expert-parallel"),
    ("context-parallel-with-all", RUN + ["--context-parallel", "2"], "--context-parallel"),
    ("search-expert-parallel-negative", SEARCH + ["--max-gpus", "4", "--expert-parallel", "-2"], "--expert-parallel"),
    ("expert-parallel-dense-model", MOE[:8] + MOE[10:] + ["--expert-parallel", "2"], "--expert-parallel"),
    ("expert-parallel-not-dividing", MOE + ["--expert-parallel", "3"], "--expert-parallel"),
    ("expert-tensor-parallel-zero", MOE + ["--expert-parallel", "2", "--expert-tensor-parallel", "0"],
     "--expert-tensor-parallel"),
    ("expert-tensor-parallel-text", MOE + ["--expert-parallel", "2", "--expert-tensor-parallel", "one"],
     "--expert-tensor-parallel"),
    ("expert-tensor-parallel-without-experts", MOE + ["--expert-tensor-parallel", "1"], "--expert-tensor-parallel"),
    ("search-expert-tensor-parallel-negative", SEARCH + ["--max-gpus", "4", "--expert-tensor-parallel", "-1"],
     "--expert-tensor-parallel"),
    ("recompute-modules-unknown", MOE + ["--recompute", "--recompute-granularity", "selective", "--recompute-modules",
                                         "mlp"], "--recompute-modules"),
    ("recompute-modules-twice", MOE + ["--recompute", "--recompute-granularity", "selective", "--recompute-modules",
                                       "layernorm,layernorm"], "--recompute-modules"),
    ("recompute-modules-empty", MOE + ["--recompute", "--recompute-granularity", "selective", "--recompute-modules",
                                       ","], "--recompute-modules"),
    ("recompute-modules-without-selective", MOE + ["--recompute-modules", "moe_act"], "--recompute-modules"),
    ("moe-a2a-overlap-without-experts", MOE + ["--moe-a2a-overlap"], "--moe-a2a-overlap"),
    ("moe-a2a-overlap-full-recompute", MOE + ["--expert-parallel", "2", "--dtype", "bf16", "--recompute",
                                               "--moe-a2a-overlap"], "--moe-a2a-overlap"),
    ("moe-a2a-overlap-fp32", MOE + ["--expert-parallel", "2", "--moe-a2a-overlap"], "--moe-a2a-overlap"),
    ("moe-a2a-overlap-value", MOE + ["--expert-parallel", "2", "--moe-a2a-overlap=yes"], "--moe-a2a-overlap"),
    ("context-parallel-cnn", RUN + ["--strategy", "data+tensor+pipeline", "--context-parallel", "2"],
     "--context-parallel"),
    ("experts-one", MOE[:8] + ["--model-arg", "experts=1"] + MOE[10:], "experts"),
    ("top-k-above-experts", MOE + ["--model-arg", "top_k=5"], "top_k"),
    ("capacity-factor-negative", MOE + ["--model-arg", "capacity_factor=-1"], "capacity_factor"),
]

CLOBBER = [  # (label, argv, existing output that must survive)
    ("fit-out", ["profiler", "fit", "{d}/good.yaml", "--out", "{d}/keep.yaml"], "keep.yaml"),
    ("history-plot", ["profiler", "history", "{d}/good.yaml", "{d}/good.yaml", "--plot", "{d}/keep.png"], "keep.png"),
    ("run-trace", RUN + ["--trace", "{d}/keep.json"], "keep.json"),
    ("shapes-out", ["predictor", "shapes", "--model", "small_cnn2d", "--batch", "8", "--gpus", "2", "--out", "{d}/keep.yaml"],
     "keep.yaml"),
    ("shapes-suite-out", ["predictor", "shapes", "--suite", "smoke", "--out", "{d}/keep.yaml"], "keep.yaml"),
    ("train-out", TRAIN + ["--out", "{d}/keep.json"], "keep.json"),
    ("train-out-is-profile", TRAIN + ["--out", "{d}/good.yaml", "--force"], "good.yaml"),
    ("train-out-is-runs", TRAIN + ["--out", "{d}/runs.jsonl", "--force"], "runs.jsonl"),
    ("validate-out-not-jsonl", VALIDATE[:-1] + ["{d}/keep.jsonl"], "keep.jsonl"),
    ("validate-out-is-profile", VALIDATE[:-1] + ["{d}/good.yaml"], "good.yaml"),
    ("validate-plot", VALIDATE + ["--plot", "{d}/keep.png"], "keep.png"),
    ("calibrate-out", ["profiler", "calibrate", "--device", "cpu", "--only", "compute", "--out", "{d}/keep.yaml"], "keep.yaml"),
    ("nccl-out", ["profiler", "import-nccl-tests", "{d}/ar.txt", "--out", "{d}/keep.yaml"], "keep.yaml"),
    ("scale-plot", SCALE + ["--batch", "8", "--gpus", "1-2", "--plot", "{d}/keep.png"], "keep.png"),
    ("report-html", REPORT + ["--html", "{d}/keep.html"], "keep.html"),
    ("search-family-unknown", SEARCH + ["--max-gpus", "4", "--family", "fsdp"], "--family"),
    ("validate-published-profile-missing", ["predictor", "validate", "--published", "vtrain-single", "--profile",
                                            "{d}/none.yaml"], "--profile"),
]

CONTROLS = [  # valid commands: exit 0 and nothing written
    ("show", ["profiler", "show", "{d}/good.yaml"]),
    ("show-shipped-name-as-flag", ["profiler", "show", "--profile", "v100-dgx1-8gpu.published"]),
    ("run", RUN),
    ("run-spec", ["predictor", "run", "--profile", "{d}/good.yaml", "--model", "{d}/spec.yaml", "--batch", "8", "--gpus", "2"]),
    ("drift-same", ["profiler", "drift", "{d}/samples.yaml", "{d}/samples.yaml", "--no-predict"]),
    ("run-json-data", RUN + ["--strategy", "data", "--json"]),
    ("scale", SCALE + ["--batch-per-gpu", "8", "--gpus", "1-4"]),
    ("scale-nchw", SCALE + ["--batch-per-gpu", "8", "--gpus", "1-4", "--memory-format", "nchw", "--dtype", "fp16"]),
    ("search-nchw", SEARCH + ["--max-gpus", "4", "--memory-format", "nchw", "--top", "2"]),
    ("run-cluster-load-busy", RUN + ["--cluster-load", "busy", "--wide"]),
    ("run-cluster-load-percentile", RUN + ["--cluster-load", "80%"]),
    ("run-staged-shards", RUN + ["--staging", "--sample-bytes", "500000", "--files-per-sample", "0.001",
                                 "--dataset-size", "1000000"]),
    ("run-decode-opencv", RUN + ["--decode", "opencv"]),
    ("run-decode-ms", RUN + ["--decode", "2.5"]),
    ("run-moe-expert-context", MOE + ["--expert-parallel", "2", "--context-parallel", "2", "--wide"]),
    ("run-moe-recompute-modules", MOE + ["--recompute", "--recompute-granularity", "selective",
                                         "--recompute-modules", "layernorm,moe_act", "--wide"]),
    ("run-moe-expert-tensor-folded", MOE[:-4] + ["--tensor-parallel", "2", "--pipeline-stages", "1",
                                                 "--sequence-parallel", "--expert-parallel", "2",
                                                 "--expert-tensor-parallel", "1", "--wide"]),
    ("search-cuda-graphs", SEARCH + ["--max-gpus", "4", "--cuda-graphs", "--top", "2"]),
    ("validate-vtrain-single-json", ["predictor", "validate", "--published", "vtrain-single", "--json"]),
    ("validate-published-own-profile", ["predictor", "validate", "--published", "vtrain-single", "--profile",
                                        "{d}/good.yaml", "--json"]),
]


def _files() -> dict:
    return {"good.yaml": m.text(m.V100), "runs.jsonl": "\n".join(m.runs_lines()) + "\n",
            "ar.txt": m.text(m.NCCL / "all_reduce_perf_8gpu.txt"), "spec.yaml": m.dump(m.SPEC),
            "samples.yaml": m.text(m.CPU_SAMPLES)}


#: Python models named on the command line that end the process instead of building a model (file -> source)
EXITING_MODELS = {
    "exit-0-at-import": "import sys\nsys.exit(0)\n",
    "exit-1-at-import": "import sys\nsys.exit(1)\n",
    "raise-systemexit-at-import": "raise SystemExit('bye')\n",
    "exit-in-builder": "import sys\ndef model():\n    sys.exit(0)\n",
    "exit-in-forward": ("import sys\nimport torch.nn as nn\nclass M(nn.Module):\n    input_shape = (4,)\n"
                        "    def forward(self, x):\n        sys.exit(0)\nmodel = M\n"),
}


def flag_cases() -> list[Case]:
    cases = [Case(f"flag/{label}", argv, _files(), flag) for label, argv, flag in BAD_FLAGS]
    for label, source in EXITING_MODELS.items():
        argv = ["predictor", "run", "--profile", "{d}/good.yaml", "--model", "{d}/m.py", "--batch", "8", "--gpus", "2"]
        cases.append(Case(f"flag/model-file-{label}", argv, {**_files(), "m.py": source}, "m.py"))
    return cases


def clobber_cases() -> list[Case]:
    out = []
    for label, argv, keep in CLOBBER:
        files = _files()
        files.setdefault(keep, "precious: true\n")
        out.append(Case(f"clobber/{label}", argv, files, keep))
    return out


def control_cases() -> list[Case]:
    return [Case(f"control/{label}", argv, _files(), "", expect_exit=0) for label, argv in CONTROLS]
