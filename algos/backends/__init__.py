"""The two backends behind one contract: :mod:`~textgym.algos.backends.contract` names what
``textgym.algos.jax`` and ``textgym.algos.torch`` both export, :mod:`~textgym.algos.backends.select`
imports the one a run asks for. Nothing outside the two backend packages imports a framework."""

from textgym.algos.backends.select import BACKENDS, idle_cpus, load_backend, load_model_policy, make_learner, processes_mesh

__all__ = ["BACKENDS", "idle_cpus", "load_backend", "load_model_policy", "make_learner", "processes_mesh"]
