"""The common causes of each error family that has more than one, as data.

Each :class:`Alternative` is one branch of a family: its cause (worded for the family: no number,
name or shape that the facts do not give), one check that confirms or rules it out, its fixes with
the documents that back them, a prior share among the family's causes, and how context cues move
it (likelihood ratios: 4.0 makes it four times as likely, 0.3 a third).

``outcomes`` ties an alternative to the rule branches that *are* that cause: when a rule lands on
one, the rule's own cause (in the user's numbers) stands for the alternative and gains weight.
``decisive`` outcomes are read from facts that leave no other story (a key prefix seen in the keys,
a single request larger than the card): the diagnosis keeps one hypothesis.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Mapping

from assistant.types import Fix


@dataclass(frozen=True)
class Alternative:
    """One common cause of an error family."""

    id: str
    cause: str
    check: str
    fixes: tuple[Fix, ...]
    prior: float
    cues: Mapping[str, float] = field(default_factory=dict)
    outcomes: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Family:
    """The alternatives of one category, and the rule outcomes that settle it on their own."""

    alternatives: tuple[Alternative, ...]
    decisive: frozenset[str] = frozenset()
    # The family's plain reading of its message (any OOM gives "memory.cuda_oom"): no evidence for one branch over another.
    plain: frozenset[str] = frozenset()

    def covers(self, outcome: str | None) -> bool:
        """Whether a rule outcome belongs to this family's differential (None: no rule, the category alone)."""
        return outcome is None or outcome in self.decisive or any(outcome in a.outcomes for a in self.alternatives)


def _fix(title: str, detail: str, code: str | None, *docs: str) -> Fix:
    return Fix(title, detail, code, tuple(docs))


CUDA_OOM = Family(
    alternatives=(
        Alternative(
            "oom.peak_too_large",
            "One training step needs more memory at its peak than the GPU has free: the batch's activations plus weights, gradients "
            "and optimizer state do not fit.",
            "Run one step with half the batch and print torch.cuda.max_memory_allocated(): a peak close to the card's capacity means the step is simply too big.",
            (_fix("Shrink the micro-batch and keep the effective batch with gradient accumulation", "Divide the loss by the number of accumulated steps.",
                  "loss = loss_fn(model(x), y) / accum\nloss.backward()\nif (i + 1) % accum == 0:\n    opt.step(); opt.zero_grad(set_to_none=True)", "cuda-oom"),
             _fix("Use bf16 autocast or activation checkpointing", "Both cut activation memory without changing the model.",
                  'with torch.autocast("cuda", dtype=torch.bfloat16):\n    loss = loss_fn(model(x), y)', "cuda-oom")),
            prior=0.45,
            # "Reduced the batch and it still happens": the step's batch-dependent size is not what runs out.
            cues={"first_step": 2.0, "later_in_training": 0.35, "resume": 0.4, "evaluation": 0.6, "after_n_items": 0.3, "tried_batch": 0.3,
                  "model_offloaded": 1.5},
            outcomes=frozenset({"memory.cuda_oom", "memory.cuda_oom_bare", "memory.cuda_oom_batch_one", "memory.mps_oom"}),
        ),
        Alternative(
            "oom.growth",
            "Memory grows from step to step until it runs out: something keeps tensors that still carry their graphs alive across "
            "iterations (a running loss summed as a tensor, outputs or logits appended to a list, metric objects that collect every "
            "batch's predictions and are never reset, a cache).",
            "Print torch.cuda.memory_allocated() after every step: a steady climb means something is kept; a flat line rules this out.",
            (_fix("Keep plain numbers across steps, not tensors", "Log loss.item(); detach (and move to CPU) anything you store; del per-step "
                  "outputs once they are used.", "running_loss += loss.item()\nkept.append(logits.detach().cpu())\ndel out, loss",
                  "memory-growth-training-loop"),
             _fix("Reset what collects results", "Metric objects and result lists that gather every batch must be cleared (metric.reset()) after "
                  "each evaluation, and fed detached tensors.", "metric.update(pred.detach(), target)\n...\nmetric.reset()   # after each evaluation",
                  "memory-growth-training-loop")),
            prior=0.18,
            # Failing only after N images/iterations is growth; a smaller batch only delays it.
            cues={"later_in_training": 4.0, "first_step": 0.2, "after_n_items": 6.0, "evaluation": 1.5, "tried_batch": 1.5},
            outcomes=frozenset({"memory.cuda_oom_growth"}),
        ),
        Alternative(
            "oom.resume_checkpoint",
            "The checkpoint being resumed was loaded onto the GPU: torch.load without map_location restores every saved tensor "
            "(weights and optimizer state) onto the device it was saved from, beside the model already there; in a multi-GPU job "
            "each process adds its own copy to that same device.",
            "Did this start when resuming from a checkpoint? Watch nvidia-smi while it loads: one GPU holding far more memory than the others confirms it.",
            (_fix("Load the checkpoint onto the CPU, then into the model", "load_state_dict copies into tensors already on their devices; drop the dict afterwards.",
                  'ckpt = torch.load(path, map_location="cpu")\nmodel.load_state_dict(ckpt["model"])\noptimizer.load_state_dict(ckpt["optimizer"])\ndel ckpt', "cuda-oom"),),
            prior=0.03,
            cues={"resume": 14.0, "multi_gpu": 2.0, "first_step": 1.2, "later_in_training": 0.5},
        ),
        Alternative(
            "oom.eval_with_grad",
            "Evaluation runs with autograd on: without torch.no_grad() (or inference_mode) every forward pass records its graph and "
            "keeps its activations for a backward that never comes, so validation needs far more memory than training.",
            "Does it fail only in the validation or test loop? Check that the loop runs under torch.no_grad() or torch.inference_mode().",
            (_fix("Evaluate without autograd", "model.eval() changes layers' behaviour; it does not stop autograd.",
                  "model.eval()\nwith torch.inference_mode():\n    out = model(x)", "cuda-oom"),),
            prior=0.08,
            cues={"evaluation": 6.0, "first_step": 0.8},
            outcomes=frozenset({"memory.cuda_oom_eval"}),
        ),
        Alternative(
            "oom.eval_larger_inputs",
            "Evaluation feeds the model more per step than training does: whole images or volumes instead of training crops, longer "
            "sequences, or a larger evaluation batch, so one evaluation forward pass needs more memory than a training step.",
            "Print the input shape in the training and the evaluation loop: a larger image size, sequence length or batch in evaluation "
            "(or one very large sample) confirms it.",
            (_fix("Run inference on tiles or windows", "Sliding-window (tiled) inference or chunked sequences bound the memory of one forward "
                  "pass whatever the input size; many toolkits have a slide/tile mode for testing.",
                  "outs = [model(x[..., i:i + tile]) for i in range(0, x.shape[-1], stride)]   # then stitch", "cuda-oom"),
             _fix("Cap the evaluation input size", "Resize or crop evaluation inputs to a size the card handles, or skip outliers that are far larger than the rest.",
                  None, "cuda-oom"),
             _fix("Evaluate without autograd and with a smaller evaluation batch", "", "with torch.inference_mode():\n    out = model(x)", "cuda-oom")),
            prior=0.05,
            # Reducing the batch did not help: one evaluation sample is itself too large.
            cues={"evaluation": 8.0, "tried_batch": 2.0, "large_input": 2.0, "after_n_items": 0.5},
        ),
        Alternative(
            "oom.fragmentation",
            "Enough memory is free in total but split into pieces the allocator cannot join: varying batch shapes (sequence lengths, "
            "image sizes) leave reserved blocks that no single request fits.",
            "Compare “reserved but unallocated” in the message with the size it tried to allocate, or run once with "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.",
            (_fix("Let the allocator grow segments instead of splitting them", "Set it before the process starts.",
                  "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python train.py", "cuda-oom-fragmentation"),),
            prior=0.05,
            # Failing only in evaluation points at what evaluation does differently, not at the cache's layout.
            cues={"later_in_training": 1.6, "tried_allocator": 0.2, "evaluation": 0.5},
            outcomes=frozenset({"memory.cuda_oom_fragmented"}),
        ),
        Alternative(
            "oom.other_process",
            "Another process holds memory on the same GPU: a second job, a stale notebook kernel, or distributed ranks that all "
            "create a context on the first device.",
            "Run nvidia-smi while the job starts: any process besides yours on that GPU (or several of your ranks on one GPU) confirms it.",
            (_fix("Free the card or pick another", "In distributed jobs, pin each rank to its own GPU before any CUDA work.",
                  "torch.cuda.set_device(local_rank)", "cuda-oom"),),
            prior=0.05,
            cues={"colab": 1.5, "multi_gpu": 1.6, "visible_devices": 1.5},
            outcomes=frozenset({"memory.cuda_oom_other_processes"}),
        ),
        Alternative(
            "oom.visible_devices_not_applied",
            "CUDA_VISIBLE_DEVICES did not take effect for this process (set in another shell or command, after CUDA was initialised, "
            "or overridden by the launcher or the script), so the job runs on a GPU that is already busy instead of the one chosen.",
            "Verify that the variable reached the process: set it on the same line as the launch command, or print "
            "os.environ.get('CUDA_VISIBLE_DEVICES') and torch.cuda.device_count() at the top of the script. Inside the process the "
            "first visible GPU is always numbered 0, so compare nvidia-smi's usage of the physical GPU you chose.",
            (_fix("Set CUDA_VISIBLE_DEVICES on the launch line itself", "An export typed in another terminal or before a wrapper that resets "
                  "the environment does not reach the process; inline, it applies to exactly this command.",
                  "CUDA_VISIBLE_DEVICES=<gpu id> python train.py", "cuda-oom"),
             _fix("Or set it in the script before anything touches CUDA", "Once CUDA is initialised, changing the variable has no effect.",
                  'import os\nos.environ["CUDA_VISIBLE_DEVICES"] = "<gpu id>"   # before importing torch\nimport torch', "cuda-oom")),
            prior=0.01,
            cues={"visible_devices": 4.0},
            outcomes=frozenset({"memory.cuda_oom_visible_devices"}),
        ),
    ),
    decisive=frozenset({"memory.cuda_oom_impossible"}),
    plain=frozenset({"memory.cuda_oom", "memory.cuda_oom_bare", "memory.mps_oom"}),
)

STATE_DICT = Family(
    alternatives=(
        Alternative(
            "state_dict.architecture",
            "The checkpoint was saved from a model built differently from the one loading it: another config, depth, width or "
            "number of classes, or layers renamed or moved.",
            "Compare the listed keys' shapes: model.state_dict()[k].shape against the checkpoint's, and the config used at save time against yours.",
            (_fix("Build the model with the config the checkpoint was saved with", "Or load only the matching layers and train the rest.", None, "state-dict-keys"),),
            prior=0.45,
            cues={"different_model": 3.0, "upgrade": 0.5},
            outcomes=frozenset({"io.state_dict", "io.state_dict_size", "io.state_dict_head_size"}),
        ),
        Alternative(
            "state_dict.library_version",
            "A library version changed between saving and loading: the package that defines the model added, renamed or stopped "
            "saving a parameter or buffer, so a few keys differ while the architecture is the same.",
            "Did this start after upgrading a package? Compare its version at save time with `pip show <package>` now, and check "
            "whether the differing keys are buffers rather than weights.",
            (_fix("Load with the version that saved it, or re-save", "Install the saving version once, load, and save again with the new one.", None, "state-dict-keys"),
             _fix("If only buffers differ, load non-strictly and check what was skipped", "",
                  "res = model.load_state_dict(sd, strict=False)\nassert not res.missing_keys, res.missing_keys", "state-dict-keys")),
            prior=0.15,
            cues={"upgrade": 7.0, "different_model": 0.6},
            outcomes=frozenset({"io.state_dict_buffers", "io.state_dict_bn_counters"}),
        ),
        Alternative(
            "state_dict.partial",
            "The weights cover only part of the model (a pretrained backbone or encoder loaded into a model with a new head), or "
            "the other way round.",
            "Are all the missing or unexpected keys under one submodule (the head, the classifier)? Then this is a partial load.",
            (_fix("Load the shared part non-strictly and check the rest is new", "",
                  "res = model.load_state_dict(sd, strict=False)\nprint(res.missing_keys)   # only the new head's keys", "state-dict-keys"),),
            prior=0.15,
            cues={"different_model": 2.0},
        ),
        Alternative(
            "state_dict.stale_checkpoint",
            "The file loaded is not the one meant: a checkpoint left by an earlier run (another dataset, number of classes or config) is picked "
            "up automatically through a resume or pretrained path, or an output directory that is reused.",
            "Print the path that is actually loaded and its modification time: a file older than this run, or from another experiment, confirms it.",
            (_fix("Point the script at the right checkpoint, or remove the stale one", "Clear the resume/pretrained setting or use a fresh output "
                  "directory when the model changed.", "print(path)", "state-dict-size-mismatch"),),
            prior=0.08,
            cues={"resume": 3.0, "custom_data": 2.5, "different_model": 1.5, "upgrade": 0.5},
        ),
    ),
    decisive=frozenset({"io.state_dict_prefix", "io.state_dict_stripped", "io.state_dict_wrapped", "io.state_dict_old", "io.optimizer_state",
                        "io.dict_not_model", "io.checkpoint_key"}),
    # Buffers alone differing suggests a version change, but a model variant can differ in buffers too: that branch is not weighted.
    plain=frozenset({"io.state_dict", "io.state_dict_buffers"}),
)

NAN_INF = Family(
    alternatives=(
        Alternative(
            "nan.fp16_overflow",
            "Half precision overflows: float16 holds values only up to about 65504, so large activations, logits or loss terms "
            "become inf and then NaN.",
            "Run the same steps with autocast disabled (float32) or in bfloat16: if the NaN goes away, it is float16 range.",
            (_fix("Use bfloat16, or keep the overflowing part in float32", "bf16 has float32's range; losses and softmax are safer in float32.",
                  'with torch.autocast("cuda", dtype=torch.bfloat16):\n    out = model(x)\nloss = loss_fn(out.float(), y)', "nan-loss-during-training"),),
            prior=0.15,
            cues={"mixed_precision": 6.0},
        ),
        Alternative(
            "nan.learning_rate",
            "The optimisation diverges: steps too large for this model and data (learning rate, no warmup, no gradient clipping) "
            "blow the weights up until the loss is no longer finite.",
            "Log the gradient norm every step: a climb or spike just before the NaN points here; the same run at a tenth of the learning rate stays finite.",
            (_fix("Clip gradients and lower or warm up the learning rate", "",
                  "torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)", "exploding-gradients"),),
            prior=0.35,
            cues={"learning_rate": 3.0, "later_in_training": 2.0, "first_step": 0.4},
            outcomes=frozenset({"symptoms.nan_after_steps", "autograd.nonfinite_norm"}),
        ),
        Alternative(
            "nan.bad_input_or_op",
            "A value that is not finite enters or is made in the forward pass: NaN or inf in the data, or an operation outside its "
            "domain (log of zero, sqrt of a negative, division by zero, exp of a large value).",
            "Check the batch with torch.isfinite(x).all(), and run one step under torch.autograd.set_detect_anomaly(True): it names the first operation that made a NaN.",
            (_fix("Find the first non-finite value", "", "torch.autograd.set_detect_anomaly(True)\nassert torch.isfinite(x).all()", "nan-inf-anomaly"),
             _fix("Keep operations inside their domain", "Clamp or add a small epsilon where a log, sqrt or division can hit zero.",
                  "torch.log(p.clamp_min(1e-8))", "nan-inf-anomaly")),
            prior=0.35,
            cues={"first_step": 3.0, "custom_data": 2.0, "later_in_training": 0.6},
            outcomes=frozenset({"symptoms.nan_from_start", "autograd.nan_anomaly"}),
        ),
        Alternative(
            "nan.anomaly_stops_scaler",
            "With float16 and a dynamic loss scaler, a step whose gradients overflow now and then is normal: the scaler skips it and "
            "lowers the scale. Anomaly detection raises on that NaN before the scaler can skip the step, turning it into a crash.",
            "Is anomaly detection switched on in the training code (set_detect_anomaly(True) / detect_anomaly())? Run without it and "
            "print the scaler's scale each step: occasional drops that recover mean the NaN steps were the expected skipped ones.",
            (_fix("Turn anomaly detection off for normal training", "Keep it for short debugging runs; it also slows training considerably.",
                  "torch.autograd.set_detect_anomaly(False)", "anomaly-detection"),),
            prior=0.04,
            cues={"mixed_precision": 8.0},
            outcomes=frozenset({"autograd.nan_anomaly_fp16"}),
        ),
    ),
)

DATALOADER_WORKER = Family(
    alternatives=(
        Alternative(
            "dataloader.dataset_code",
            "The real error happened inside the dataset's __getitem__ or collate in a worker process; the message shown is only the "
            "worker's exit.",
            "Run with num_workers=0: the dataset's own exception then appears in the main process with its traceback.",
            (_fix("Reproduce in the main process", "", "loader = DataLoader(dataset, batch_size=bs, num_workers=0)\nnext(iter(loader))", "dataloader-worker-crash"),),
            prior=0.4,
            cues={"workers_zero_ok": 0.2, "custom_data": 1.5},
            outcomes=frozenset({"data.worker_crash", "data.worker_segfault"}),
        ),
        Alternative(
            "dataloader.shared_memory",
            "Workers ran out of shared memory (/dev/shm) for the batches they hand over; containers often give it only 64 MB.",
            "Run df -h /dev/shm during loading; in Docker, a larger --shm-size (or --ipc=host) making it pass confirms it.",
            (_fix("Give the container more shared memory, or use fewer workers", "", "docker run --shm-size=8g ...", "dataloader-shared-memory"),),
            prior=0.2,
            cues={"workers_zero_ok": 3.0, "colab": 1.5},
            outcomes=frozenset({"data.shm"}),
        ),
        Alternative(
            "dataloader.worker_memory",
            "Workers were killed by the host's out-of-memory killer: each holds a copy of what the dataset keeps in Python objects, "
            "and copy-on-write pages get copied as reference counts change.",
            "Watch host memory (free -h) while the loader runs and check dmesg for an oom-kill; fewer workers surviving confirms it.",
            (_fix("Use fewer workers or keep dataset state in numpy arrays", "Arrays are not touched by reference counting, so workers share them.", None, "dataloader-worker-oom"),),
            prior=0.2,
            cues={"later_in_training": 1.8, "workers_zero_ok": 2.0},
            outcomes=frozenset({"data.worker_oom"}),
        ),
        Alternative(
            "dataloader.spawn_pickling",
            "Workers start by spawning a fresh interpreter (Windows, macOS, or an explicit start method): the script must guard its "
            "entry point and the dataset must be picklable.",
            "Is the training code under if __name__ == '__main__':, and does pickle.dumps(dataset) succeed?",
            (_fix("Guard the entry point and keep the dataset picklable", "", "if __name__ == \"__main__\":\n    main()", "spawn-pickling"),
             _fix("Confirm with num_workers=0", "Loading in the main process needs no pickling; if that works, the worker start-up is the problem.",
                  "loader = DataLoader(dataset, batch_size=bs, num_workers=0)", "dataloader-worker-crash")),
            prior=0.1,
            cues={"windows": 6.0, "workers_zero_ok": 2.0},
            outcomes=frozenset({"data.win_pagefile"}),
        ),
    ),
    plain=frozenset({"data.worker_crash"}),
)

FAMILIES: dict[str, Family] = {
    "cuda_oom": CUDA_OOM,
    "state_dict_loading": STATE_DICT,
    "nan_inf": NAN_INF,
    "dataloader_error": DATALOADER_WORKER,
}


def family_docs(category: str) -> tuple[str, ...]:
    """Every document the category's alternatives cite: retrieval fetches them so the citations stand."""
    family = FAMILIES.get(category)
    if family is None:
        return ()
    return tuple(dict.fromkeys(doc for a in family.alternatives for f in a.fixes for doc in f.sources))


def _merge_more() -> None:
    # Imported here, after this module's names exist: families_more builds on Alternative, Family and _fix.
    from assistant.differential.families_more import MORE_FAMILIES

    FAMILIES.update(MORE_FAMILIES)


_merge_more()
