"""SmolLM2 for the model tests: its GGUF file (fetched once into the user's cache), its tokenizer
(fast) and its converted HF directory (once per test run, into a temporary ``$TEXTGYM_CACHE`` that
the ``smollm2-135m`` preset then reuses)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def smollm2_gguf():
    """The preset's GGUF file, downloaded and checked on the first run (needs the network once)."""
    pytest.importorskip("gguf")
    pytest.importorskip("transformers")
    from textgym.algos import models

    return models.smollm2_gguf(progress=False)


@pytest.fixture(scope="session")
def smollm2_tokenizer(smollm2_gguf):
    """The tokenizer and chat template read from the GGUF file (no weights: a few seconds)."""
    import transformers

    return transformers.AutoTokenizer.from_pretrained(str(smollm2_gguf.parent), gguf_file=smollm2_gguf.name)


@pytest.fixture(scope="session")
def smollm2_cache(smollm2_gguf, tmp_path_factory):
    """A ``$TEXTGYM_CACHE`` holding the fetched file (linked, not downloaded again) and the converted
    preset, set for the whole session."""
    pytest.importorskip("torch")
    pytest.importorskip("accelerate")
    from textgym.algos import models

    cache = tmp_path_factory.mktemp("textgym-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TEXTGYM_CACHE", str(cache))
        (cache / "gguf").mkdir()
        (cache / "gguf" / smollm2_gguf.name).symlink_to(smollm2_gguf)
        models.resolve(models.SMOLLM2, progress=False)
        yield cache


@pytest.fixture(scope="session")
def smollm2_dir(smollm2_cache):
    from textgym.algos import models

    return models.resolve(models.SMOLLM2, progress=False)
