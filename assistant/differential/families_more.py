"""More error families with several common causes: GPU faults, distributed jobs, host memory, forked workers.

The same data as :mod:`assistant.differential.families` (read its docstring for what the fields
mean), for the categories whose message alone does not say which cause is behind it. Wording stays
generic for the family: the rule's own branch, when it lands on one, brings the user's numbers.
Outcomes whose facts name the cause on their own (a kernel assertion that names the labels, a
status that names the library mismatch) are ``decisive``; they are also listed under the
alternative they are, so the single answer still gets that alternative's check.
"""

from __future__ import annotations

from assistant.differential.family import Alternative, Family

DEVICE_SIDE_ASSERT = Family(
    alternatives=(
        Alternative(
            "assert.label_range",
            "device-side-assert#label-out-of-range",
            prior=0.4,
            cues={"loss_code": 2.5, "custom_data": 1.8, "different_model": 2.0, "tokenizer": 0.4, "embedding_code": 0.5},
            outcomes=frozenset({"cuda.device_side_assert", "cuda.assert_label"}),
        ),
        Alternative(
            "assert.embedding_ids",
            "device-side-assert#ids-beyond-embedding",
            prior=0.25,
            cues={"tokenizer": 6.0, "embedding_code": 4.0, "loss_code": 0.5, "different_model": 1.3},
            outcomes=frozenset({"cuda.assert_gather_index"}),
        ),
        Alternative(
            "assert.index_range",
            "device-side-assert#index-out-of-range",
            prior=0.15,
            cues={"custom_data": 1.2},
            outcomes=frozenset({"cuda.assert_index", "cuda.assert_scatter_gather", "cuda.assert_other"}),
        ),
        Alternative(
            "assert.not_probabilities",
            "device-side-assert#values-not-probabilities",
            prior=0.1,
            cues={"mixed_precision": 2.0, "later_in_training": 1.5, "loss_code": 1.2},
            outcomes=frozenset({"cuda.assert_bce_range", "cuda.assert_multinomial"}),
        ),
    ),
    decisive=frozenset({"cuda.assert_label", "cuda.assert_bce_range", "cuda.assert_multinomial", "cuda.assert_gather_index",
                        "cuda.assert_scatter_gather", "cuda.assert_index"}),
    plain=frozenset({"cuda.device_side_assert"}),
)

ILLEGAL_MEMORY_ACCESS = Family(
    alternatives=(
        Alternative(
            "ima.custom_kernel",
            "illegal-memory-access#custom-kernel-out-of-bounds",
            prior=0.25,
            cues={"large_input": 3.0, "upgrade": 0.8},
            outcomes=frozenset({"cuda.illegal_memory_access_custom", "cuda.misaligned_address"}),
        ),
        Alternative(
            "ima.bad_indices",
            "illegal-memory-access#unchecked-bad-index",
            prior=0.35,
            cues={"custom_data": 1.5, "tokenizer": 1.5},
            outcomes=frozenset({"cuda.illegal_memory_access"}),
        ),
        Alternative(
            "ima.wrong_device",
            "illegal-memory-access#kernel-on-wrong-device",
            prior=0.08,
            cues={"multi_gpu": 5.0},
            outcomes=frozenset({"cuda.illegal_memory_access_device"}),
        ),
        Alternative(
            "ima.build_or_hardware",
            "illegal-memory-access#library-build-driver-or-gpu",
            prior=0.12,
            cues={"upgrade": 4.0, "driver_update": 3.0, "new_gpu": 2.0, "specific_node": 4.0},
            outcomes=frozenset({"cuda.illegal_memory_access_library"}),
        ),
    ),
    decisive=frozenset({"cuda.misaligned_address"}),
    plain=frozenset({"cuda.illegal_memory_access"}),
)

CUDA_UNAVAILABLE = Family(
    alternatives=(
        Alternative(
            "cuda.no_gpu_access",
            "cuda-unavailable#process-sees-no-gpu",
            prior=0.35,
            cues={"container": 3.0, "colab": 2.0, "wsl": 2.0, "upgrade": 0.6, "driver_update": 0.5, "suspend": 0.3},
            outcomes=frozenset({"devices.no_gpu_visible", "cuda.visible_devices_invalid"}),
        ),
        Alternative(
            "cuda.driver_state",
            "cuda-unavailable#driver-bad-state",
            prior=0.3,
            cues={"driver_update": 6.0, "upgrade": 2.5, "suspend": 6.0, "wsl": 1.5, "container": 0.7},
            outcomes=frozenset({"devices.cuda_unknown_error", "cuda.unknown_error_at_start", "devices.nvml_mismatch", "cuda.system_not_ready"}),
        ),
        Alternative(
            "cuda.visible_devices",
            "cuda-unavailable#gpu-index-not-visible",
            prior=0.15,
            cues={"multi_gpu": 3.0, "multi_node": 1.5},
            outcomes=frozenset({"devices.invalid_ordinal"}),
        ),
        Alternative(
            "cuda.build_driver",
            "cuda-unavailable#build-driver-mismatch",
            prior=0.15,
            cues={"upgrade": 2.0, "new_gpu": 1.5, "container": 1.3},
            outcomes=frozenset({"devices.driver_too_old", "devices.cuda_unavailable"}),
        ),
    ),
    decisive=frozenset({"devices.cuda_unavailable", "devices.cuda_checkpoint_on_cpu", "devices.checkpoint_gpu_index", "devices.driver_too_old",
                        "devices.nvml_mismatch", "cuda.system_not_ready", "cuda.visible_devices_invalid"}),
)

NCCL = Family(
    alternatives=(
        Alternative(
            "nccl.rank_desync",
            "nccl-timeout#ranks-out-of-step",
            prior=0.35,
            cues={"rank0_only": 5.0, "evaluation": 2.5},
            outcomes=frozenset({"distributed.nccl_timeout", "symptoms.distributed_hang", "distributed.collective_mismatch"}),
        ),
        Alternative(
            "nccl.slow_or_dead_rank",
            "nccl-timeout#rank-crashed-or-slow",
            prior=0.25,
            cues={"saving": 4.0, "evaluation": 2.0, "resume": 1.5},
            outcomes=frozenset({"distributed.peer_closed", "distributed.nccl_remote_error", "distributed.nccl_aborted", "distributed.nccl_unique_id"}),
        ),
        Alternative(
            "nccl.transport",
            "nccl-errors#ranks-cannot-connect",
            prior=0.2,
            # Not "first_step": "immediately" in a report rarely means the first collective, and the rule reads that from the sequence number.
            cues={"multi_node": 4.0, "container": 2.0, "wsl": 2.0, "later_in_training": 0.4},
            outcomes=frozenset({"distributed.nccl_timeout_first_collective", "distributed.nccl_system_error"}),
        ),
        Alternative(
            "nccl.shared_memory",
            "nccl-errors#container-shm-too-small",
            prior=0.03,
            cues={"container": 5.0, "multi_node": 0.5},
        ),
    ),
    decisive=frozenset({"distributed.collective_mismatch", "distributed.duplicate_gpu", "distributed.nccl_cpu_tensor"}),
    plain=frozenset({"distributed.nccl_timeout", "symptoms.distributed_hang", "distributed.nccl_aborted"}),
)

DDP = Family(
    alternatives=(
        Alternative(
            "ddp.unused_parameters",
            "ddp-unused-parameters#parameters-without-gradient",
            prior=0.5,
            cues={"different_model": 2.0, "later_in_training": 0.4},
            outcomes=frozenset({"distributed.ddp_unused"}),
        ),
        Alternative(
            "ddp.changing_graph",
            "ddp-unused-parameters#used-parameters-change",
            prior=0.2,
            cues={"later_in_training": 4.0, "first_step": 0.4},
        ),
        Alternative(
            "ddp.reentrant_checkpoint",
            "ddp-unused-parameters#parameter-in-two-backwards",
            prior=0.12,
            outcomes=frozenset({"distributed.ddp_ready_twice"}),
        ),
    ),
    decisive=frozenset({"distributed.ddp_model_mismatch", "distributed.ddp_no_params", "distributed.ddp_device", "distributed.ddp_multi_device_module",
                        "distributed.pg_uninitialized", "distributed.pg_env", "distributed.port_in_use", "distributed.nccl_no_gpu",
                        "distributed.nccl_not_built", "symptoms.init_barrier_count"}),
    plain=frozenset({"distributed.ddp_unused"}),
)

CPU_OOM = Family(
    alternatives=(
        Alternative(
            "cpu.worker_copies",
            "cpu-oom#worker-copies-of-dataset",
            prior=0.3,
            cues={"workers_zero_ok": 5.0, "later_in_training": 1.5, "resume": 0.5, "tried_workers": 0.2, "evaluation": 0.7},
        ),
        Alternative(
            "cpu.data_in_ram",
            "cpu-oom#too-much-in-ram",
            prior=0.25,
            # Evaluation-time failures (no growth story) are mostly one evaluation step that is too large.
            cues={"first_step": 2.0, "custom_data": 1.5, "multi_gpu": 1.5, "later_in_training": 0.5, "after_n_items": 0.2, "evaluation": 3.0,
                  "large_input": 1.5},
            outcomes=frozenset({"memory.cpu_oom", "memory.cpu_oom_allocator", "memory.cpu_oom_numpy", "memory.cpu_oom_killed", "memory.cpu_oom_memoryerror",
                                "symptoms.process_killed", "mp.child_killed", "distributed.child_killed"}),
        ),
        Alternative(
            "cpu.checkpoint_load",
            "cpu-oom#checkpoint-load-in-ram",
            prior=0.12,
            cues={"resume": 5.0, "loading_weights": 4.0, "multi_gpu": 2.0, "first_step": 1.5, "later_in_training": 0.3},
        ),
        Alternative(
            "cpu.growth",
            "memory-growth-training-loop#host-memory-grows",
            prior=0.2,
            cues={"later_in_training": 5.0, "first_step": 0.2, "evaluation": 1.5, "after_n_items": 8.0, "tried_batch": 1.5},
            outcomes=frozenset({"memory.cpu_oom_growth", "symptoms.ram_growth"}),
        ),
    ),
    decisive=frozenset({"memory.cpu_oom_absurd_size", "scheduler.memory_limit"}),
    plain=frozenset({"memory.cpu_oom_allocator", "memory.cpu_oom_killed", "memory.cpu_oom_memoryerror", "symptoms.process_killed", "mp.child_killed",
                     "distributed.child_killed"}),
)

CUDNN = Family(
    alternatives=(
        Alternative(
            "cudnn.out_of_memory",
            "cudnn-errors#cudnn-out-of-memory",
            prior=0.4,
            cues={"large_input": 2.5, "colab": 1.3, "new_gpu": 0.6},
            outcomes=frozenset({"cuda.cudnn_no_memory", "cuda.cudnn_no_algorithm", "cuda.cudnn_internal_error"}),
        ),
        Alternative(
            "cudnn.earlier_error",
            "async-cuda-errors#earlier-kernel-failed-cudnn",
            prior=0.2,
            cues={"custom_data": 1.8, "different_model": 1.5},
            outcomes=frozenset({"cuda.cudnn_execution_failed", "cuda.cudnn_mapping_error"}),
        ),
        Alternative(
            "cudnn.unsupported_input",
            "cudnn-errors#cudnn-unsupported-input",
            prior=0.2,
            cues={"mixed_precision": 2.0, "large_input": 2.5},
            outcomes=frozenset({"cuda.cudnn_bad_param", "cuda.cudnn_not_supported"}),
        ),
        Alternative(
            "cudnn.install_mismatch",
            "cudnn-errors#cudnn-install-mismatch",
            prior=0.12,
            cues={"upgrade": 3.0, "new_gpu": 5.0, "driver_update": 2.0, "container": 1.3},
            outcomes=frozenset({"cuda.cudnn_arch_mismatch", "cuda.cudnn_version_mismatch"}),
        ),
    ),
    decisive=frozenset({"cuda.cudnn_arch_mismatch", "cuda.cudnn_version_mismatch", "cuda.cudnn_rnn_eval", "cuda.visible_devices_invalid", "cuda.cudnn_plan_warning"}),
    plain=frozenset({"cuda.cudnn_internal_error"}),
)

CUBLAS = Family(
    alternatives=(
        Alternative(
            "cublas.out_of_memory",
            "cublas-errors#cublas-out-of-memory",
            prior=0.3,
            cues={"large_input": 2.0, "multi_gpu": 1.3, "new_gpu": 0.6},
            outcomes=frozenset({"cuda.cublas_no_memory", "cuda.cublas_internal_error"}),
        ),
        Alternative(
            "cublas.earlier_error",
            "cublas-errors#earlier-kernel-failed-cublas",
            prior=0.3,
            cues={"tokenizer": 3.0, "embedding_code": 2.0, "custom_data": 1.5, "different_model": 1.5},
            outcomes=frozenset({"cuda.cublas_execution_failed"}),
        ),
        Alternative(
            "cublas.build_gpu",
            "cublas-errors#gpu-build-mismatch",
            prior=0.15,
            cues={"new_gpu": 5.0, "mixed_precision": 2.0, "upgrade": 2.0},
            outcomes=frozenset({"cuda.cublas_not_supported", "cuda.cublas_arch_mismatch"}),
        ),
        Alternative(
            "cublas.sizes",
            "cublas-errors#matmul-sizes-out-of-range",
            prior=0.12,
            cues={"large_input": 3.0},
            outcomes=frozenset({"cuda.cublas_invalid_value"}),
        ),
    ),
    decisive=frozenset({"cuda.cublas_arch_mismatch"}),
    plain=frozenset({"cuda.cublas_internal_error"}),
)

HARDWARE = Family(
    alternatives=(
        Alternative(
            "hw.power",
            "gpu-hardware-faults#unstable-power-or-ram",
            prior=0.22,
            cues={"multi_gpu": 1.8, "later_in_training": 1.3},
            outcomes=frozenset({"cuda.hardware_machine_reboot", "scheduler.segfault_unstable_hardware"}),
        ),
        Alternative(
            "hw.faulty_device",
            "gpu-hardware-faults#faulty-gpu-or-node",
            prior=0.3,
            cues={"specific_node": 5.0, "multi_node": 1.5},
            outcomes=frozenset({"cuda.hardware", "scheduler.node_failure", "cuda.hardware_ecc"}),
        ),
        Alternative(
            "hw.overheating",
            "gpu-hardware-faults#gpu-overheating",
            prior=0.15,
            cues={"overheat": 6.0, "later_in_training": 1.8, "first_step": 0.5},
        ),
        Alternative(
            "hw.driver_or_software",
            "gpu-hardware-faults#driver-or-software-fault",
            prior=0.2,
            cues={"driver_update": 6.0, "upgrade": 2.5, "wsl": 2.0, "suspend": 3.0},
            outcomes=frozenset({"cuda.hardware_unknown_error"}),
        ),
    ),
    decisive=frozenset({"cuda.hardware_ecc", "cuda.hardware_launch_timeout"}),
    plain=frozenset({"cuda.hardware", "scheduler.node_failure"}),
)

FORKED_CUDA = Family(
    alternatives=(
        Alternative(
            "mp.worker_uses_cuda",
            "cuda-fork-reinit#worker-uses-cuda",
            prior=0.55,
            cues={"workers_zero_ok": 6.0, "dataloader": 4.0, "custom_data": 1.5, "own_pool": 0.3},
            outcomes=frozenset({"mp.cuda_fork"}),
        ),
        Alternative(
            "mp.pool_after_cuda",
            "cuda-fork-reinit#pool-forked-after-cuda",
            prior=0.3,
            cues={"own_pool": 6.0, "dataloader": 0.3, "workers_zero_ok": 0.3},
            outcomes=frozenset({"mp.cuda_fork_process"}),
        ),
    ),
    plain=frozenset({"mp.cuda_fork_process"}),
)

MORE_FAMILIES: dict[str, Family] = {
    "device_side_assert": DEVICE_SIDE_ASSERT,
    "illegal_memory_access": ILLEGAL_MEMORY_ACCESS,
    "cuda_unavailable": CUDA_UNAVAILABLE,
    "nccl_error": NCCL,
    "ddp_error": DDP,
    "cpu_oom": CPU_OOM,
    "cudnn_error": CUDNN,
    "cublas_error": CUBLAS,
    "hardware_error": HARDWARE,
    "multiprocessing_error": FORKED_CUDA,
}
