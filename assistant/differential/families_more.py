"""More error families with several common causes: GPU faults, distributed jobs, host memory, forked workers.

The same data as :mod:`assistant.differential.families` (read its docstring for what the fields
mean), for the categories whose message alone does not say which cause is behind it. Wording stays
generic for the family: the rule's own branch, when it lands on one, brings the user's numbers.
Outcomes whose facts name the cause on their own (a kernel assertion that names the labels, a
status that names the library mismatch) are ``decisive``; they are also listed under the
alternative they are, so the single answer still gets that alternative's check.
"""

from __future__ import annotations

from assistant.differential.families import Alternative, Family, _fix

DEVICE_SIDE_ASSERT = Family(
    alternatives=(
        Alternative(
            "assert.label_range",
            "A class label is outside the range the loss accepts (zero up to the number of classes minus one): labels counted from one, "
            "a placeholder for unlabeled samples or pixels that is not passed as ignore_index, or an output layer with fewer classes than the data.",
            "Print the smallest and largest target next to the model's number of outputs (logits.shape[-1]), or run the same batch on the CPU, "
            "where the loss names the label that is out of range.",
            (_fix("Check the labels against the number of outputs", "",
                  "print(y.min().item(), y.max().item(), logits.shape[-1])\nassert 0 <= y.min() and y.max() < logits.shape[-1]", "device-side-assert"),
             _fix("Remap labels to start at zero, or pass the placeholder as ignore_index", "Set the output size from the data's classes.",
                  "loss = F.cross_entropy(logits, y, ignore_index=ignore_value)", "device-side-assert")),
            prior=0.4,
            cues={"loss_code": 2.5, "custom_data": 1.8, "different_model": 2.0, "tokenizer": 0.4, "embedding_code": 0.5},
            outcomes=frozenset({"cuda.device_side_assert", "cuda.assert_label"}),
        ),
        Alternative(
            "assert.embedding_ids",
            "A token or position id is at least the size of the embedding table it looks up: a tokenizer whose vocabulary is larger than the "
            "table (tokens added without resizing), or sequences longer than the position embeddings allow.",
            "Compare input_ids.max() with the embedding's num_embeddings, and the sequence length with the model's largest position.",
            (_fix("Check the ids against the table size", "",
                  "assert input_ids.max() < model.get_input_embeddings().num_embeddings", "device-side-assert"),
             _fix("Resize the embeddings after adding tokens, and truncate to the model's maximum length", "",
                  "model.resize_token_embeddings(len(tokenizer))", "device-side-assert")),
            prior=0.25,
            cues={"tokenizer": 6.0, "embedding_code": 4.0, "loss_code": 0.5, "different_model": 1.3},
            outcomes=frozenset({"cuda.assert_gather_index"}),
        ),
        Alternative(
            "assert.index_range",
            "An index tensor used for indexing, gather or scatter holds a value outside the dimension it indexes: an off-by-one, indices "
            "computed for a tensor of another size, or indices kept after the tensor was filtered.",
            "Print idx.min() and idx.max() next to the size of the dimension they index, or rerun with CUDA_LAUNCH_BLOCKING=1 to see which operation fails.",
            (_fix("Validate the indices before the call", "", "assert 0 <= idx.min() and idx.max() < t.size(dim)", "device-side-assert"),
             _fix("Find the operation that fails", "Synchronous launches make the traceback point at it.", "CUDA_LAUNCH_BLOCKING=1 python train.py", "async-cuda-errors")),
            prior=0.15,
            cues={"custom_data": 1.2},
            outcomes=frozenset({"cuda.assert_index", "cuda.assert_scatter_gather", "cuda.assert_other"}),
        ),
        Alternative(
            "assert.not_probabilities",
            "Values that must be probabilities are not: binary cross-entropy given raw logits or NaN, or sampling from rows that are negative, "
            "not finite, or all zero.",
            "Check the input of the loss or the sampler with torch.isfinite(p).all() and p.min(), p.max(): anything outside zero to one confirms it.",
            (_fix("Give raw logits to the loss that applies the sigmoid itself", "", "loss = F.binary_cross_entropy_with_logits(logits, target)", "device-side-assert"),
             _fix("Look for NaN before the loss", "", "assert torch.isfinite(p).all()", "device-side-assert")),
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
            "A hand-written or generated kernel (a C++/CUDA extension, a Triton kernel, or one torch.compile produced) computes an address "
            "outside its tensors: a missing bounds check, a layout or stride it assumes, or offsets that overflow on large inputs.",
            "Run the same step with the custom op, the fused kernel or torch.compile switched off, or under compute-sanitizer: if the error goes away "
            "(or the sanitizer names that kernel), it is at fault.",
            (_fix("Find the faulting kernel", "It reports the kernel, the thread and the address.",
                  "PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool memcheck python repro.py", "illegal-memory-access"),
             _fix("Or rerun with synchronous launches to see which operation fails", "", "CUDA_LAUNCH_BLOCKING=1 python train.py", "illegal-memory-access"),
             _fix("Bounds-check the kernel and pass contiguous inputs", "If it fails only above some input size, its offsets overflow: keep inputs "
                  "smaller until it uses 64-bit offsets.", "x = x.contiguous()", "illegal-memory-access")),
            prior=0.25,
            cues={"large_input": 3.0, "upgrade": 0.8},
            outcomes=frozenset({"cuda.illegal_memory_access_custom", "cuda.misaligned_address"}),
        ),
        Alternative(
            "ima.bad_indices",
            "An index out of range reaches an operation that does not check it (some fused or third-party ops, attention kernels given "
            "inconsistent sequence lengths, sparse ops), and the kernel reads an arbitrary address.",
            "Run the same batch on the CPU, or rerun with CUDA_LAUNCH_BLOCKING=1, and compare the largest index with the size it indexes.",
            (_fix("Validate indices and lengths before the call", "", "assert 0 <= idx.min() and idx.max() < t.size(dim)", "illegal-memory-access"),
             _fix("Localise the failing operation", "", "CUDA_LAUNCH_BLOCKING=1 python train.py", "async-cuda-errors")),
            prior=0.35,
            cues={"custom_data": 1.5, "tokenizer": 1.5},
            outcomes=frozenset({"cuda.illegal_memory_access"}),
        ),
        Alternative(
            "ima.wrong_device",
            "An extension kernel runs on the current CUDA device while its tensors live on another GPU, so the addresses it uses are not "
            "valid on the device it runs on.",
            "Does it fail only when the tensors are on a GPU other than the first? Print x.device and torch.cuda.current_device() right before the call.",
            (_fix("Run the kernel on its input's device", "In your own extension, add a device guard at each entry point; from Python, wrap the call.",
                  "with torch.cuda.device(x.device):\n    out = ext_op(x)", "illegal-memory-access"),),
            prior=0.08,
            cues={"multi_gpu": 5.0},
            outcomes=frozenset({"cuda.illegal_memory_access_device"}),
        ),
        Alternative(
            "ima.build_or_hardware",
            "Something below your code: a bug in a library's own CUDA kernel (an extension package's op, fixed in a later release), an "
            "extension built against another PyTorch or CUDA version, a driver bug, or less often a faulty GPU (failures that move between "
            "runs or stay with one card).",
            "Does the failing op come from an extension package, did it start after upgrading PyTorch, CUDA or the driver, and does it follow one "
            "machine? Swap the op for the torchvision/PyTorch equivalent or upgrade its package; rebuild extensions; rerun on another GPU.",
            (_fix("Upgrade the package whose kernel fails, or use the torchvision/PyTorch equivalent of its op", "",
                  "pip install -U <library>", "illegal-memory-access"),
             _fix("Rebuild compiled extensions for the installed versions", "Then compare on another GPU; check its error counters.",
                  "pip install --no-build-isolation --force-reinstall --no-cache-dir <extension>\nnvidia-smi -q -d ECC", "illegal-memory-access")),
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
            "The process runs where it cannot see a GPU: no NVIDIA driver there, a container or job started without GPU access, or "
            "CUDA_VISIBLE_DEVICES empty, naming no device, or written in a form CUDA cannot read (brackets, device names).",
            "Run nvidia-smi and echo $CUDA_VISIBLE_DEVICES in the same place the script runs (inside the container or the job), not on the host or login node.",
            (_fix("Give the process a GPU", "Containers need GPU access at start; scheduled jobs must request a GPU; set CUDA_VISIBLE_DEVICES before Python "
                  "starts, as comma-separated indices (CUDA_VISIBLE_DEVICES=0,1).",
                  "docker run --gpus all ...\nsrun --gres=gpu:1 python train.py", "cuda-unavailable"),),
            prior=0.35,
            cues={"container": 3.0, "colab": 2.0, "wsl": 2.0, "upgrade": 0.6, "driver_update": 0.5, "suspend": 0.3},
            outcomes=frozenset({"devices.no_gpu_visible", "cuda.visible_devices_invalid"}),
        ),
        Alternative(
            "cuda.driver_state",
            "The driver is out of step, in a bad state or not ready: it (or CUDA) was updated without a reboot, the machine came back from suspend, "
            "an earlier crash left the GPU unusable, or on an NVSwitch server (DGX/HGX class) the NVIDIA Fabric Manager service of the driver's "
            "version is not running, so CUDA reports the system as not yet initialized.",
            "Does nvidia-smi itself work, and did this start after a driver update or a suspend? If a reboot makes it pass, this was it. On NVSwitch "
            "servers, run systemctl status nvidia-fabricmanager.",
            (_fix("Reboot, or reload the NVIDIA kernel modules", "nvidia-smi must work before PyTorch can use the GPU.", "nvidia-smi", "cuda-unavailable"),
             _fix("After a suspend, reload the unified memory module", "", "sudo rmmod nvidia_uvm && sudo modprobe nvidia_uvm", "cuda-unavailable")),
            prior=0.3,
            cues={"driver_update": 6.0, "upgrade": 2.5, "suspend": 6.0, "wsl": 1.5, "container": 0.7},
            outcomes=frozenset({"devices.cuda_unknown_error", "cuda.unknown_error_at_start", "devices.nvml_mismatch", "cuda.system_not_ready"}),
        ),
        Alternative(
            "cuda.visible_devices",
            "The GPU index the code asks for does not exist in this process: CUDA_VISIBLE_DEVICES renumbers the visible cards from zero, was "
            "changed after CUDA had started, or more processes were launched than there are GPUs.",
            "Print os.environ.get('CUDA_VISIBLE_DEVICES') and torch.cuda.device_count() at the top of the script, and search the code for where it "
            "sets CUDA_VISIBLE_DEVICES or a fixed cuda index.",
            (_fix("Use indices below the visible count, set before CUDA starts", "",
                  "torch.cuda.set_device(local_rank % torch.cuda.device_count())", "cuda-unavailable"),),
            prior=0.15,
            cues={"multi_gpu": 3.0, "multi_node": 1.5},
            outcomes=frozenset({"devices.invalid_ordinal"}),
        ),
        Alternative(
            "cuda.build_driver",
            "The installed PyTorch build and the driver do not fit: a CPU-only wheel, or a wheel built for a newer CUDA than the driver supports.",
            "Print torch.__version__ and torch.version.cuda in the interpreter that runs the job and compare with the CUDA version in nvidia-smi's header.",
            (_fix("Install a CUDA build the driver supports, or update the driver", "",
                  "python -c \"import torch, sys; print(sys.executable, torch.__version__, torch.version.cuda)\"\nnvidia-smi", "cuda-unavailable"),),
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
            "The ranks stopped running the same collectives: one rank has more batches than the others (an uneven split of the data), or code "
            "that runs on some ranks only (evaluation, logging or saving under a rank check) contains a collective.",
            "Print len(loader) on every rank, and look for barrier, all_reduce, all_gather or a DDP forward inside code guarded by a rank check.",
            (_fix("Give every rank the same number of batches", "", "sampler = DistributedSampler(ds, drop_last=True)\nloader = DataLoader(ds, sampler=sampler, batch_size=bs)", "nccl-timeout"),
             _fix("Keep collectives out of rank-only code", "Rank-0 work runs on the unwrapped module, then every rank meets at a barrier.",
                  "if rank == 0:\n    evaluate(model.module)   # no collectives inside\ndist.barrier()", "nccl-timeout")),
            prior=0.35,
            cues={"rank0_only": 5.0, "evaluation": 2.5},
            outcomes=frozenset({"distributed.nccl_timeout", "symptoms.distributed_hang", "distributed.collective_mismatch"}),
        ),
        Alternative(
            "nccl.slow_or_dead_rank",
            "One rank crashed, was killed, or is far slower than the others (its own exception or memory error, a stuck data loader, a long save "
            "or evaluation), and the rest waited for it in the next collective.",
            "Read every rank's log for the first traceback, “Killed” or out-of-memory message, and note which rank stopped printing first.",
            (_fix("Find the rank that did not arrive and fix its own error", "", None, "nccl-timeout"),
             _fix("Raise the timeout only for steps that are legitimately slow", "",
                  "dist.init_process_group('nccl', timeout=datetime.timedelta(minutes=30))", "nccl-timeout")),
            prior=0.25,
            cues={"saving": 4.0, "evaluation": 2.0, "resume": 1.5},
            outcomes=frozenset({"distributed.peer_closed", "distributed.nccl_remote_error", "distributed.nccl_aborted", "distributed.nccl_unique_id"}),
        ),
        Alternative(
            "nccl.transport",
            "The ranks cannot reach each other: NCCL picked a network interface that does not route between them, a firewall blocks it, or the "
            "InfiniBand or GPU peer-to-peer path does not work on this machine or in this container.",
            "Run a minimal all_reduce script with NCCL_DEBUG=INFO; if it fails too, retry with NCCL_P2P_DISABLE=1, NCCL_IB_DISABLE=1 or NCCL_SOCKET_IFNAME set.",
            (_fix("Find the broken path with NCCL's switches", "Switching one path off at a time shows which one fails; then fix the system.",
                  "NCCL_DEBUG=INFO NCCL_P2P_DISABLE=1 torchrun ...\nNCCL_IB_DISABLE=1 torchrun ...\nNCCL_SOCKET_IFNAME=eth0 torchrun ...", "nccl-errors"),),
            prior=0.2,
            # Not "first_step": "immediately" in a report rarely means the first collective, and the rule reads that from the sequence number.
            cues={"multi_node": 4.0, "container": 2.0, "wsl": 2.0, "later_in_training": 0.4},
            outcomes=frozenset({"distributed.nccl_timeout_first_collective", "distributed.nccl_system_error"}),
        ),
        Alternative(
            "nccl.shared_memory",
            "The container gives NCCL too little shared memory (/dev/shm) for its transport between GPUs on the same machine.",
            "Run df -h /dev/shm inside the container: a small size there points at this.",
            (_fix("Give the container more shared memory", "", "docker run --shm-size=16g ...   # or --ipc=host", "nccl-errors"),),
            prior=0.03,
            cues={"container": 5.0, "multi_node": 0.5},
        ),
    ),
    decisive=frozenset({"distributed.collective_mismatch", "distributed.duplicate_gpu", "distributed.nccl_cpu_tensor"}),
    plain=frozenset({"distributed.nccl_timeout", "symptoms.distributed_hang", "distributed.nccl_remote_error", "distributed.nccl_aborted"}),
)

DDP = Family(
    alternatives=(
        Alternative(
            "ddp.unused_parameters",
            "Some parameters never receive a gradient: a layer built in __init__ but not used in forward, or an output of forward left out of the loss.",
            "On one process, run a step without DDP and print the names of trainable parameters whose .grad is still None after backward.",
            (_fix("Use or remove the parameters that get no gradient", "Or freeze them before wrapping the model.",
                  "print([n for n, p in model.named_parameters() if p.requires_grad and p.grad is None])", "ddp-unused-parameters"),
             _fix("If the model really skips parts, let DDP look for them", "It costs an extra pass over the graph.",
                  "model = DDP(model, device_ids=[local_rank], find_unused_parameters=True)", "ddp-unused-parameters")),
            prior=0.5,
            cues={"different_model": 2.0, "later_in_training": 0.4},
            outcomes=frozenset({"distributed.ddp_unused"}),
        ),
        Alternative(
            "ddp.changing_graph",
            "The set of parameters used changes between steps, or changed after DDP was built: a branch that depends on the data or the epoch, "
            "layers dropped at random, or parts frozen or unfrozen after wrapping.",
            "Does it start only after some steps or epochs, or right after you change requires_grad? Unused parameter names that differ between "
            "steps under TORCH_DISTRIBUTED_DEBUG=DETAIL confirm it.",
            (_fix("Let DDP find unused parameters every step, or rebuild the wrapper after changing what trains", "",
                  "model = DDP(model.module, device_ids=[local_rank], find_unused_parameters=True)", "ddp-unused-parameters"),),
            prior=0.2,
            cues={"later_in_training": 4.0, "first_step": 0.4},
        ),
        Alternative(
            "ddp.reentrant_checkpoint",
            "A parameter takes part in more than one backward pass of the same step: activation checkpointing in reentrant mode, or weights "
            "shared between checkpointed blocks.",
            "Does the model use torch.utils.checkpoint (or a gradient-checkpointing option)? Turning it off for one run makes the error go away if so.",
            (_fix("Use non-reentrant checkpointing, or declare the graph static", "",
                  "torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)\n# or: DDP(model, device_ids=[local_rank], static_graph=True)", "ddp-unused-parameters"),),
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
            "DataLoader workers each end up with their own copy of the dataset's Python objects: reading a list or dict of samples in a forked "
            "worker updates reference counts, so the shared pages are copied one by one, and memory grows with the number of workers.",
            "Run with num_workers=0 (or fewer workers) and watch free -h: memory that stays flat then points at the workers' copies.",
            (_fix("Keep the dataset's state in arrays, and use fewer workers", "Arrays are single objects, so workers share their pages.",
                  "self.paths = np.array(paths)   # instead of a list of strings", "cpu-oom"),),
            prior=0.3,
            cues={"workers_zero_ok": 5.0, "later_in_training": 1.5, "resume": 0.5, "tried_workers": 0.2, "evaluation": 0.7},
        ),
        Alternative(
            "cpu.data_in_ram",
            "Too much is built in host memory at once: the whole dataset, or a large array made from it, instead of sample by sample; "
            "or, when it fails in evaluation, an evaluation step larger than a training step (a bigger evaluation batch, whole uncropped "
            "inputs, or every prediction of the split gathered before the metric is computed).",
            "Check how much RAM the process uses right after the dataset is built: most of it in use already points at the data. If it "
            "fails only in evaluation, print the evaluation batch's shape and retry with a much smaller evaluation batch.",
            (_fix("Read samples lazily, or memory-map large arrays", "A smaller dtype also helps.",
                  "arr = np.load('data.npy', mmap_mode='r')", "cpu-oom"),
             _fix("If it fails in evaluation, shrink one evaluation step", "Lower the evaluation batch size (often its own setting, separate "
                  "from the training batch size) or the evaluation input size, and keep running sums instead of concatenating every output.",
                  "with torch.inference_mode():\n    out = model(x)\ntotal += metric_fn(out, y).item()", "cpu-oom")),
            prior=0.25,
            # Evaluation-time failures (no growth story) are mostly one evaluation step that is too large.
            cues={"first_step": 2.0, "custom_data": 1.5, "multi_gpu": 1.5, "later_in_training": 0.5, "after_n_items": 0.2, "evaluation": 3.0,
                  "large_input": 1.5},
            outcomes=frozenset({"memory.cpu_oom", "memory.cpu_oom_allocator", "memory.cpu_oom_numpy", "memory.cpu_oom_killed", "memory.cpu_oom_memoryerror",
                                "symptoms.process_killed", "mp.child_killed", "distributed.child_killed"}),
        ),
        Alternative(
            "cpu.checkpoint_load",
            "Loading a checkpoint or building the model on the CPU needs its full size in RAM at once, and every process on the machine does "
            "it at the same time.",
            "Does it die while the model or checkpoint loads, and does a single process get through? Watch free -h during loading.",
            (_fix("Memory-map the checkpoint and build the model without a CPU copy", "",
                  "sd = torch.load(path, mmap=True, weights_only=True, map_location='cpu')\nwith torch.device('meta'):\n    model = Net()\n"
                  "model.load_state_dict(sd, assign=True)", "cpu-oom"),),
            prior=0.12,
            cues={"resume": 5.0, "loading_weights": 4.0, "multi_gpu": 2.0, "first_step": 1.5, "later_in_training": 0.3},
        ),
        Alternative(
            "cpu.growth",
            "Something accumulates every step: tensors, predictions or losses appended to Python lists, caches in the dataset, or metric "
            "objects that collect every batch's predictions and are never reset.",
            "Log the process's resident memory every few steps: a steady climb means something is kept across iterations.",
            (_fix("Keep plain numbers across steps, and measure what grows", "",
                  "running_loss += loss.item()\nprint(psutil.Process().memory_info().rss / 2**30, 'GiB')", "memory-growth-training-loop", "cpu-oom"),
             _fix("Reset what collects results", "Metric objects and result lists that gather every batch keep growing until cleared: call "
                  "metric.reset() (or empty the list) after each evaluation, and store detached values.",
                  "metric.update(pred.detach(), target)\n...\nmetric.reset()   # after each evaluation", "memory-growth-training-loop")),
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
            "The GPU was nearly full when cuDNN needed memory for its handle or workspace, so it reported a status instead of an out-of-memory error.",
            "Rerun with a much smaller batch and print torch.cuda.memory_summary() just before the failing layer (nvidia-smi for other processes): "
            "if the error goes away, it was memory.",
            (_fix("Rule out memory first", "Lower the batch size; disabling cuDNN once turns a disguised failure into a plain out-of-memory error.",
                  "torch.backends.cudnn.enabled = False   # one run, to see the real error", "cudnn-errors"),),
            prior=0.4,
            cues={"large_input": 2.5, "colab": 1.3, "new_gpu": 0.6},
            outcomes=frozenset({"cuda.cudnn_no_memory", "cuda.cudnn_no_algorithm", "cuda.cudnn_internal_error"}),
        ),
        Alternative(
            "cudnn.earlier_error",
            "An earlier kernel failed (an index or label out of range, an illegal memory access), and the error surfaced in the next cuDNN call.",
            "Rerun with CUDA_LAUNCH_BLOCKING=1, or run the batch on the CPU: a different, earlier error there is the real one.",
            (_fix("Localise the first failing kernel", "", "CUDA_LAUNCH_BLOCKING=1 python train.py", "async-cuda-errors"),
             _fix("Check labels and indices", "", "assert 0 <= y.min() and y.max() < num_classes", "device-side-assert")),
            prior=0.2,
            cues={"custom_data": 1.8, "different_model": 1.5},
            outcomes=frozenset({"cuda.cudnn_execution_failed", "cuda.cudnn_mapping_error"}),
        ),
        Alternative(
            "cudnn.unsupported_input",
            "cuDNN does not accept these inputs: a non-contiguous tensor after a permute or transpose, a dtype or memory layout the algorithm "
            "lacks, or sizes too large for its indexing.",
            "Print x.shape, x.dtype and x.is_contiguous() for the failing layer's input, and retry with x.contiguous() or a smaller batch.",
            (_fix("Make inputs contiguous and of a supported dtype", "", "x = x.contiguous()", "cudnn-errors"),
             _fix("Try another algorithm choice", "Toggling autotuning changes the algorithm cuDNN picks.", "torch.backends.cudnn.benchmark = False", "cudnn-errors")),
            prior=0.2,
            cues={"mixed_precision": 2.0, "large_input": 2.5},
            outcomes=frozenset({"cuda.cudnn_bad_param", "cuda.cudnn_not_supported"}),
        ),
        Alternative(
            "cudnn.install_mismatch",
            "The cuDNN that is loaded does not fit this GPU or this PyTorch build: a copy on the library path shadows the wheel's, the driver is "
            "too old, or the build predates the card.",
            "Print torch.version.cuda, torch.backends.cudnn.version() and torch.cuda.get_device_capability(), and look for other cuDNN copies on LD_LIBRARY_PATH.",
            (_fix("Use the cuDNN the wheel ships, on a driver that supports it", "Reinstalling the official wheel usually fixes mixed libraries.",
                  "python -c \"import torch; print(torch.version.cuda, torch.backends.cudnn.version(), torch.cuda.get_device_capability())\"", "cudnn-errors"),),
            prior=0.12,
            cues={"upgrade": 3.0, "new_gpu": 5.0, "driver_update": 2.0, "container": 1.3},
            outcomes=frozenset({"cuda.cudnn_arch_mismatch", "cuda.cudnn_version_mismatch"}),
        ),
    ),
    decisive=frozenset({"cuda.cudnn_arch_mismatch", "cuda.cudnn_version_mismatch", "cuda.cudnn_rnn_eval", "cuda.visible_devices_invalid"}),
    plain=frozenset({"cuda.cudnn_internal_error"}),
)

CUBLAS = Family(
    alternatives=(
        Alternative(
            "cublas.out_of_memory",
            "The GPU was already full when cuBLAS needed memory for its handle or workspace: an out-of-memory error that surfaces as a cuBLAS status.",
            "Watch nvidia-smi and print torch.cuda.memory_summary() before the failing matmul; a much smaller batch passing confirms it.",
            (_fix("Treat it as out of memory", "Reduce the batch, free cached tensors, and give each process its own GPU.",
                  "torch.cuda.set_device(local_rank)", "cublas-errors"),),
            prior=0.3,
            cues={"large_input": 2.0, "multi_gpu": 1.3, "new_gpu": 0.6},
            outcomes=frozenset({"cuda.cublas_no_memory", "cuda.cublas_internal_error"}),
        ),
        Alternative(
            "cublas.earlier_error",
            "An earlier kernel failed, most often an id beyond an embedding table or a label out of range just before a linear layer, and the "
            "matmul only reported it.",
            "Run the same batch on the CPU (or with CUDA_LAUNCH_BLOCKING=1): an IndexError or another earlier error there is the real cause.",
            (_fix("Find the real failing operation", "", "CUDA_LAUNCH_BLOCKING=1 python train.py\n# or: out = model.cpu()(x.cpu())", "cublas-errors"),),
            prior=0.3,
            cues={"tokenizer": 3.0, "embedding_code": 2.0, "custom_data": 1.5, "different_model": 1.5},
            outcomes=frozenset({"cuda.cublas_execution_failed"}),
        ),
        Alternative(
            "cublas.build_gpu",
            "This GPU and the build or routine do not fit: a dtype the card lacks (bfloat16 on older GPUs), or a PyTorch or extension build "
            "made for an older CUDA than the card's architecture.",
            "Print torch.cuda.get_device_capability(), torch.cuda.get_arch_list(), torch.version.cuda and torch.cuda.is_bf16_supported().",
            (_fix("Use a dtype the GPU supports, and a build that includes its architecture", "",
                  "print(torch.cuda.get_device_capability(), torch.cuda.is_bf16_supported(), torch.cuda.get_arch_list())", "cublas-errors"),),
            prior=0.15,
            cues={"new_gpu": 5.0, "mixed_precision": 2.0, "upgrade": 2.0},
            outcomes=frozenset({"cuda.cublas_not_supported", "cuda.cublas_arch_mismatch"}),
        ),
        Alternative(
            "cublas.sizes",
            "The matrix sizes or strides are outside what the routine accepts: a dimension of zero, sizes beyond the integer range it indexes with, or oddly "
            "strided operands from custom code.",
            "Print the shapes, strides and dtypes of the matmul's operands right before the call.",
            (_fix("Make the operands contiguous, and split very large batched products", "", "print(a.shape, a.stride(), b.shape, b.stride(), a.dtype)", "cublas-errors"),),
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
            "The machine itself is unstable under sustained load: power delivery cannot keep up with the GPUs (a power supply without enough "
            "headroom, loose power cables or risers), or system memory flips bits (a failing RAM module, an XMP/EXPO or overclocked profile), so "
            "processes crash at varying points while the same code runs fine elsewhere.",
            "Cap the GPUs' power draw or train on one GPU at a time; for crashes at varying points, run memtest86+ and return memory to stock "
            "settings. If the failures stop, that part is the cause.",
            (_fix("Test with a lower power limit, then check the supply and the cables", "", "sudo nvidia-smi -pl <watts>", "gpu-hardware-faults"),
             _fix("Test the RAM and return it to stock settings", "Disable XMP/EXPO and overclocks; test the modules one at a time.",
                  "sudo memtester 4G 2", "gpu-hardware-faults")),
            prior=0.22,
            cues={"multi_gpu": 1.8, "later_in_training": 1.3},
            outcomes=frozenset({"cuda.hardware_machine_reboot", "scheduler.segfault_unstable_hardware"}),
        ),
        Alternative(
            "hw.faulty_device",
            "One GPU, its slot or its machine is failing: the fault follows that device, not the code or the data.",
            "Does it always happen on the same GPU index or node? Check dmesg for Xid messages and the card's error counters, and rerun the job on another device.",
            (_fix("Collect the evidence and move the job", "Resume from the last checkpoint elsewhere; leave the device out meanwhile.",
                  "sudo dmesg -T | grep -i -E 'xid|nvrm'\nnvidia-smi -q -d ECC", "gpu-hardware-faults"),),
            prior=0.3,
            cues={"specific_node": 5.0, "multi_node": 1.5},
            outcomes=frozenset({"cuda.hardware", "scheduler.node_failure", "cuda.hardware_ecc"}),
        ),
        Alternative(
            "hw.overheating",
            "The GPU overheats under load and its protection or the driver stops it.",
            "Log temperature and power until it fails; readings near the card's limit just before the failure confirm it.",
            (_fix("Log temperatures and improve cooling", "", "nvidia-smi --query-gpu=temperature.gpu,power.draw --format=csv -l 5 > gpu.log", "gpu-hardware-faults"),),
            prior=0.15,
            cues={"overheat": 6.0, "later_in_training": 1.8, "first_step": 0.5},
        ),
        Alternative(
            "hw.driver_or_software",
            "The driver or its firmware is in a bad state, or a software fault is reported as a hardware one: a driver updated without a reboot, "
            "a GPU left wedged by an earlier crash, or an application error (an illegal access) that the kernel log also records.",
            "Did it start after a driver update or an earlier crash? Reboot, then run a small CUDA test and the same job; the same failure on every "
            "machine points at the code.",
            (_fix("Reboot after driver updates, then test CUDA alone", "", "nvidia-smi\npython -c \"import torch; print(torch.zeros(1).cuda())\"", "gpu-hardware-faults"),),
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
            "A DataLoader worker uses CUDA: the dataset's __getitem__, a transform or the collate function moves data to the GPU or runs a "
            "GPU model, or the dataset holds tensors that already live on the GPU, while the main process has started CUDA before forking the workers.",
            "Does it pass with num_workers=0? Then search __getitem__, the transforms and collate_fn for .cuda(), .to(device) and device= arguments.",
            (_fix("Keep the workers on the CPU and move whole batches in the loop", "",
                  "loader = DataLoader(ds, batch_size=bs, num_workers=4, pin_memory=True)\nfor x, y in loader:\n    x = x.to('cuda', non_blocking=True)", "cuda-fork-reinit"),
             _fix("If the workers really need the GPU, start them with spawn", "Spawned workers import the script afresh: guard its entry point.",
                  "DataLoader(ds, num_workers=2, multiprocessing_context='spawn')", "cuda-fork-reinit")),
            prior=0.55,
            cues={"workers_zero_ok": 6.0, "dataloader": 4.0, "custom_data": 1.5, "own_pool": 0.3},
            outcomes=frozenset({"mp.cuda_fork"}),
        ),
        Alternative(
            "mp.pool_after_cuda",
            "The parent process started CUDA (even a device query or moving the model to the GPU) before forking a multiprocessing pool or "
            "Process whose work uses CUDA.",
            "Is the error raised in a Pool or Process you start yourself? Find the first CUDA call in the parent before it starts; with the spawn "
            "start method the error goes away.",
            (_fix("Use the spawn start method for processes that need CUDA", "",
                  "import torch.multiprocessing as mp\nif __name__ == '__main__':\n    mp.set_start_method('spawn', force=True)", "cuda-fork-reinit"),
             _fix("Or start the pool before the parent touches CUDA", "", None, "cuda-fork-reinit")),
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
