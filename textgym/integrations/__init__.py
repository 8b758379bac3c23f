"""Adapters that hand textgym envs to other frameworks in-process: TRL (``trl``) and OpenEnv (``openenv``).

Each module imports its framework, so none of them is loaded by ``import textgym``.
"""
