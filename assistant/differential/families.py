"""The common causes of each error family that has more than one, as data.

Each :class:`Alternative` is one branch of a family: a reference to its cause in a knowledge document
(``doc-id#cause-id``: the cause, worded for the family with no number, name or shape that the facts do
not give, one check that confirms or rules it out, and its fixes live there), a prior share among the
family's causes, and how context cues move it (likelihood ratios: 4.0 makes it four times as likely,
0.3 a third). The words are read from the document when first asked for, never at import time.

``outcomes`` ties an alternative to the rule branches that *are* that cause: when a rule lands on
one, the rule's own cause (in the user's numbers) stands for the alternative and gains weight.
``decisive`` outcomes are read from facts that leave no other story (a key prefix seen in the keys,
a single request larger than the card): the diagnosis keeps one hypothesis.
"""

from __future__ import annotations

from assistant.differential.family import Alternative, Family
from assistant.differential.families_more import MORE_FAMILIES

CUDA_OOM = Family(
    alternatives=(
        Alternative(
            "oom.peak_too_large",
            "cuda-oom#step-peak-too-large",
            prior=0.45,
            # "Reduced the batch and it still happens": the step's batch-dependent size is not what runs out.
            cues={"first_step": 2.0, "later_in_training": 0.35, "resume": 0.4, "evaluation": 0.6, "after_n_items": 0.3, "tried_batch": 0.3,
                  "model_offloaded": 1.5},
            outcomes=frozenset({"memory.cuda_oom", "memory.cuda_oom_bare", "memory.cuda_oom_batch_one", "memory.mps_oom"}),
        ),
        Alternative(
            "oom.growth",
            "memory-growth-training-loop#memory-grows-across-steps",
            prior=0.18,
            # Failing only after N images/iterations is growth; a smaller batch only delays it.
            cues={"later_in_training": 4.0, "first_step": 0.2, "after_n_items": 6.0, "evaluation": 1.5, "tried_batch": 1.5},
            outcomes=frozenset({"memory.cuda_oom_growth"}),
        ),
        Alternative(
            "oom.resume_checkpoint",
            "cuda-oom#resumed-checkpoint-on-gpu",
            prior=0.03,
            cues={"resume": 14.0, "multi_gpu": 2.0, "first_step": 1.2, "later_in_training": 0.5},
        ),
        Alternative(
            "oom.eval_with_grad",
            "cuda-oom#evaluation-with-autograd",
            prior=0.08,
            cues={"evaluation": 6.0, "first_step": 0.8},
            outcomes=frozenset({"memory.cuda_oom_eval"}),
        ),
        Alternative(
            "oom.eval_larger_inputs",
            "cuda-oom#evaluation-inputs-larger",
            prior=0.05,
            # Reducing the batch did not help: one evaluation sample is itself too large.
            cues={"evaluation": 8.0, "tried_batch": 2.0, "large_input": 2.0, "after_n_items": 0.5},
        ),
        Alternative(
            "oom.overlong_inputs",
            "cuda-oom#overlong-inputs",
            prior=0.04,
            # Variable-length data (speech, audio, long documents) where a smaller batch did not help: a few samples far longer than the rest.
            cues={"variable_length": 6.0, "tried_batch": 3.0, "large_input": 2.0, "evaluation": 0.5},
        ),
        Alternative(
            "oom.fragmentation",
            "cuda-oom-fragmentation#fragmented-cache",
            prior=0.05,
            # Failing only in evaluation points at what evaluation does differently, not at the cache's layout.
            cues={"later_in_training": 1.6, "tried_allocator": 0.2, "evaluation": 0.5},
            outcomes=frozenset({"memory.cuda_oom_fragmented"}),
        ),
        Alternative(
            "oom.other_process",
            "cuda-oom#other-process-on-gpu",
            prior=0.05,
            cues={"colab": 1.5, "multi_gpu": 1.6, "visible_devices": 1.5},
            outcomes=frozenset({"memory.cuda_oom_other_processes"}),
        ),
        Alternative(
            "oom.visible_devices_not_applied",
            "cuda-oom#visible-devices-not-applied",
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
            "state-dict-keys#architecture-differs",
            prior=0.45,
            cues={"different_model": 3.0, "upgrade": 0.5},
            outcomes=frozenset({"io.state_dict", "io.state_dict_size", "io.state_dict_head_size"}),
        ),
        Alternative(
            "state_dict.library_version",
            "state-dict-keys#library-version-changed",
            prior=0.15,
            cues={"upgrade": 7.0, "different_model": 0.6},
            outcomes=frozenset({"io.state_dict_buffers", "io.state_dict_bn_counters"}),
        ),
        Alternative(
            "state_dict.partial",
            "state-dict-keys#partial-weights",
            prior=0.15,
            cues={"different_model": 2.0},
        ),
        Alternative(
            "state_dict.stale_checkpoint",
            "state-dict-size-mismatch#stale-checkpoint-loaded",
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
            "nan-loss-during-training#fp16-overflow",
            prior=0.15,
            cues={"mixed_precision": 6.0},
        ),
        Alternative(
            "nan.learning_rate",
            "exploding-gradients#optimisation-diverges",
            prior=0.35,
            cues={"learning_rate": 3.0, "later_in_training": 2.0, "first_step": 0.4},
            outcomes=frozenset({"symptoms.nan_after_steps", "autograd.nonfinite_norm"}),
        ),
        Alternative(
            "nan.bad_input_or_op",
            "nan-inf-anomaly#nonfinite-input-or-op",
            prior=0.35,
            cues={"first_step": 3.0, "custom_data": 2.0, "later_in_training": 0.6},
            outcomes=frozenset({"symptoms.nan_from_start", "autograd.nan_anomaly"}),
        ),
        Alternative(
            "nan.anomaly_stops_scaler",
            "anomaly-detection#anomaly-detection-vs-scaler",
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
            "dataloader-worker-crash#error-in-dataset-code",
            prior=0.4,
            cues={"workers_zero_ok": 0.2, "custom_data": 1.5},
            outcomes=frozenset({"data.worker_crash", "data.worker_segfault"}),
        ),
        Alternative(
            "dataloader.shared_memory",
            "dataloader-shared-memory#workers-out-of-shm",
            prior=0.2,
            cues={"workers_zero_ok": 3.0, "colab": 1.5},
            outcomes=frozenset({"data.shm"}),
        ),
        Alternative(
            "dataloader.worker_memory",
            "dataloader-worker-oom#workers-oom-killed",
            prior=0.2,
            cues={"later_in_training": 1.8, "workers_zero_ok": 2.0},
            outcomes=frozenset({"data.worker_oom"}),
        ),
        Alternative(
            "dataloader.spawn_pickling",
            "spawn-pickling#spawn-start-pickling",
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
    **MORE_FAMILIES,  # GPU faults, distributed jobs, host memory, forked workers
}


def family_docs(category: str) -> tuple[str, ...]:
    """Every document the category's alternatives cite: retrieval fetches them so the citations stand."""
    family = FAMILIES.get(category)
    if family is None:
        return ()
    return tuple(dict.fromkeys(doc for a in family.alternatives if a.available for f in a.fixes for doc in f.sources))


__all__ = ["FAMILIES", "Alternative", "Family", "family_docs"]
