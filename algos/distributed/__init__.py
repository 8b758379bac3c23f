"""Several processes, one run: the process group a run joins and the collectives its loop needs
(:mod:`~textgym.algos.distributed.processes`), and ``--nproc N``, which launches them
(:mod:`~textgym.algos.distributed.launch`)."""
