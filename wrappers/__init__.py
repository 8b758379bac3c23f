"""textgym.wrappers: cross-cutting behaviour on top of any textgym env.

* :class:`TokenObservation`: token-in/token-out observations and actions, with the loss mask.
* :class:`RayVectorEnv`: sub-envs as Ray actors behind Gymnasium's ``VectorEnv`` API (``ray`` extra,
  imported only when one is made).
"""

from textgym.wrappers.ray_vector import RayVectorEnv
from textgym.wrappers.token_observation import TokenObservation

__all__ = ["RayVectorEnv", "TokenObservation"]
