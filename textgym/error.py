"""The exceptions textgym raises for misuse of its API.

Bad *agent* input never raises: it becomes feedback in the conversation and ``info["error"]``.
These exceptions are for the caller's mistakes (stepping before reset, a non-text action, an
invalid pinned task) and for missing optional dependencies.
"""

from __future__ import annotations


class TextGymError(Exception):
    """Base class of every textgym exception."""


class ResetNeeded(TextGymError, RuntimeError):
    """``step`` was called before ``reset`` or after the episode ended."""


class InvalidAction(TextGymError, TypeError):
    """The action is neither a str nor an assistant-message mapping (a caller bug, not an agent's)."""


class InvalidTask(TextGymError, ValueError):
    """A pinned or loaded task does not describe a valid task for the env."""


class ToolError(TextGymError):
    """Raised inside a tool to report bad arguments or an impossible request to the agent.

    The env catches it and returns its message as the tool's result; nothing else changes.
    """


class EndpointError(TextGymError, RuntimeError):
    """A model endpoint (an OpenAI-compatible server) failed after its retries."""


class RemoteError(TextGymError, RuntimeError):
    """A served env could not be reached, lost its connection, or answered with an error frame.

    ``code`` is the server's OpenEnv error code, or None when the connection itself failed.
    """

    def __init__(self, message: str, code: str | None = None):
        super().__init__(message)
        self.code = code


class TemplateError(TextGymError, ValueError):
    """A tokenizer or chat template cannot give exact token-in/token-out trajectories.

    Raised by :class:`textgym.wrappers.TokenObservation` when a template re-renders past turns
    (it is not prefix-preserving) or the tokenizer does not decode its own ids back to the text.
    """


class SandboxUnavailable(TextGymError, RuntimeError):
    """No isolation for untrusted code is available here; the message says what to install.

    Raised instead of silently running code unprotected; ``backend="unsafe"`` opts out.
    """


class DownloadError(TextGymError, OSError):
    """A file fetched on first use could not be downloaded, or does not match its pinned sha256."""


class MissingDependency(TextGymError, ImportError):
    """An optional extra is needed; the message names the ``pip install`` command."""


def require(module: str, extra: str):
    """Import ``module`` or raise :class:`MissingDependency` naming the extra that provides it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise MissingDependency(f"{module} is required for this feature: pip install 'textgym[{extra}]'") from exc


class CheckpointMismatch(TextGymError, ValueError, KeyError):
    """A checkpoint does not fit the model or learner it is loaded into (missing, unexpected or
    mis-shaped weights, optimiser state or KL reference). Both training backends raise it; it is a
    ``ValueError`` and a ``KeyError`` so that code written against either backend's old error keeps
    catching it."""

    __str__ = BaseException.__str__  # KeyError's would quote the message


class InvalidState(TextGymError, ValueError):
    """A state given to ``set_state`` (or ``reset(options={"state": ...})``) does not fit the env:
    another env id, other constructor arguments, another state version, or not a state at all."""
