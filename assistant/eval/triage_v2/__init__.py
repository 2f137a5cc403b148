"""Helpers of the second, independent triage corpus generator (:mod:`assistant.eval.triage_corpus_v2`).

- :mod:`.families`: root-cause families, each with its category (chosen by the scenario's author)
  and the user-code locations it is raised at, rendered as the failing process's stderr;
- :mod:`.shapes`: log shapes (torchrun, ``mp.spawn``, DeepSpeed, Lightning, Slurm arrays,
  Kubernetes pods, torchrun ``--log-dir``) that wrap a scenario into files with timestamps.

Nothing here reads the project's rules, engine or knowledge base.
"""
