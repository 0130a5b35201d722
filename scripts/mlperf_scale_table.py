"""The MLPerf Training / HPC submissions above 64 GPUs added to the CNN corpus for issue 38 item 4, and how each
becomes a corpus record (predictor/data/groundtruth/cnn_runs.yaml schema, plus an `evidence` block).

`python scripts/mlperf_scale_rows.py rows [MIRRORS]` prints the records; MIRRORS holds git mirrors named
<owner>+<repo>/repo (mlcommons/training_results_v0.5, v1.1, v2.1, hpc_results_v0.7, v1.0, v2.0, v3.0). A submission with
`extract` (training_results_v4.0, of which no mirror was available) is read from a hand transcription of its logs' per-epoch
MLLOG values (scripts/mlperf_extracts/, made with the stored file index's read_file) and its system JSON values as read there
(`system_values`).
Every number comes from the logs and system descriptions at the commits below; the text fields (framework,
precision, notes) state where each setting was read.
"""
from __future__ import annotations

import os

from mlperf_scale_rows import extract_submission, submission, system_json

COMMITS = {
    "mlcommons/training_results_v0.5": "c71f2e7c4b11ec7ab89eb4d8ceaadaae8529fff7",
    "mlcommons/training_results_v1.1": "ebe92f81f7a69255a3b0a907595d8be623d75ec6",
    "mlcommons/training_results_v2.1": "158189d4cbfbee366c10da1f0f086c85d8f15b5f",
    "mlcommons/training_results_v4.0": "62f111b7690f163b269f32e4f93dcaaa13717c9c",
    "mlcommons/hpc_results_v0.7": "3edadefe722000a5613076f0ba429365850b44cd",
    "mlcommons/hpc_results_v1.0": "2ba081f43a28d8e19dc572da72b2f14862599c1f",
    "mlcommons/hpc_results_v2.0": "ad77f6ceae98bf1236a4a0bb79257c2b739197b9",
    "mlcommons/hpc_results_v3.0": "dfea490b1e7b6545eb5c8b7a4ff9b05021cba098",
}

RESNET_FRAMEWORK = "MXNet (MLPerf Training closed-division implementation; Horovod/NCCL allreduce, DALI input pipeline)"
RESNET_MODEL = {"image_size": 224, "note": "MLPerf reference ResNet-50 v1.5"}
RESNET_DATA = "real ImageNet via DALI (decoded-image cache options in configs); per-epoch training interval excludes eval"
COSMO_MODEL = {"image_size": 128, "note": "MLPerf HPC CosmoFlow: 4 x 128^3 input, 5 conv3d(k=3)+max-pool blocks of "
                                          "32..512 filters, dense 128-64-4 (submission configs)"}
NVIDIA_COSMO_DATA = ("real CosmoFlow data (524,288 training samples), staged before run_start into node-local memory/"
                     "disk, read through DALI; the epoch's training interval (epoch_start -> throughput) excludes eval and "
                     "staging")


#: the submissions' system JSON says host_networking 'N/A'; the fabric as the v100-abci-4gpu profile states it, with its source
ABCI_FABRIC = ("not stated in the system JSON (host_networking 'N/A'); ABCI compute node (V): 2x InfiniBand EDR, 34 nodes "
               "per rack on full-bisection leaves, 1:3 over-subscription to the spine, as calibrate/profiles/"
               "v100-abci-4gpu.published.yaml states it (source there: news.mynavi.jp ABCI article, third-party)")


def _resnet(**kw):
    return dict(kind="resnet", model="resnet50_v1.5", model_details=RESNET_MODEL, framework=RESNET_FRAMEWORK,
                data=RESNET_DATA, **kw)


def _cosmo(**kw):
    return dict(kind="cosmoflow", model="cosmoflow", model_details=COSMO_MODEL, **kw)


SUBMISSIONS = [
    _resnet(id="mlperf-v0_5-nvidia-dgx1_multi_ngc18_11_mxnet", repo="mlcommons/training_results_v0.5",
            results="v0.5.0/nvidia/submission/results/dgx1_multi_ngc18.11_mxnet/resnet",
            system_file="v0.5.0/nvidia/submission/results/dgx1_multi_ngc18.11_mxnet/entry.json",
            config="v0.5.0/nvidia/submission/code/image_classification/mxnet/config_DGX1_multi.sh",
            name="DGX-1V SaturnV, 80 nodes (NVIDIA)", gpu="Tesla V100-SXM2-16GB", gpu_memory="16 GB", per_node=8,
            nodes=80, batch=26, intra="NVLink (DGX-1 hybrid cube mesh)",
            inter="4x InfiniBand EDR 100Gb/s per node (entry.json: interconnect 'InfiniBand EDR 100Gb/s', network_card "
                  "ConnectX-4, num_network_cards '4 + 2' with 2x 10GbE)",
            framework_version="MXNet NGC 18.11",
            precision="fp16 (--dtype float16 in run_and_time.sh)",
            optimizer="sgd momentum 0.9 (log: opt_name sgd, opt_momentum 0.9)",
            batch_source="config_DGX1_multi.sh: BATCHSIZE=26, DGXNNODES=80, DGXNGPU=8 (log: input_batch_size 26; 80 "
                         "run_clear_caches lines, one per node)",
            notes="MLPerf v0.5 (Nov 2018). entry.json lists the 128-node SaturnV DGX-1 cluster; the run used 80 nodes "
                  "(config). Gradient reduction: the container's Horovod waits for all 161 gradient tensors "
                  "(Dockerfile: HOROVOD_FIXED_PAYLOAD=161, HOROVOD_TWO_STAGE_LOOP=1; 161 = ResNet-50's parameter tensors: 53 "
                  "convolutions, 53 x 2 batch-norm, 2 fc), so one reduction after backward. "
                  "Heavily tuned benchmark code, small per-GPU batch."),
    _resnet(id="mlperf-v0_5-nvidia-dgx2h_multi_ngc18_11_mxnet", repo="mlcommons/training_results_v0.5",
            results="v0.5.0/nvidia/submission/results/dgx2h_multi_ngc18.11_mxnet/resnet",
            system_file="v0.5.0/nvidia/submission/results/dgx2h_multi_ngc18.11_mxnet/entry.json",
            config="v0.5.0/nvidia/submission/code/image_classification/mxnet/config_DGX2_multi.sh",
            name="DGX-2H pod, 32 nodes (NVIDIA)", gpu="Tesla V100-SXM3-H-32GB", gpu_memory="32 GB", per_node=16,
            nodes=32, batch=32, intra="NVLink + NVSwitch (DGX-2H)",
            inter="InfiniBand EDR 100Gb/s (entry.json: network_card ConnectX-5, num_network_cards 10; Mellanox CS7510 "
                  "director switch)",
            framework_version="MXNet NGC 18.11",
            precision="fp16 (--dtype float16 in run_and_time.sh)",
            optimizer="sgd momentum 0.9 (log: opt_name sgd, opt_momentum 0.9)",
            batch_source="config_DGX2_multi.sh: BATCHSIZE=32, DGXNNODES=32, DGXNGPU=16 (log: input_batch_size 32; 32 "
                         "run_clear_caches lines)",
            notes="MLPerf v0.5 (Nov 2018). entry.json lists 36 DGX-2H; the run used 32 (config). Gradient reduction "
                  "after backward in one payload (Dockerfile: HOROVOD_FIXED_PAYLOAD=161). GPUs: Tesla V100-SXM3-H-32GB "
                  "(entry.json), the DGX-2H's part."),
    _resnet(id="mlperf-v1_1-nvidia-dgxa100_n128_ngc21_09_mxnet", repo="mlcommons/training_results_v1.1",
            results="NVIDIA/results/dgxa100_n128_ngc21.09_mxnet/resnet",
            system_file="NVIDIA/systems/dgxa100_n128_ngc21.09_mxnet.json",
            config="NVIDIA/benchmarks/resnet/implementations/mxnet/config_DGXA100_multi_128x8x35.sh",
            precision="fp16 (--dtype float16 in NVIDIA run_and_time.sh)",
            optimizer="lars (log: opt_name lars, lars_opt_momentum 0.94)",
            batch_source="MLLOG global_batch_size 35840 and d_batch_size 35 (config BATCHSIZE=35)",
            notes="MLPerf v1.1 (Nov 2021). MXNET_HOROVOD_NUM_GROUPS=1 (config): one reduction after backward. CUDA "
                  "graphs; heavily tuned benchmark code, 35 images per GPU."),
    _resnet(id="mlperf-v1_1-nvidia-dgxa100_n540_ngc21_09_mxnet", repo="mlcommons/training_results_v1.1",
            results="NVIDIA/results/dgxa100_n540_ngc21.09_mxnet/resnet",
            system_file="NVIDIA/systems/dgxa100_n540_ngc21.09_mxnet.json",
            config="NVIDIA/benchmarks/resnet/implementations/mxnet/config_DGXA100_multi_540x8x15xgbn2_larsv2.sh",
            precision="fp16 (--dtype float16 in NVIDIA run_and_time.sh)",
            optimizer="lars (log: opt_name lars; config OPTIMIZER=sgdwfastlarsv2)",
            batch_source="MLLOG global_batch_size 64800 and d_batch_size 15 (config BATCHSIZE=15)",
            bn_group=2,
            notes="MLPerf v1.1 (Nov 2021), 4320 GPUs, 15 images per GPU. BN_GROUP=2 (config): batch-norm statistics "
                  "reduced across pairs of GPUs (the record's bn_group, Plan.bn_group). An epoch is ~20 steps "
                  "of 64,800 images (~0.18 s), so the per-epoch interval carries the epoch boundary's own overhead."),
    _resnet(id="mlperf-v2_1-hpe-xl675d_a100_sxm_80gb_16n_mxnet", repo="mlcommons/training_results_v2.1",
            results="HPE/results/HPE-ProLiant-XL675d-Gen10-Plus_A100-SXM-80GB_16N_mxnet/resnet",
            system_file="HPE/systems/HPE-ProLiant-XL675d-Gen10-Plus_A100-SXM-80GB_16N_mxnet.json",
            config=None,
            precision="fp16 (NVIDIA MLPerf MXNet implementation, NGC MXNet 21.09)",
            optimizer="lars (log: opt_name)",
            batch_source="MLLOG global_batch_size 16384 over 128 GPUs",
            notes="MLPerf v2.1 (Nov 2022). 16 x HPE ProLiant XL675d, 8 A100-SXM-80GB each with 4 x HDR200 compute NICs "
                  "(half a DGX A100's 8). result_5.txt is an aborted run (one epoch_start, no epoch_stop): not used."),
    _cosmo(id="mlperfhpc-v0_7-fujitsu-abci_512xv100_tensorflow_closed", repo="mlcommons/hpc_results_v0.7",
           results="Fujitsu/results/abci_512xV100_tensorflow_closed/cosmoflow",
           system_file="Fujitsu/systems/abci_512xV100_tensorflow_closed.json",
           config="Fujitsu/benchmarks/cosmoflow/implementations/implementation_abci/configs/cosmo_closed_128node.yaml",
           inter=ABCI_FABRIC,
           framework="TensorFlow 2.2 Keras with Horovod (Fujitsu's copy of the MLPerf HPC reference CosmoFlow; "
                     "hvd.DistributedOptimizer, NCCL 2.6, DALI reader)",
           framework_version="TensorFlow 2.2.0",
           precision="fp32 (train.py runs mixed_float16 only with --mixed_precision; run_and_time.sh does not pass it)",
           optimizer="sgd momentum 0.9 (config: SGD, momentum 0.9)",
           data="real CosmoFlow data (262,144 training samples, v0.7 size), staged to /dev/shm before run_start (stage "
                "interval excluded); the epoch's training interval (epoch_start -> eval_start) excludes eval",
           batch_source="MLLOG global_batch_size 512 over 512 GPUs (config batch_size 1)",
           notes="MLPerf HPC v0.7 (Nov 2020), closed division, 128 ABCI nodes. ABCI is a shared cluster: the run's "
                 "allocation and neighbours are not stated. The ParaDL ABCI runs and the MLPerf Training v0.6 Fujitsu "
                 "ABCI log stay held out; this is a different (Fujitsu HPC) submission."),
    _cosmo(id="mlperfhpc-v0_7-fujitsu-abci_2048xv100_tensorflow_open", repo="mlcommons/hpc_results_v0.7",
           results="Fujitsu/results/abci_2048xV100_tensorflow_open/cosmoflow",
           system_file="Fujitsu/systems/abci_2048xV100_tensorflow_open.json",
           config="Fujitsu/benchmarks/cosmoflow/implementations/implementation_abci/configs/cosmo_open_1024node.yaml",
           inter=ABCI_FABRIC,
           framework="TensorFlow 2.2 Keras with Horovod (Fujitsu's open-division CosmoFlow, implementation_abci_old; "
                     "hvd.DistributedOptimizer, NCCL 2.6, DALI reader)",
           framework_version="TensorFlow 2.2.0",
           precision="fp32 (train.py runs mixed_float16 only with --mixed_precision; run_and_time.sh does not pass it)",
           optimizer="sgd momentum 0.91 with weight decay (config: SGDWD)",
           data="real CosmoFlow data (262,144 training samples, v0.7 size) with augmentation, staged to /dev/shm before "
                "run_start; the epoch's training interval (epoch_start -> eval_start) excludes eval",
           batch_source="MLLOG global_batch_size 2048 over 2048 GPUs (the config's batch_size 4 is not what ran)",
           notes="MLPerf HPC v0.7 open division (optimizer and augmentation changed, same network), 512 ABCI nodes. "
                 "Shared cluster; allocation not stated. Epoch numbering starts at 0 in these logs."),
    _cosmo(id="mlperfhpc-v1_0-nvidia-dgxa100_n16_ngc21_09_mxnet", repo="mlcommons/hpc_results_v1.0",
           results="NVIDIA/results/dgxa100_n16_ngc21.09_mxnet/strong/cosmoflow",
           system_file="NVIDIA/systems/dgxa100_n16_ngc21.09_mxnet.json",
           config="NVIDIA/benchmarks/cosmoflow/implementations/mxnet/configs/config_DGXA100_16x8x1.sh",
           framework="MXNet (MLPerf HPC closed-division CosmoFlow, NVIDIA implementation; Horovod/NCCL with "
                     "MXNET_HOROVOD_NUM_GROUPS=1, CUDA graphs, DALI)",
           precision="amp (DTYPE=amp in config_DGXA100_common.sh)", optimizer="sgd momentum (log: opt_name sgd)",
           data=NVIDIA_COSMO_DATA, batch_source="MLLOG global_batch_size 128 over 16 nodes x 8 GPUs",
           notes="MLPerf HPC v1.0 (Nov 2021), 16 DGX A100. MXNET_HOROVOD_NUM_GROUPS=1 (config_DGXA100_common.sh): one "
                 "gradient reduction after backward."),
    _cosmo(id="mlperfhpc-v1_0-nvidia-dgxa100_n128_ngc21_09_mxnet", repo="mlcommons/hpc_results_v1.0",
           results="NVIDIA/results/dgxa100_n128_ngc21.09_mxnet/strong/cosmoflow",
           system_file="NVIDIA/systems/dgxa100_n128_ngc21.09_mxnet.json",
           config="NVIDIA/benchmarks/cosmoflow/implementations/mxnet/configs/config_DGXA100_128x8x1.sh",
           framework="MXNet (MLPerf HPC closed-division CosmoFlow, NVIDIA implementation; Horovod/NCCL with "
                     "MXNET_HOROVOD_NUM_GROUPS=1, CUDA graphs, DALI)",
           precision="amp (DTYPE=amp in config_DGXA100_common.sh)", optimizer="sgd momentum (log: opt_name sgd)",
           data=NVIDIA_COSMO_DATA, batch_source="MLLOG global_batch_size 1024 over 128 nodes x 8 GPUs",
           notes="MLPerf HPC v1.0 (Nov 2021), 128 DGX A100. SHARP enabled (config: NCCL_COLLNET_ENABLE=1). One gradient "
                 "reduction after backward (MXNET_HOROVOD_NUM_GROUPS=1)."),
    _cosmo(id="mlperfhpc-v1_0-nvidia-dgxa100_n512_weak_instance_ngc21_09_mxnet", repo="mlcommons/hpc_results_v1.0",
           results="NVIDIA/results/dgxa100_n512_ngc21.09_mxnet/weak/cosmoflow",
           system_file="NVIDIA/systems/dgxa100_n512_ngc21.09_mxnet.json",
           config="NVIDIA/benchmarks/cosmoflow/implementations/mxnet/configs/config_DGXA100_32x16x8x1_weak.sh",
           nodes=16, name="dgxa100_n512 weak scaling: one of 32 concurrent 16-node instances (NVIDIA)",
           framework="MXNet (MLPerf HPC closed-division CosmoFlow, NVIDIA implementation; Horovod/NCCL with "
                     "MXNET_HOROVOD_NUM_GROUPS=1, CUDA graphs, DALI)",
           precision="amp (DTYPE=amp in config_DGXA100_common.sh)", optimizer="sgd momentum (log: opt_name sgd)",
           data=NVIDIA_COSMO_DATA, batch_source="MLLOG global_batch_size 128 and number_of_nodes 16 per instance log",
           notes="MLPerf HPC v1.0 weak-scaling submission: 32 training instances of 128 GPUs ran at once on 512 nodes, "
                 "sharing the fabric; each result_*.txt is one instance. The row is one instance "
                 "(median over the 32 instances' medians) - compare with the 16-node strong-scaling row run alone."),
    _cosmo(id="mlperfhpc-v2_0-nvidia-dgxa100_n64_pytorch", repo="mlcommons/hpc_results_v2.0",
           results="NVIDIA/results/dgxa100_n64_pytorch/strong/cosmoflow",
           system_file="NVIDIA/systems/dgxa100_n64_pytorch.json",
           config="NVIDIA/benchmarks/cosmoflow/implementations/pytorch/configs/submission_dgxa100_64x8x1.yaml",
           framework="PyTorch DistributedDataParallel (MLPerf HPC closed-division CosmoFlow, NVIDIA implementation; "
                     "NCCL, CUDA graphs, DALI)",
           precision="amp (submission_dgxa100_64x8x1.yaml: amp True; DTYPE=amp in config_DGXA100_common.sh)",
           optimizer="sgd momentum 0.9 (config: fixed_sgd, momentum 0.9)",
           data=NVIDIA_COSMO_DATA, batch_source="MLLOG global_batch_size 512 over 64 nodes x 8 GPUs (config batch_size 1)",
           notes="MLPerf HPC v2.0 (Nov 2022), 64 DGX A100 (config_DGXA100_common.sh sources config_data_selene.sh). "
                 "NDHWC layout, CUDA graphs (config)."),
    _cosmo(id="mlperfhpc-v3_0-nvidia-eos_n64_ngc23_09_pytorch", repo="mlcommons/hpc_results_v3.0",
           results="NVIDIA/results/eos_n64_ngc23.09_pytorch/strong/cosmoflow",
           system_file="NVIDIA/systems/eos_n64_ngc23.09_pytorch.json", config=None,
           name="eos, 64 nodes (NVIDIA)",
           framework="PyTorch DistributedDataParallel (MLPerf HPC closed-division CosmoFlow, NVIDIA implementation; "
                     "NCCL, CUDA graphs, DALI)",
           precision="amp (NVIDIA CosmoFlow submission configs of this round: amp True)",
           optimizer="sgd momentum 0.9 (configs: fixed_sgd, momentum 0.9)",
           data=NVIDIA_COSMO_DATA, batch_source="MLLOG global_batch_size 512 over 64 nodes x 8 GPUs",
           notes="MLPerf HPC v3.0 (Nov 2023), eos (system JSON: H100 80GB HBM3, 8x NDR 400Gb/s compute NICs). The round's folder has no 64-node H100 config file; "
                 "batch and nodes are from the log."),
    _cosmo(id="mlperfhpc-v1_0-tacc-longhorn_tf", repo="mlcommons/hpc_results_v1.0",
           results="TACC/results/longhorn-tf/strong/cosmoflow", system_file="TACC/systems/longhorn-tf.json",
           config="TACC/benchmarks/cosmoflow/implementations/longhorn/configs/cosmo.yaml",
           framework="TensorFlow 2.1 Keras with Horovod (MLPerf HPC reference CosmoFlow, TACC build; "
                     "hvd.DistributedOptimizer, NCCL 2.4.8)",
           framework_version="tensorflow-py3/2.1.0 (powerai 1.7.0)",
           precision="fp32 (the reference train.py runs mixed precision only when asked; runscript.sh does not ask)",
           optimizer="sgd momentum 0.9 (config)",
           data="real CosmoFlow data (524,288 samples) as GZIP-compressed TFRecords staged to node-local /tmp "
                "(--stage-dir), decompressed by tf.data on the POWER9 hosts every epoch; training interval "
                "epoch_start -> eval_start",
           batch_source="MLLOG global_batch_size 128 over 32 nodes x 4 GPUs (config batch_size 1)",
           notes="MLPerf HPC v1.0, TACC Longhorn (system JSON: 2 IBM Power9 per node, GPUs attached to the host by "
                 "NVLink, 'Infiniband EDR' fat tree without a NIC count). Mapped by the 4-V100-per-node rule to the ABCI profile, whose "
                 "hosts are Xeon with PCIe: the row tests the host input path as much as the GPUs."),
    # skipped by the mapping (no reference profile for their fabric or GPU), kept with their evidence
    _cosmo(id="mlperfhpc-v1_0-lbnl-perlmutter_256x4_ngc21_09_mxnet", repo="mlcommons/hpc_results_v1.0",
           results="LBNL/results/perlmutter_256x4_ngc21.09_mxnet/strong/cosmoflow",
           system_file="LBNL/systems/perlmutter_256x4_ngc21.09_mxnet.json", config=None,
           framework="MXNet (MLPerf HPC closed-division CosmoFlow, NVIDIA implementation run by LBNL; Horovod/NCCL, DALI)",
           precision="amp (NVIDIA implementation, NGC 21.09)", optimizer="sgd momentum (log: opt_name sgd)",
           data=NVIDIA_COSMO_DATA, batch_source="MLLOG global_batch_size 1024 over 256 nodes x 4 GPUs",
           notes="MLPerf HPC v1.0, Perlmutter (system JSON: HPE Cray Slingshot, Dragonfly; NIC count and speed not "
                 "stated)."),
    _cosmo(id="mlperfhpc-v1_0-lbnl-perlmutter_10x128x4_weak_instance_ngc21_09_mxnet", repo="mlcommons/hpc_results_v1.0",
           results="LBNL/results/perlmutter_10x128x4_ngc21.09_mxnet/weak/cosmoflow",
           system_file="LBNL/systems/perlmutter_10x128x4_ngc21.09_mxnet.json", config=None, nodes=128,
           name="perlmutter weak scaling: one of 10 concurrent 128-node instances (LBNL)",
           framework="MXNet (MLPerf HPC closed-division CosmoFlow, NVIDIA implementation run by LBNL; Horovod/NCCL, DALI)",
           precision="amp (NVIDIA implementation, NGC 21.09)", optimizer="sgd momentum (log: opt_name sgd)",
           data=NVIDIA_COSMO_DATA, batch_source="MLLOG global_batch_size 512 and number_of_nodes 128 per instance log",
           notes="MLPerf HPC v1.0 weak scaling: 10 instances of 512 GPUs at once on 1280 nodes; one instance per log."),
    _cosmo(id="mlperfhpc-v3_0-hpe_lbnl-perlmutter_128x4", repo="mlcommons/hpc_results_v3.0",
           results="HPE+LBNL/results/perlmutter_128x4/strong/cosmoflow",
           system_file="HPE+LBNL/systems/perlmutter_128x4.json", config=None,
           framework="PyTorch DistributedDataParallel (MLPerf HPC closed-division CosmoFlow, NVIDIA implementation "
                     "run by HPE+LBNL; NCCL, DALI)",
           precision="amp (NVIDIA implementation, NGC 23.09)", optimizer="sgd momentum (NVIDIA configs: fixed_sgd)",
           data=NVIDIA_COSMO_DATA, batch_source="MLLOG global_batch_size 512 over 128 nodes x 4 GPUs",
           notes="MLPerf HPC v3.0, Perlmutter (HPE Cray Slingshot; NIC count and speed not stated)."),
    _cosmo(id="mlperfhpc-v1_0-helmholtzai-juwelsbooster_n512_mxnet1_9", repo="mlcommons/hpc_results_v1.0",
           results="HelmholtzAI/results/juwelsbooster_gpu_n512_mxnet1.9/strong/cosmoflow",
           system_file="HelmholtzAI/systems/juwelsbooster_gpu_n512_mxnet1.9.json", config=None,
           framework="MXNet 1.9 with Horovod (MLPerf HPC closed-division CosmoFlow, HelmholtzAI build of the NVIDIA "
                     "implementation)",
           precision="amp (NVIDIA implementation)", optimizer="sgd momentum (log: opt_name sgd)",
           data=NVIDIA_COSMO_DATA, batch_source="MLLOG global_batch_size 512 over 128 nodes x 4 GPUs",
           notes="MLPerf HPC v1.0, JUWELS Booster (system JSON: 4 A100 and 4x HDR200 per node, Dragonfly)."),
    _cosmo(id="mlperfhpc-v1_0-helmholtzai-juwelsbooster_n1024_mxnet1_9", repo="mlcommons/hpc_results_v1.0",
           results="HelmholtzAI/results/juwelsbooster_gpu_n1024_mxnet1.9/strong/cosmoflow",
           system_file="HelmholtzAI/systems/juwelsbooster_gpu_n1024_mxnet1.9.json", config=None,
           framework="MXNet 1.9 with Horovod (MLPerf HPC closed-division CosmoFlow, HelmholtzAI build of the NVIDIA "
                     "implementation)",
           precision="amp (NVIDIA implementation)", optimizer="sgd momentum (log: opt_name sgd)",
           data=NVIDIA_COSMO_DATA, batch_source="MLLOG global_batch_size 1024 over 256 nodes x 4 GPUs",
           notes="MLPerf HPC v1.0, JUWELS Booster (system JSON: 4 A100 and 4x HDR200 per node, Dragonfly)."),
    _cosmo(id="mlperfhpc-v2_0-helmholtzai-horeka_n512_pytorch1_13", repo="mlcommons/hpc_results_v2.0",
           results="HelmholtzAI/results/horeka_gpu_n512_pytorch1.13/strong/cosmoflow",
           system_file="HelmholtzAI/systems/horeka_gpu_n512_pytorch1.13.json", config=None,
           framework="PyTorch 1.13 DistributedDataParallel (MLPerf HPC closed-division CosmoFlow, HelmholtzAI build of "
                     "the NVIDIA implementation)",
           precision="amp (NVIDIA implementation)", optimizer="sgd momentum (NVIDIA configs: fixed_sgd)",
           data=NVIDIA_COSMO_DATA, batch_source="MLLOG global_batch_size 512 over 128 nodes x 4 GPUs",
           notes="MLPerf HPC v2.0, HoreKa (system JSON: 4 A100 and 4x HDR200 per node, 'CCB Fully non-blocking'). Runs spread "
                 "33,399 to 46,967 samples/s."),
    _cosmo(id="mlperfhpc-v0_7-cscs-daint_gpu_n128_tf2_2_0", repo="mlcommons/hpc_results_v0.7",
           results="CSCS/results/daint_gpu_n128_tf2.2.0/cosmoflow", system_file="CSCS/systems/daint_gpu_n128_tf2.2.0.json",
           config=None,
           framework="TensorFlow 2.2 Keras with Horovod (MLPerf HPC reference CosmoFlow, CSCS build)",
           precision="fp32 (the CSCS train.py has no mixed-precision option)",
           optimizer="sgd momentum (reference config)",
           data="real CosmoFlow data (262,144 samples, v0.7 size); training interval epoch_start -> eval_start",
           batch_source="MLLOG global_batch_size 256 over 128 nodes x 1 GPU",
           notes="MLPerf HPC v0.7, Piz Daint (one P100-PCIE-16GB per node, Cray Aries DragonFly)."),
    _cosmo(id="mlperfhpc-v0_7-cscs-daint_gpu_n256_tf2_2_0", repo="mlcommons/hpc_results_v0.7",
           results="CSCS/results/daint_gpu_n256_tf2.2.0/cosmoflow", system_file="CSCS/systems/daint_gpu_n256_tf2.2.0.json",
           config=None,
           framework="TensorFlow 2.2 Keras with Horovod (MLPerf HPC reference CosmoFlow, CSCS build)",
           precision="fp32 (the CSCS train.py has no mixed-precision option)",
           optimizer="sgd momentum (reference config)",
           data="real CosmoFlow data (262,144 samples, v0.7 size); training interval epoch_start -> eval_start",
           batch_source="MLLOG global_batch_size 512 over 256 nodes x 1 GPU",
           notes="MLPerf HPC v0.7, Piz Daint (one P100-PCIE-16GB per node, Cray Aries DragonFly)."),
    # added later: MLPerf Training v4.0 (no git mirror; read through the file index, see `extract`)
    _resnet(id="mlperf-v4_0-nvidia-eos_n316_ngc24_04_mxnet", repo="mlcommons/training_results_v4.0",
            results="NVIDIA/results/eos_n316_ngc24.04_mxnet/resnet",
            system_file="NVIDIA/systems/eos_n316_ngc24.04_mxnet.json",
            config="NVIDIA/benchmarks/resnet/implementations/eos_n316_ngc24.04_mxnet/config_DGXH100_multi_316x8x16.sh",
            extract="mlperf_extracts/v4_0_nvidia_eos_n316_ngc24_04_mxnet_resnet.tsv",
            system_values={  # NVIDIA/systems/eos_n316_ngc24.04_mxnet.json at the commit (read_file), the fields used here
                "system_name": "Eos_n316", "number_of_nodes": "316", "accelerators_per_node": "8",
                "accelerator_model_name": "NVIDIA H100-SXM5-80GB", "accelerator_memory_capacity": "81559 MiB",
                "accelerator_interconnect": "NVLINK Gen4 900 GB/s + NVSWITCH Gen3",
                "host_networking": "Storage: 2x ConnectX-7 IB NDR 400Gb/s, Compute: 8x ConnectX-7 IB NDR 400Gb/s, "
                                   "Management: 100Gb/s Ethernet NIC",
                "framework": "MxNet NVIDIA Release 24.04"},
            name="eos, 316 nodes (NVIDIA)", gpu_memory="80 GB (system JSON: 81559 MiB HBM3)",
            precision="fp16 (--dtype float16 in the round's NVIDIA ResNet run script, "
                      "NVIDIA/benchmarks/resnet/implementations/eos_ngc24.04_mxnet/run_and_time_local.sh)",
            optimizer="lars (log: opt_name lars, lars_opt_momentum 0.95; config OPTIMIZER=sgdwfastlars)",
            batch_source="MLLOG global_batch_size 40448 and d_batch_size 16 in every log (config BATCHSIZE=16, "
                         "DGXNNODES=316; 40448 = 316 x 8 x 16)",
            bn_group=2,
            notes="MLPerf Training v4.0 (June 2024), eos: 316 DGX H100 (system JSON: 8 x ConnectX-7 NDR 400Gb/s compute "
                  "NICs per node), 2528 GPUs, 16 images per GPU. Config: MXNET_HOROVOD_NUM_GROUPS=1 (\"Default is no NCCL "
                  "and BWD overlap\"), SBATCH_NETWORK=sharp (SHARP in-network reduction), BN_GROUP=2 (batch-norm "
                  "statistics reduced across pairs of GPUs: the record's bn_group, Plan.bn_group). An epoch is "
                  "~32 steps (~0.186 s), so the per-epoch interval carries the epoch boundary's own overhead. "
                  "The logs were read through the stored file index (no git mirror here) and their per-epoch values "
                  "transcribed to scripts/mlperf_extracts/; the same round's NVIDIA/results/coreweave_hgxh100_n448 "
                  "folder repeats the v3.0 CoreWeave runs (same timestamps) and is not added again."),
]

METHOD = {
    "resnet_mllog": "per run: epoch k's training interval = epoch_start(epoch_num=k) -> epoch_stop (MLLOG time_ms); run "
                    "throughput = median over epochs 2.. of the log's own `throughput` values (logged right after each "
                    "epoch_stop; equal to 1,281,167 / interval within 0.1%); first epoch left out; submission = median "
                    "over runs",
    "v05": "per run: epoch k's interval = timestamp of 'train_epoch: k+1' - timestamp of 'train_epoch: k' (:::MLPv0.5.0 "
           "lines), only where no eval_start lies between; throughput = 1,281,167 / interval; median over epochs 2..; "
           "submission = median over runs",
    "resnet_extract": "per run: epoch k's training interval = epoch_start(epoch_num=k) -> epoch_stop (MLLOG time_ms); run "
                      "throughput = median over epochs 2.. of the log's own throughput values (MLLOG key tracked_stats, "
                      "logged right after each epoch_stop; x interval / 1,281,167 within 0.993..1.008 in every epoch); "
                      "first epoch left out; submission = median over runs. Values transcribed from the stored logs to "
                      "the extract file named in source.path",
    "cosmo": "per run: epoch k's training interval = epoch_start(epoch_num=k) -> the first of throughput / eval_start / "
             "epoch_stop of epoch k (MLLOG time_ms); throughput = train_samples / interval (the log's `throughput` "
             "value where present, which equals it); first epoch left out; median over epochs; submission = median "
             "over runs (instances, for weak-scaling submissions)",
}


def _gpu_memory(model: str, capacity: str) -> str:
    return capacity.strip() if capacity else ("80 GB" if "80" in model else "40 GB" if "40" in model else "")


def records(mirrors: str) -> list[dict]:
    out = []
    for sub in SUBMISSIONS:
        repo = os.path.join(mirrors, sub["repo"].replace("/", "+"), "repo")
        commit = COMMITS[sub["repo"]]
        if sub.get("extract"):
            ex = extract_submission(os.path.join(os.path.dirname(os.path.abspath(__file__)), sub["extract"]))
            js = sub["system_values"]
        else:
            ex = submission(repo, commit, sub["results"])
            js = system_json(repo, commit, sub["system_file"])
        v05 = "nodes" in js and isinstance(js.get("nodes"), list)
        used = {k: r for k, r in ex["runs"].items() if r["n_epochs"]}
        first = next(iter(used.values()))
        per_node = sub.get("per_node") or int(js.get("accelerators_per_node") or 0)
        nodes = sub.get("nodes") or int(js.get("number_of_nodes"))
        gpus = per_node * nodes
        global_batch = first.get("global_batch") or sub["batch"] * gpus
        batch = global_batch // gpus
        assert batch * gpus == global_batch, sub["id"]
        value = round(ex["median"], 1)
        seconds = global_batch / ex["median"]
        gpu = sub.get("gpu") or js.get("accelerator_model_name")
        system = {
            "name": sub.get("name") or f"{js.get('system_name')} ({sub['results'].split('/')[0]})",
            "gpu": gpu,
            "gpu_memory": sub.get("gpu_memory") or _gpu_memory(gpu, js.get("accelerator_memory_capacity", "")),
            "gpus_per_node": per_node, "nodes": nodes, "gpus_used_per_node": per_node,
            "intra_node_link": sub.get("intra") or js.get("accelerator_interconnect") or "not stated",
            "inter_node_network": sub.get("inter") or js.get("host_networking") or "not stated",
        }
        kind = "v05" if v05 else ("cosmo" if sub["kind"] != "resnet" else
                                  "resnet_extract" if sub.get("extract") else "resnet_mllog")
        unit = "img/s" if sub["kind"] == "resnet" else "samples/s"
        what = "images" if sub["kind"] == "resnet" else "samples (4 x 128^3 volumes)"
        url_base = f"https://github.com/{sub['repo']}/tree/{commit}/{sub['results']}"
        per_run = []
        for name, r in ex["runs"].items():
            if not r["n_epochs"]:
                per_run.append({"file": name, "used": False, "why": r["note"]})
                continue
            row = {"file": name, "epochs": r["epochs_used"], "n_epochs": r["n_epochs"],
                   "median_epoch_train_s": round(r["median_epoch_train_s"], 4),
                   "throughput": round(r["throughput_logged"] or r["throughput_from_timestamps"], 1),
                   "throughput_from_timestamps": round(r["throughput_from_timestamps"], 1)}
            if r.get("run_s"):
                row["run_start_to_stop_s"] = round(r["run_s"], 2)
            per_run.append(row)
        example_run = next(iter(used))
        ex_lines = used[example_run]["example"]
        record = {
            "id": sub["id"], "model": sub["model"], "model_details": sub["model_details"],
            "framework": sub["framework"],
            "framework_version": sub.get("framework_version") or js.get("framework") or "not stated",
            "precision": sub["precision"], "optimizer": sub["optimizer"], "data": sub["data"],
            "system": system, "num_gpus": gpus, "batch_per_gpu": batch, "global_batch": global_batch,
            "measured": {
                "quantity": f"training throughput, total {what}/s, from published logs (median over runs of the "
                            f"median per-epoch training rate, first epoch left out)",
                "value": value, "unit": unit, "n_runs": len(used),
                "range_over_runs": [round(x) for x in ex["range"]],
            },
            "source": {
                "repo": sub["repo"],
                "path": f"{sub['results']}/ (result_*.txt) and {sub['system_file']}"
                        + (f" and {sub['config']}" if sub.get("config") else "")
                        + (f"; per-epoch values transcribed to scripts/{sub['extract']}" if sub.get("extract") else ""),
                "commit": commit, "url": url_base, "table": "MLPerf result logs", "marker": "[derived]",
            },
            "batch_source": sub["batch_source"],
            **({"bn_group": sub["bn_group"]} if sub.get("bn_group") else {}),
            "notes": sub["notes"],
            "derived": {"images_per_sec_per_gpu": round(ex["median"] / gpus, 2),
                        "seconds_per_iteration": round(seconds, 5)},
            "derived_marker": "[derived] seconds_per_iteration = global_batch / total samples per second (one fwd+bwd "
                              "step on every GPU); images_per_sec_per_gpu = total/num_gpus",
            "evidence": {
                "method": METHOD[kind],
                "example": {"file": f"{sub['results']}/{example_run}", **ex_lines},
                "per_run": per_run,
            },
        }
        out.append(record)
    return out
