"""Procedural problem families: parameterised statements with reference solutions.

Each family draws its parameters from the env's generator, writes a statement that names them,
a reference solution that implements exactly that statement, and test inputs (with edge cases).
Expected outputs are not written here: :mod:`generator` computes them by running the reference
on the host, so statement, solution and tests cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

LETTERS = "abcdefghijklmnopqrstuvwxyz"
WORDS = (
    "apple",
    "stone",
    "river",
    "cloud",
    "tiger",
    "lemon",
    "night",
    "green",
    "paper",
    "orbit",
    "mango",
    "delta",
    "pixel",
    "amber",
    "ocean",
    "eagle",
    "piano",
    "raven",
    "salt",
    "kite",
    "elephant",
    "mountain",
    "garden",
    "bicycle",
    "yellow",
    "sky",
    "ant",
    "marble",
)


@dataclass(frozen=True)
class Problem:
    """One drawn problem: ``inputs`` are argument lists (function) or stdin texts (stdio)."""

    statement: str
    entry_point: str | None
    solution: str
    inputs: list[Any]


@dataclass(frozen=True)
class Family:
    name: str
    format: Literal["function", "stdio"]
    make: Callable[[np.random.Generator, int], Problem]


FAMILIES: dict[str, Family] = {}


def family(name: str, fmt: Literal["function", "stdio"] = "function"):
    def register(make):
        FAMILIES[name] = Family(name, fmt, make)
        return make

    return register


# ----- samplers (plain Python values, drawn only from the env's generator) -----


def _int(rng, lo, hi) -> int:
    return int(rng.integers(lo, hi + 1))


def _ints(rng, n_lo=0, n_hi=10, lo=-20, hi=20) -> list[int]:
    return [int(v) for v in rng.integers(lo, hi + 1, size=_int(rng, n_lo, n_hi))]


def _word(rng, lo=1, hi=8, alphabet=LETTERS) -> str:
    return "".join(alphabet[int(i)] for i in rng.integers(0, len(alphabet), size=_int(rng, lo, hi)))


def _words(rng, lo=0, hi=7) -> list[str]:
    return [WORDS[int(i)] for i in rng.integers(0, len(WORDS), size=_int(rng, lo, hi))]


_ORDINALS = {1: "1st", 2: "2nd", 3: "3rd"}


def _tests(n: int, edge: list[Any], draw: Callable[[], Any]) -> list[Any]:
    """``n`` inputs: the edge cases first, then random draws."""
    return (edge + [draw() for _ in range(n)])[:n]


# ----- function families -----


@family("sum_multiples")
def _sum_multiples(rng, n):
    k = _int(rng, 2, 7)
    return Problem(
        f"Write a function `sum_multiples(xs)` that returns the sum of the integers in the list `xs` that are divisible by {k}.",
        "sum_multiples",
        f"def sum_multiples(xs):\n    return sum(x for x in xs if x % {k} == 0)\n",
        _tests(n, [[[]]], lambda: [_ints(rng)]),
    )


@family("count_above")
def _count_above(rng, n):
    t = _int(rng, -5, 10)
    return Problem(
        f"Write a function `count_above(xs)` that returns how many integers in `xs` are strictly greater than {t}.",
        "count_above",
        f"def count_above(xs):\n    return sum(1 for x in xs if x > {t})\n",
        _tests(n, [[[]], [[t]]], lambda: [_ints(rng)]),
    )


@family("rotate_right")
def _rotate_right(rng, n):
    k = _int(rng, 1, 5)
    return Problem(
        f"Write a function `rotate_right(xs)` that returns a new list with the elements of `xs` rotated {k} "
        f"position(s) to the right (the last element moves to the front each step). An empty list stays empty.",
        "rotate_right",
        f"def rotate_right(xs):\n    if not xs:\n        return []\n    k = {k} % len(xs)\n    return xs[-k:] + xs[:-k] if k else list(xs)\n",
        _tests(n, [[[]], [[1]]], lambda: [_ints(rng, 1, 9)]),
    )


@family("caesar")
def _caesar(rng, n):
    k = _int(rng, 1, 25)
    return Problem(
        f"Write a function `caesar(s)` that shifts every lowercase ASCII letter of `s` forward by {k} places in the "
        f"alphabet, wrapping from 'z' to 'a'. All other characters stay unchanged.",
        "caesar",
        f"def caesar(s):\n    return ''.join(chr((ord(c) - 97 + {k}) % 26 + 97) if 'a' <= c <= 'z' else c for c in s)\n",
        _tests(n, [[""], ["xyz A!"]], lambda: [_word(rng, 0, 12, LETTERS + " .,!AB")]),
    )


@family("prefix_max")
def _prefix_max(rng, n):
    return Problem(
        "Write a function `prefix_max(xs)` that returns a list whose i-th element is the maximum of `xs[0..i]`.",
        "prefix_max",
        "def prefix_max(xs):\n    out, best = [], None\n    for x in xs:\n        best = x if best is None or x > best else best\n"
        "        out.append(best)\n    return out\n",
        _tests(n, [[[]]], lambda: [_ints(rng)]),
    )


@family("kth_largest_distinct")
def _kth_largest(rng, n):
    k = _int(rng, 1, 3)
    return Problem(
        f"Write a function `kth_largest(xs)` that returns the {_ORDINALS[k]} largest *distinct* value in `xs` "
        f"(1 = the largest), or None if there are fewer than {k} distinct values.",
        "kth_largest",
        f"def kth_largest(xs):\n    values = sorted(set(xs), reverse=True)\n    return values[{k - 1}] if len(values) >= {k} else None\n",
        _tests(n, [[[]], [[5, 5, 5]]], lambda: [_ints(rng, 0, 8, -5, 5)]),
    )


@family("chunk_sums")
def _chunk_sums(rng, n):
    k = _int(rng, 2, 4)
    return Problem(
        f"Write a function `chunk_sums(xs)` that splits `xs` into consecutive chunks of {k} elements (the last "
        f"chunk may be shorter) and returns the list of the chunks' sums.",
        "chunk_sums",
        f"def chunk_sums(xs):\n    return [sum(xs[i:i + {k}]) for i in range(0, len(xs), {k})]\n",
        _tests(n, [[[]]], lambda: [_ints(rng)]),
    )


@family("digit_power_sum")
def _digit_power_sum(rng, n):
    p = _int(rng, 1, 4)
    return Problem(
        f"Write a function `digit_power_sum(n)` that returns the sum of the decimal digits of the non-negative "
        f"integer `n`, each raised to the power {p}.",
        "digit_power_sum",
        f"def digit_power_sum(n):\n    return sum(int(d) ** {p} for d in str(n))\n",
        _tests(n, [[0]], lambda: [_int(rng, 0, 10**6)]),
    )


@family("clean_palindrome")
def _clean_palindrome(rng, n):
    keep_case = bool(rng.integers(2))
    rule = "case matters" if keep_case else "upper and lower case count as the same letter"
    norm = "c" if keep_case else "c.lower()"
    return Problem(
        f"Write a function `is_clean_palindrome(s)` that returns True when the letters and digits of `s`, read "
        f"in order with every other character dropped, form a palindrome ({rule}); else False.",
        "is_clean_palindrome",
        f"def is_clean_palindrome(s):\n    t = [{norm} for c in s if c.isalnum()]\n    return t == t[::-1]\n",
        _tests(n, [[""], ["Aa"], ["ab, A"]], lambda: [_palindromish(rng)]),
    )


def _palindromish(rng) -> str:
    half = _word(rng, 0, 5, "abcAB1 ,")
    return half + half[::-1] if rng.integers(2) else half + _word(rng, 1, 3, "abcAB")


@family("fizzbuzz_words")
def _fizzbuzz(rng, n):
    a, b = sorted(int(v) for v in rng.choice(np.arange(2, 8), size=2, replace=False))
    wa, wb = (WORDS[int(i)].capitalize() for i in rng.choice(len(WORDS), size=2, replace=False))
    return Problem(
        f"Write a function `fizzbuzz(n)` that returns a list of strings for the numbers 1..n: '{wa}{wb}' for "
        f"multiples of both {a} and {b}, '{wa}' for multiples of {a}, '{wb}' for multiples of {b}, and the number "
        f"itself (as a string) otherwise.",
        "fizzbuzz",
        "def fizzbuzz(n):\n    out = []\n    for i in range(1, n + 1):\n"
        f"        s = ('{wa}' if i % {a} == 0 else '') + ('{wb}' if i % {b} == 0 else '')\n"
        "        out.append(s or str(i))\n    return out\n",
        _tests(n, [[0], [a * b]], lambda: [_int(rng, 1, 40)]),
    )


@family("fib_mod")
def _fib_mod(rng, n):
    a, b, m = _int(rng, 0, 3), _int(rng, 1, 4), _int(rng, 7, 1000)
    return Problem(
        f"A sequence starts with f(0) = {a} and f(1) = {b}, and f(i) = f(i-1) + f(i-2). Write a function "
        f"`fib_mod(n)` that returns f(n) modulo {m} (n >= 0, up to 10**5).",
        "fib_mod",
        f"def fib_mod(n):\n    x, y = {a}, {b}\n    for _ in range(n):\n        x, y = y, (x + y) % {m}\n    return x % {m}\n",
        _tests(n, [[0], [1]], lambda: [_int(rng, 0, 2000)]),
    )


@family("scaled_gcd")
def _scaled_gcd(rng, n):
    k = _int(rng, 1, 5)
    return Problem(
        f"Write a function `scaled_gcd(xs)` that returns {k} times the greatest common divisor of the positive "
        f"integers in the non-empty list `xs`.",
        "scaled_gcd",
        f"import math\n\ndef scaled_gcd(xs):\n    g = 0\n    for x in xs:\n        g = math.gcd(g, x)\n    return {k} * g\n",
        _tests(n, [[[7]]], lambda: [[_int(rng, 1, 12) * m for m in [_int(rng, 1, 6)] for _ in range(_int(rng, 1, 5))]]),
    )


@family("run_length")
def _run_length(rng, n):
    sep = str(rng.choice(["", "-", ":"]))
    return Problem(
        f"Write a function `run_length(s)` that encodes each maximal run of one repeated character of `s` as the "
        f"character followed by the run length, joined by {sep!r}. For example 'aab' becomes "
        f"{sep.join(['a2', 'b1'])!r}.",
        "run_length",
        "def run_length(s):\n    parts, i = [], 0\n    while i < len(s):\n        j = i\n"
        "        while j < len(s) and s[j] == s[i]:\n            j += 1\n"
        f"        parts.append(s[i] + str(j - i))\n        i = j\n    return {sep!r}.join(parts)\n",
        _tests(n, [[""]], lambda: [_word(rng, 1, 12, "aab")]),
    )


@family("long_word_lengths")
def _long_word_lengths(rng, n):
    k = _int(rng, 3, 5)
    return Problem(
        f"Write a function `long_word_lengths(text)` that splits `text` on whitespace and returns the list of "
        f"lengths of the words longer than {k} characters, in order.",
        "long_word_lengths",
        f"def long_word_lengths(text):\n    return [len(w) for w in text.split() if len(w) > {k}]\n",
        _tests(n, [[""]], lambda: [" ".join(_words(rng))]),
    )


@family("count_chars_in_set")
def _count_chars(rng, n):
    chars = "".join(sorted(str(c) for c in rng.choice(list(LETTERS), size=_int(rng, 2, 5), replace=False)))
    return Problem(
        f"Write a function `count_chars(s)` that returns how many characters of `s` are one of {chars!r} (lowercase only).",
        "count_chars",
        f"def count_chars(s):\n    return sum(1 for c in s if c in {chars!r})\n",
        _tests(n, [[""]], lambda: [_word(rng, 0, 15)]),
    )


@family("transpose_scale")
def _transpose_scale(rng, n):
    k = _int(rng, 2, 5)

    def grid():
        rows, cols = _int(rng, 1, 4), _int(rng, 1, 4)
        return [[_int(rng, -9, 9) for _ in range(cols)] for _ in range(rows)]

    return Problem(
        f"Write a function `transpose_scale(m)` that returns the transpose of the rectangular matrix `m` (a "
        f"non-empty list of equal-length rows) with every entry multiplied by {k}.",
        "transpose_scale",
        f"def transpose_scale(m):\n    return [[{k} * row[j] for row in m] for j in range(len(m[0]))]\n",
        _tests(n, [], lambda: [grid()]),
    )


@family("pairs_divisible")
def _pairs_divisible(rng, n):
    k = _int(rng, 2, 6)
    return Problem(
        f"Write a function `pairs_divisible(xs)` that returns the number of index pairs i < j such that xs[i] + xs[j] is divisible by {k}.",
        "pairs_divisible",
        "def pairs_divisible(xs):\n    n = len(xs)\n"
        f"    return sum(1 for i in range(n) for j in range(i + 1, n) if (xs[i] + xs[j]) % {k} == 0)\n",
        _tests(n, [[[]], [[1]]], lambda: [_ints(rng)]),
    )


@family("longest_run")
def _longest_run(rng, n):
    strict = bool(rng.integers(2))
    word, op = ("strictly increasing", ">") if strict else ("non-decreasing", ">=")
    return Problem(
        f"Write a function `longest_run(xs)` that returns the length of the longest contiguous {word} run in `xs` (0 for an empty list).",
        "longest_run",
        "def longest_run(xs):\n    best = cur = 0\n    for i, x in enumerate(xs):\n"
        f"        cur = cur + 1 if i and x {op} xs[i - 1] else 1\n        best = max(best, cur)\n    return best\n",
        _tests(n, [[[]], [[2, 2, 2]]], lambda: [_ints(rng, 0, 10, 0, 6)]),
    )


@family("collatz_steps")
def _collatz(rng, n):
    t = _int(rng, 1, 10)
    return Problem(
        f"Starting from a positive integer n, repeatedly replace n by n // 2 if it is even and by 3 * n + 1 if it "
        f"is odd. Write a function `collatz_steps(n)` that returns the number of replacements until n <= {t}.",
        "collatz_steps",
        f"def collatz_steps(n):\n    steps = 0\n    while n > {t}:\n        n = n // 2 if n % 2 == 0 else 3 * n + 1\n"
        "        steps += 1\n    return steps\n",
        _tests(n, [[1], [t + 1]], lambda: [_int(rng, 1, 500)]),
    )


@family("digit_count_base")
def _digit_count_base(rng, n):
    b = _int(rng, 2, 9)
    d = _int(rng, 0, b - 1)
    return Problem(
        f"Write a function `count_digit(n)` that returns how many digits of the base-{b} representation of the "
        f"non-negative integer `n` are equal to {d} (0 is written as the single digit 0).",
        "count_digit",
        f"def count_digit(n):\n    if n == 0:\n        return 1 if {d} == 0 else 0\n    count = 0\n    while n:\n"
        f"        count += n % {b} == {d}\n        n //= {b}\n    return count\n",
        _tests(n, [[0]], lambda: [_int(rng, 0, 10**5)]),
    )


@family("anagram_classes")
def _anagram_classes(rng, n):
    return Problem(
        "Write a function `anagram_classes(words)` that returns how many groups the strings in `words` fall into "
        "when two strings are in the same group exactly when one is an anagram of the other.",
        "anagram_classes",
        "def anagram_classes(words):\n    return len({''.join(sorted(w)) for w in words})\n",
        _tests(n, [[[]]], lambda: [[_word(rng, 1, 3, "abc") for _ in range(_int(rng, 0, 8))]]),
    )


@family("balanced_brackets")
def _balanced(rng, n):
    pairs = [p for p in ("()", "[]", "{}", "<>") if rng.integers(2)] or ["()"]
    opens, closes = "".join(p[0] for p in pairs), "".join(p[1] for p in pairs)
    alphabet = opens + closes + "x"
    return Problem(
        f"Write a function `balanced(s)` that returns True when the brackets {' '.join(pairs)} in `s` are "
        f"balanced and properly nested (other characters are ignored), else False.",
        "balanced",
        f"def balanced(s):\n    stack = []\n    for c in s:\n        if c in {opens!r}:\n            stack.append({closes!r}[{opens!r}.index(c)])\n"
        f"        elif c in {closes!r}:\n            if not stack or stack.pop() != c:\n                return False\n"
        "    return not stack\n",
        _tests(n, [[""], [opens + closes]], lambda: [_word(rng, 0, 10, alphabet)]),
    )


@family("merge_sorted")
def _merge_sorted(rng, n):
    dedupe = bool(rng.integers(2))
    rule = "without duplicates" if dedupe else "keeping duplicates"
    body = "sorted(set(a) | set(b))" if dedupe else "sorted(a + b)"
    return Problem(
        f"Write a function `merge_sorted(a, b)` that merges two sorted lists into one sorted list, {rule}.",
        "merge_sorted",
        f"def merge_sorted(a, b):\n    return {body}\n",
        _tests(n, [[[], []]], lambda: [sorted(_ints(rng, 0, 6, 0, 9)), sorted(_ints(rng, 0, 6, 0, 9))]),
    )


@family("top_k_frequent")
def _top_k(rng, n):
    k = _int(rng, 1, 3)
    return Problem(
        f"Write a function `top_k(xs)` that returns the (at most) {k} most frequent values of `xs`, most frequent "
        f"first; ties go to the smaller value.",
        "top_k",
        f"from collections import Counter\n\ndef top_k(xs):\n    counts = Counter(xs)\n"
        f"    return sorted(counts, key=lambda v: (-counts[v], v))[:{k}]\n",
        _tests(n, [[[]]], lambda: [_ints(rng, 0, 12, 0, 5)]),
    )


@family("primes_in_class")
def _primes(rng, n):
    m = _int(rng, 3, 6)
    r = _int(rng, 1, m - 1)
    return Problem(
        f"Write a function `count_primes(n)` that returns how many primes p <= n satisfy p % {m} == {r}.",
        "count_primes",
        "def count_primes(n):\n    count = 0\n    for p in range(2, n + 1):\n"
        f"        if all(p % q for q in range(2, int(p ** 0.5) + 1)) and p % {m} == {r}:\n            count += 1\n"
        "    return count\n",
        _tests(n, [[0], [2]], lambda: [_int(rng, 0, 300)]),
    )


@family("every_kth_upper")
def _every_kth(rng, n):
    k = _int(rng, 2, 4)
    return Problem(
        f"Write a function `shout_every(text)` that splits `text` on whitespace and returns the words joined by "
        f"single spaces, with every {k}-th word (the {k}-th, {2 * k}-th, ...) in upper case.",
        "shout_every",
        f"def shout_every(text):\n    words = text.split()\n"
        f"    return ' '.join(w.upper() if (i + 1) % {k} == 0 else w for i, w in enumerate(words))\n",
        _tests(n, [[""]], lambda: [" ".join(_words(rng, 0, 9))]),
    )


@family("clamp_list")
def _clamp(rng, n):
    lo = _int(rng, -10, 0)
    hi = _int(rng, 1, 10)
    return Problem(
        f"Write a function `clamp(xs)` that returns `xs` with every value below {lo} replaced by {lo} and every "
        f"value above {hi} replaced by {hi}.",
        "clamp",
        f"def clamp(xs):\n    return [min(max(x, {lo}), {hi}) for x in xs]\n",
        _tests(n, [[[]]], lambda: [_ints(rng)]),
    )


@family("moving_floor_average")
def _moving_average(rng, n):
    w = _int(rng, 2, 4)
    return Problem(
        f"Write a function `moving_average(xs)` that returns, for every window of {w} consecutive values of `xs`, "
        f"the sum of the window floor-divided by {w} (an empty list if `xs` is shorter than {w}).",
        "moving_average",
        f"def moving_average(xs):\n    return [sum(xs[i:i + {w}]) // {w} for i in range(len(xs) - {w} + 1)]\n",
        _tests(n, [[[]]], lambda: [_ints(rng)]),
    )


@family("cap_repeats")
def _cap_repeats(rng, n):
    k = _int(rng, 1, 3)
    return Problem(
        f"Write a function `cap_repeats(xs)` that returns `xs` with only the first {k} occurrence(s) of each value "
        f"kept, in the original order.",
        "cap_repeats",
        f"def cap_repeats(xs):\n    seen, out = {{}}, []\n    for x in xs:\n        seen[x] = seen.get(x, 0) + 1\n"
        f"        if seen[x] <= {k}:\n            out.append(x)\n    return out\n",
        _tests(n, [[[]]], lambda: [_ints(rng, 0, 12, 0, 4)]),
    )


@family("roman")
def _roman(rng, n):
    lower = bool(rng.integers(2))
    case = "lower-case" if lower else "upper-case"
    return Problem(
        f"Write a function `to_roman(n)` that returns the {case} Roman numeral of 1 <= n <= 3999 (subtractive "
        f"notation: 4 is IV, 9 is IX, 40 is XL, 90 is XC, 400 is CD, 900 is CM).",
        "to_roman",
        "def to_roman(n):\n    table = [(1000, 'M'), (900, 'CM'), (500, 'D'), (400, 'CD'), (100, 'C'), (90, 'XC'),\n"
        "             (50, 'L'), (40, 'XL'), (10, 'X'), (9, 'IX'), (5, 'V'), (4, 'IV'), (1, 'I')]\n    out = ''\n"
        "    for value, sym in table:\n        while n >= value:\n            out += sym\n            n -= value\n"
        f"    return out{'.lower()' if lower else ''}\n",
        _tests(n, [[1], [3999]], lambda: [_int(rng, 1, 3999)]),
    )


@family("char_histogram")
def _char_histogram(rng, n):
    k = _int(rng, 1, 3)
    return Problem(
        f"Write a function `frequent_letters(s)` that returns a dict mapping each character of `s` that occurs "
        f"at least {k} time(s) to its number of occurrences.",
        "frequent_letters",
        f"def frequent_letters(s):\n    counts = {{}}\n    for c in s:\n        counts[c] = counts.get(c, 0) + 1\n"
        f"    return {{c: v for c, v in counts.items() if v >= {k}}}\n",
        _tests(n, [[""]], lambda: [_word(rng, 0, 14, "abcde")]),
    )


# ----- stdin/stdout families -----


@family("stdio_sum_squares", "stdio")
def _sum_squares(rng, n):
    m = _int(rng, 7, 997)
    return Problem(
        f"Read from standard input: a first line with an integer n, then a line with n integers. Print the sum "
        f"of their squares modulo {m}.",
        None,
        f"import sys\n\ndata = sys.stdin.read().split()\nn = int(data[0])\nprint(sum(int(x) ** 2 for x in data[1:1 + n]) % {m})\n",
        _tests(n, ["0\n\n"], lambda: _count_then_values(_ints(rng, 0, 10, -100, 100))),
    )


@family("stdio_reverse_words", "stdio")
def _reverse_words(rng, n):
    sep = str(rng.choice([" ", ",", " | "]))
    return Problem(
        f"Read lines from standard input until the end. For each line, print its whitespace-separated words in "
        f"reverse order, joined by {sep!r}.",
        None,
        f"import sys\n\nfor line in sys.stdin.read().splitlines():\n    print({sep!r}.join(reversed(line.split())))\n",
        _tests(n, [""], lambda: "\n".join(" ".join(_words(rng, 0, 5)) for _ in range(_int(rng, 1, 4))) + "\n"),
    )


@family("stdio_grid_count", "stdio")
def _grid_count(rng, n):
    c = str(rng.choice(list("#*@")))

    def grid():
        rows, cols = _int(rng, 1, 5), _int(rng, 1, 6)
        lines = ["".join(str(rng.choice([c, "."])) for _ in range(cols)) for _ in range(rows)]
        return f"{rows} {cols}\n" + "\n".join(lines) + "\n"

    return Problem(
        f"Read from standard input: a line with two integers r and c, then r lines of c characters. Print how "
        f"many characters of the grid are {c!r}, then on a second line the index (0-based) of the row with the "
        f"most of them (the first such row on ties).",
        None,
        "import sys\n\nlines = sys.stdin.read().split('\\n')\nr, c = map(int, lines[0].split())\nrows = lines[1:1 + r]\n"
        f"counts = [row.count({c!r}) for row in rows]\nprint(sum(counts))\nprint(counts.index(max(counts)))\n",
        _tests(n, [], grid),
    )


@family("stdio_filter_sort", "stdio")
def _filter_sort(rng, n):
    t = _int(rng, -10, 10)
    return Problem(
        f"Read integers separated by whitespace from standard input until the end. Print those that are at "
        f"least {t}, from largest to smallest, one per line (print nothing if there are none).",
        None,
        f"import sys\n\nvalues = sorted((int(x) for x in sys.stdin.read().split() if int(x) >= {t}), reverse=True)\n"
        "for v in values:\n    print(v)\n",
        _tests(n, [""], lambda: " ".join(str(v) for v in _ints(rng, 0, 10, -30, 30)) + "\n"),
    )


def _count_then_values(values: list[int]) -> str:
    return f"{len(values)}\n{' '.join(str(v) for v in values)}\n"
