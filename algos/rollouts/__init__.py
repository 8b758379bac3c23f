"""Episodes a run's model plays: its token envs (:mod:`~textgym.algos.rollouts.token_envs`), its
seeded policy and held-out evaluation (:mod:`~textgym.algos.rollouts.seeded`), the steps collected
ahead in a background thread (:mod:`~textgym.algos.rollouts.ahead`), and the context cache the
backends' decode loops keep between turns (:mod:`~textgym.algos.rollouts.context_cache`)."""
