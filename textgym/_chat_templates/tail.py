"""Render a chat template from one message on: the part of the rendering that a step can change.

TokenObservation checks at every step that the template's rendering of the conversation after the
step starts with the rendering before it. Rendering the whole conversation for that cost more
than the env's step on Workplace-v0: the header alone serialises 27 tool schemas.

Most chat templates are a *header* (the system turn, the tool list), one
``{% for message in messages %}`` loop whose body renders one message, and a *footer* (the
generation prompt). :func:`tail_template` proves that a template has that shape, from its syntax
tree, and compiles a copy that renders only the loop from message ``start`` on and the footer.
For such a template the rendering of a conversation is ``header + body_0 + ... + body_n + footer``
where:

* the header depends only on ``messages[0]``, the tools and the special tokens (not on later
  messages, not on ``add_generation_prompt``), so it is the same at every step of an episode;
* ``body_i`` depends only on messages up to ``i + reach`` (``loop.last``,
  ``messages[loop.index0 + 1]``...), on ``messages[0]`` and on its own index, and not on any other
  iteration (Jinja's loop variables do not outlive an iteration; namespaces written by the body
  are refused), so appending messages leaves every body before ``len(messages) - reach`` as it was.

The copy iterates ``messages[start:]`` with the same ``messages`` list in scope and
``loop.index0``, ``loop.index`` and ``loop.first`` offset by ``start``, so each body renders
exactly as in the whole rendering, and it returns each body's text apart (a marker written before
each body and before the footer splits the output; a marker inside a message is counted, and then
the copy gives None): a step renders only the bodies from ``len(messages) - reach`` on and compares
them with those it rendered before, whatever the episode's length. The header's statements are
left out: the body and footer may
not read a name the header assigns. Anything outside this shape (another loop over ``messages``,
``loop.length``, macros, includes, a namespace written in the loop, a call to a global other than
``raise_exception``/``namespace``/``range``/``dict``, an unguarded ``messages[loop.index0 - 1]``
that would wrap to the last message at index 0) gives None, and the wrapper renders the whole
conversation as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from jinja2 import nodes

START = "textgym_tail_start"  # render variables of the copy: the first message's index...
TAIL = "textgym_tail_messages"  # ...and messages[start:]
MARK = "\x00\ufdd0textgym-body\ufdd0\x00"  # written before each body and the footer (noncharacters)
_CALLABLE = frozenset({"raise_exception", "namespace", "range", "dict"})
_ALLOWED = (
    nodes.Template, nodes.Output, nodes.TemplateData, nodes.Const, nodes.Name, nodes.NSRef, nodes.Getattr,
    nodes.Getitem, nodes.Slice, nodes.If, nodes.CondExpr, nodes.And, nodes.Or, nodes.Not, nodes.Compare,
    nodes.Operand, nodes.BinExpr, nodes.UnaryExpr, nodes.Concat, nodes.Filter, nodes.Test, nodes.Call,
    nodes.Keyword, nodes.List, nodes.Tuple, nodes.Dict, nodes.Pair, nodes.For, nodes.Assign,
    nodes.AssignBlock, nodes.Continue,
)  # fmt: skip


class _Refused(Exception):
    """The template is not of the shape this module renders from a message on."""


class TailTemplate:
    """A template's loop from message ``start`` on, then its footer.

    Attributes:
        reach: How many messages after its own a body may read (1 for ``loop.last``): appending
            messages can change the bodies of the last ``reach`` messages and no others.
    """

    def __init__(self, template: Any, reach: int):
        self.template = template
        self.reach = reach
        # Template.render copies the globals out of a ChainMap at every call (a third of a short
        # rendering); this is the same context made from a plain copy of them.
        self._globals = dict(template.globals)

    def render(self, messages: list, start: int, **context: Any) -> list[str] | None:
        """``[body_start, ..., body_n, footer]``: the texts that ``template.render`` would give for
        these messages, less the header and the bodies before ``start``; None where a message's
        text holds the marker that splits them."""
        template = self.template
        env = template.environment
        names = {**self._globals, **context, "messages": messages, START: start, TAIL: messages[start:]}
        ctx = env.context_class(env, names, template.name, template.blocks, globals=self._globals)
        try:
            parts = env.concat(template.root_render_func(ctx)).split(MARK)
        except Exception:  # re-raised by Jinja as render() would raise it
            env.handle_exception()
        # One marker before each body and one before the footer, nothing before the first one.
        return parts[1:] if len(parts) == len(messages) - start + 2 and not parts[0] else None


def tail_template(env: Any, source: str) -> TailTemplate | None:
    """The tail copy of ``source`` compiled in ``env``, or None where the template has another shape."""
    if env.is_async:
        return None
    try:
        tree = env.parse(source)
        check = _Check(tree)
    except _Refused:
        return None
    return TailTemplate(env.from_string(_rewrite(tree, check.at)), check.reach)


def _rewrite(tree: nodes.Template, at: int) -> nodes.Template:
    """``tree`` (checked) changed in place into the tail copy: the loop at ``tree.body[at]`` over
    ``messages[start:]`` with offset counters, then the footer, each body and the footer opened
    by the marker."""
    loop = tree.body[at]
    loop.iter = nodes.Name(TAIL, "load")
    _offset_loop(loop.body)
    loop.body = [nodes.Output([nodes.TemplateData(MARK)]), *loop.body]
    tree.body = [loop, nodes.Output([nodes.TemplateData(MARK)]), *tree.body[at + 1 :]]
    tree.set_environment(loop.environment)
    for node in tree.find_all(nodes.Node):
        node.lineno = node.lineno or 1
    return tree


class _Check:
    """Why a template has the shape (or :class:`_Refused`): where its loop is and its reach."""

    def __init__(self, tree: nodes.Template):
        fors = [i for i, n in enumerate(tree.body) if isinstance(n, nodes.For) and _is_name(n.iter, "messages")]
        if len(fors) != 1:
            raise _Refused("not one top-level loop over messages")
        self.at = fors[0]
        loop = tree.body[self.at]
        if not isinstance(loop.target, nodes.Name) or loop.test is not None or loop.recursive or loop.else_:
            raise _Refused("a filtered, recursive or unpacking loop, or one with an else")
        for node in tree.find_all(nodes.Node):
            if not isinstance(node, _ALLOWED):
                raise _Refused(type(node).__name__)
            if isinstance(node, nodes.Name) and node.name in (START, TAIL):
                raise _Refused("uses the copy's own names")
        header, footer = tree.body[: self.at], tree.body[self.at + 1 :]
        self.assigned = {n.name for stmt in header for n in stmt.find_all((nodes.Name, nodes.NSRef)) if _stores(n)}
        self.reach = 0
        for stmt in header:
            self._header(stmt)
        for stmt in loop.body:
            self._body(stmt, guarded=False)
        for stmt in footer:
            self._free(stmt, messages_free=True)

    def _header(self, node: nodes.Node) -> None:
        """Only ``messages[0]`` of the conversation, and not the generation prompt's flag."""
        for child in _children(node):
            if not _first_message_only(child, "the header"):
                self._call(child)
                self._header(child)

    def _free(self, node: nodes.Node, messages_free: bool) -> None:
        """A name the header assigns is refused (the copy has no header); calls only to allowed
        globals; where not ``messages_free`` (a nested loop), only ``messages[0]``."""
        for child in _children(node):
            if isinstance(child, (nodes.Name, nodes.NSRef)) and child.name in self.assigned:
                raise _Refused(f"reads {child.name}, which the header assigns")
            if messages_free or not _first_message_only(child, "a nested loop"):
                self._call(child)
                self._free(child, messages_free)

    def _call(self, node: nodes.Node) -> None:
        if isinstance(node, nodes.Call) and isinstance(node.node, nodes.Name) and node.node.name not in _CALLABLE:
            raise _Refused(f"calls {node.node.name}")

    def _body(self, node: nodes.Node, guarded: bool) -> None:
        """The loop's body: ``loop.first/last/index0/index``, ``messages[0]`` and
        ``messages[loop.index0 + c]``; ``guarded`` where ``loop.index0 >= 1`` holds."""
        if isinstance(node, nodes.For):  # a nested loop: its `loop` is its own
            if node.recursive:
                raise _Refused("a recursive loop")
            for expr in (node.iter, node.test):
                if expr is not None:
                    self._body(expr, guarded)
            for stmt in [*node.body, *node.else_]:
                self._free(stmt, messages_free=False)
            return
        if isinstance(node, nodes.Getattr) and _is_name(node.node, "loop"):
            if node.attr not in ("first", "last", "index0", "index"):
                raise _Refused(f"loop.{node.attr}")
            self.reach = max(self.reach, int(node.attr == "last"))
            return
        if isinstance(node, nodes.Getitem) and _is_name(node.node, "messages"):
            self._message_index(node.arg, guarded)
            return
        if isinstance(node, nodes.Name):
            if node.name in ("loop", "messages", "add_generation_prompt") or node.name in self.assigned:
                raise _Refused(f"the loop reads {node.name} otherwise than per message")
            return
        if isinstance(node, nodes.NSRef) and node.name in self.assigned:
            raise _Refused("the loop writes a namespace of the header's")  # state carried between iterations
        self._call(node)
        if isinstance(node, nodes.Or):
            self._body(node.left, guarded)
            self._body(node.right, guarded or _at_first(node.left) is True)
        elif isinstance(node, nodes.And):
            self._body(node.left, guarded)
            self._body(node.right, guarded or _at_first(node.left) is False)
        elif isinstance(node, nodes.If):
            self._body(node.test, guarded)
            first = _at_first(node.test)
            for stmt in node.body:
                self._body(stmt, guarded or first is False)
            for stmt in [*node.elif_, *node.else_]:
                self._body(stmt, guarded or first is True)
        else:
            for child in _children(node):
                self._body(child, guarded)

    def _message_index(self, arg: nodes.Node, guarded: bool) -> None:
        offset = _index_offset(arg)
        if offset is None:
            if isinstance(arg, nodes.Const) and arg.value == 0:
                return
            raise _Refused("messages[...] other than messages[0] and messages[loop.index0 + c]")
        if offset < -int(guarded):  # messages[-1] at index 0 would be the last message
            raise _Refused("messages[loop.index0 - c] where loop.index0 may be below c")
        self.reach = max(self.reach, offset)


def _first_message_only(node: nodes.Node, where: str) -> bool:
    """True for ``messages[0]`` (nothing in it to check); refuses any other use of ``messages``
    and the generation prompt's flag."""
    if isinstance(node, nodes.Getitem) and _is_name(node.node, "messages"):
        if not (isinstance(node.arg, nodes.Const) and node.arg.value == 0):
            raise _Refused(f"{where} reads a message other than the first")
        return True
    if isinstance(node, nodes.Name) and node.name in ("messages", "add_generation_prompt"):
        raise _Refused(f"{where} reads {node.name}")
    return False


def _offset_loop(body: list[nodes.Node]) -> None:
    """Offset the outer loop's counters by ``start`` (not those of nested loops)."""

    def shifted(attr: str) -> nodes.Node:
        return nodes.Add(nodes.Getattr(nodes.Name("loop", "load"), attr, "load"), nodes.Name(START, "load"))

    def visit(node: nodes.Node) -> None:
        for field in node.fields:
            value = getattr(node, field)
            for i, child in enumerate(value if isinstance(value, list) else [value]):
                if not isinstance(child, nodes.Node):
                    continue
                if isinstance(child, nodes.Getattr) and _is_name(child.node, "loop"):
                    new = shifted(child.attr) if child.attr in ("index0", "index") else None
                    if child.attr == "first":
                        new = nodes.Compare(shifted("index0"), [nodes.Operand("eq", nodes.Const(0))])
                    if new is not None:
                        if isinstance(value, list):
                            value[i] = new
                        else:
                            setattr(node, field, new)
                    continue
                if isinstance(child, nodes.For):
                    visit_expressions(child)
                    continue
                visit(child)

    def visit_expressions(loop: nodes.For) -> None:
        holder = nodes.Tuple([loop.iter, *([loop.test] if loop.test else [])], "load")
        visit(holder)
        loop.iter = holder.items[0]
        if loop.test is not None:
            loop.test = holder.items[1]

    visit(nodes.Output(body))


def _index_offset(arg: nodes.Node) -> int | None:
    """``c`` for ``loop.index0 + c`` (``loop.index`` is ``index0 + 1``), else None."""
    if isinstance(arg, nodes.Getattr) and _is_name(arg.node, "loop") and arg.attr in ("index0", "index"):
        return int(arg.attr == "index")
    if isinstance(arg, (nodes.Add, nodes.Sub)) and isinstance(arg.right, nodes.Const) and type(arg.right.value) is int:
        base = _index_offset(arg.left)
        if base is not None:
            return base + (arg.right.value if isinstance(arg, nodes.Add) else -arg.right.value)
    return None


def _at_first(test: nodes.Node) -> bool | None:
    """The value of ``test`` at the loop's first message where the syntax says it (``loop.first``,
    ``loop.index0 == 0``, ``loop.index0 > 0``, ``not ...``), else None."""
    if isinstance(test, nodes.Getattr) and _is_name(test.node, "loop") and test.attr == "first":
        return True
    if isinstance(test, nodes.Not):
        inner = _at_first(test.node)
        return None if inner is None else not inner
    if isinstance(test, nodes.Compare) and len(test.ops) == 1 and isinstance(test.ops[0].expr, nodes.Const):
        offset, op, value = _index_offset(test.expr), test.ops[0].op, test.ops[0].expr.value
        if offset is not None and type(value) is int and op in ("eq", "ne", "gt", "gteq", "lt", "lteq"):
            first = offset  # the counter's value at the first message
            return {"eq": first == value, "ne": first != value, "gt": first > value, "gteq": first >= value,
                    "lt": first < value, "lteq": first <= value}[op]  # fmt: skip
    return None


def _children(node: nodes.Node) -> Iterator[nodes.Node]:
    return node.iter_child_nodes()


def _is_name(node: Any, name: str) -> bool:
    return isinstance(node, nodes.Name) and node.name == name


def _stores(node: nodes.Node) -> bool:
    return isinstance(node, nodes.NSRef) or node.ctx in ("store", "param")
