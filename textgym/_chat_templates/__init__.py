"""Chat-template rendering for token observations: the exact text ``apply_chat_template`` gives, faster.

Private to textgym: :class:`~textgym.wrappers.TokenObservation` is the public way in.
``render`` renders a whole conversation and encodes it, ``tail`` proves from a template's syntax
tree that its text for earlier messages never changes and renders only the new messages, and
``known`` renders the tails of a few known templates in plain Python.
"""
