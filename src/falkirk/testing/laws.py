"""``check_domain_laws``: does a time domain obey the laws frontiers rely on?

Every domain, built-in or plugged in through :func:`falkirk.domains.register_domain`,
must pass these checks (STYLE.md). They run hypothesis on sampled times and
frontiers, in four groups:

1. **order** — on every pair and triple of a sample of times,
   ``less_equal`` is reflexive, antisymmetric and transitive (and total
   when ``is_total`` says so); ``check_time`` returns sampled
   times unchanged; ``sort_key`` is injective and agrees with the order
   (``a < b`` implies ``sort_key(a) < sort_key(b)``).
2. **antichain operations** — ``minimal()`` is the antichain of minimal
   times; ``successors(t)`` holds the minimal times not ``<= t``;
   ``join_times(a, b)`` the minimal upper bounds of ``a`` and ``b``.
3. **lattice** — frontier meet and join are commutative, associative and
   absorptive, ``⊆`` agrees with meet, join and membership, membership of a
   meet/join is the and/or of memberships, frontiers are downward closed,
   equality and hashing agree.
4. **closures** — ``Frontier.upto(S)`` is the smallest frontier containing
   ``S``; ``Frontier.below(t)`` the largest without ``t``;
   ``Frontier.before(S)`` the times not ``>=`` any of ``S``.

A violation raises :class:`DomainLawError` (an ``AssertionError``) whose
message starts with the law's name and shows the (shrunk) counterexample.
Hypothesis does not support nesting: do not call this inside an ``@given`` test.

>>> from falkirk.domains import Product
>>> check_domain_laws(Product(2), max_examples=30)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.strategies import SearchStrategy

from falkirk.domains import Domain, Frontier
from falkirk.testing._args import check_domain_argument
from falkirk.testing._times import frontiers
from falkirk.testing._times import times as default_times

__all__ = ["DomainLawError", "check_domain_laws"]


class DomainLawError(AssertionError):
    """A time domain broke a law; ``law`` names it and the message shows the counterexample."""

    def __init__(self, law: str, detail: str) -> None:
        super().__init__(f"{law}: {detail}")
        self.law = law


def _fail(law: str, detail: str) -> None:
    raise DomainLawError(law, detail)


def _is_antichain(d: Domain, xs: tuple[Any, ...], law: str, what: str) -> None:
    for i, a in enumerate(xs):
        for b in xs[i + 1 :]:
            if a == b or d.less_equal(a, b) or d.less_equal(b, a):
                _fail(law, f"{what} = {xs!r} is not an antichain ({a!r} and {b!r} are comparable)")


# -- 1. the order ---------------------------------------------------------------------
def _order_laws(d: Domain, ts: list[Any]) -> None:
    """The order laws on every pair and triple of the sampled times ``ts``."""
    le = d.less_equal
    for t in ts:
        if d.check_time(t) != t:
            _fail("check_time", f"check_time({t!r}) = {d.check_time(t)!r}, not the time itself")
        if not le(t, t):
            _fail("reflexivity", f"not t <= t for t={t!r}")
    for a in ts:
        for b in ts:
            _pair_laws(d, a, b)
            if le(a, b):
                for c in ts:
                    if le(b, c) and not le(a, c):
                        _fail(
                            "transitivity", f"a <= b and b <= c but not a <= c for a={a!r}, b={b!r}, c={c!r}"
                        )


def _pair_laws(d: Domain, a: Any, b: Any) -> None:
    le = d.less_equal
    if le(a, b) and le(b, a) and a != b:
        _fail("antisymmetry", f"a <= b and b <= a but a != b for a={a!r}, b={b!r}")
    if d.is_total and not (le(a, b) or le(b, a)):
        _fail("totality", f"is_total is True but a={a!r} and b={b!r} are incomparable")
    ka, kb = d.sort_key(a), d.sort_key(b)
    if ka == kb and a != b:
        _fail("sort_key injective", f"sort_key(a) == sort_key(b) == {ka!r} for a={a!r} != b={b!r}")
    if le(a, b) and a != b and not ka < kb:
        _fail(
            "sort_key agrees with the order",
            f"a < b but not sort_key(a) < sort_key(b) for a={a!r}, b={b!r} (keys {ka!r}, {kb!r})",
        )
    if a == b and hash(a) != hash(b):
        _fail("time hash", f"equal times {a!r} and {b!r} hash differently")


# -- 2. minimal, successors, join_times -------------------------------------------------
def _antichain_laws(d: Domain, ts: list[Any]) -> None:
    """minimal(), successors() and join_times() against every triple of the sampled times."""
    for t in ts:
        for u in ts:
            for v in ts:
                _antichain_triple(d, t, u, v)


def _antichain_triple(d: Domain, t: Any, u: Any, v: Any) -> None:
    le = d.less_equal
    mins = tuple(d.minimal())
    if not mins:
        _fail("minimal", "minimal() is empty")
    _is_antichain(d, mins, "minimal", "minimal()")
    if not any(le(m, t) for m in mins):
        _fail("minimal", f"t={t!r} is not >= any element of minimal() = {mins!r}")
    for m in mins:
        if le(t, m) and t != m:
            _fail("minimal", f"t={t!r} < {m!r}, so {m!r} in minimal() is not minimal")
    succ = tuple(d.successors(t))
    _is_antichain(d, succ, "successors", f"successors({t!r})")
    for s in succ:
        if le(s, t):
            _fail("successors", f"s={s!r} in successors(t) but s <= t for t={t!r}")
        if le(u, s) and u != s and not le(u, t):
            _fail(
                "successors",
                f"u={u!r} < s={s!r} in successors(t) but not u <= t, so s is not minimal (t={t!r})",
            )
    if not le(u, t) and not any(le(s, u) for s in succ):
        _fail("successors", f"u={u!r} is not <= t={t!r} but is not >= any of successors(t) = {succ!r}")
    joins = tuple(d.join_times(t, u))
    _is_antichain(d, joins, "join_times", f"join_times({t!r}, {u!r})")
    if d.is_total and len(joins) != 1:
        _fail("join_times", f"a total order has one join, not {joins!r} for a={t!r}, b={u!r}")
    for j in joins:
        if not (le(t, j) and le(u, j)):
            _fail("join_times", f"j={j!r} in join_times(a, b) is not an upper bound of a={t!r}, b={u!r}")
        if le(t, v) and le(u, v) and le(v, j) and v != j:
            _fail("join_times", f"upper bound v={v!r} < j={j!r}, so j is not minimal (a={t!r}, b={u!r})")
    if le(t, v) and le(u, v) and not any(le(j, v) for j in joins):
        _fail("join_times", f"v={v!r} is an upper bound of a={t!r}, b={u!r} but not >= any of {joins!r}")


# -- 3. the frontier lattice ------------------------------------------------------------
def _lattice_laws(d: Domain, f: Frontier, g: Frontier, h: Frontier, ts: list[Any]) -> None:
    top, empty = Frontier.top(d), Frontier.empty(d)
    pairs = ((f, g), (g, h), (f, h))
    for x, y in pairs:
        if x & y != y & x:
            _fail("meet commutative", f"f ∩ g = {x & y!r} but g ∩ f = {y & x!r} for f={x!r}, g={y!r}")
        if x | y != y | x:
            _fail("join commutative", f"f ∪ g = {x | y!r} but g ∪ f = {y | x!r} for f={x!r}, g={y!r}")
        if x & (x | y) != x:
            _fail("absorption", f"f ∩ (f ∪ g) = {x & (x | y)!r} != f for f={x!r}, g={y!r}")
        if x | (x & y) != x:
            _fail("absorption", f"f ∪ (f ∩ g) = {x | (x & y)!r} != f for f={x!r}, g={y!r}")
        sub = x <= y
        if sub != (x & y == x):
            _fail("⊆ agrees with meet", f"f ⊆ g is {sub} but f ∩ g == f is {x & y == x} for f={x!r}, g={y!r}")
        if sub != (x | y == y):
            _fail("⊆ agrees with join", f"f ⊆ g is {sub} but f ∪ g == g is {x | y == y} for f={x!r}, g={y!r}")
        if (x == y) != (sub and y <= x):
            _fail("equality", f"f == g is {x == y} but f ⊆ g ⊆ f is {sub and y <= x} for f={x!r}, g={y!r}")
        if x == y and hash(x) != hash(y):
            _fail("hash", f"equal frontiers {x!r} and {y!r} hash differently")
        for t in ts:
            inx, iny = t in x, t in y
            if sub and inx and not iny:
                _fail(
                    "⊆ agrees with membership", f"f ⊆ g but t={t!r} is in f and not in g for f={x!r}, g={y!r}"
                )
            if (t in (x & y)) != (inx and iny):
                _fail("meet membership", f"t in f ∩ g is {t in (x & y)} for t={t!r}, f={x!r}, g={y!r}")
            if (t in (x | y)) != (inx or iny):
                _fail("join membership", f"t in f ∪ g is {t in (x | y)} for t={t!r}, f={x!r}, g={y!r}")
    if (f & g) & h != f & (g & h):
        _fail("meet associative", f"(f ∩ g) ∩ h != f ∩ (g ∩ h) for f={f!r}, g={g!r}, h={h!r}")
    if (f | g) | h != f | (g | h):
        _fail("join associative", f"(f ∪ g) ∪ h != f ∪ (g ∪ h) for f={f!r}, g={g!r}, h={h!r}")
    if not (empty <= f <= top) or f & top != f or f | empty != f or f & empty != empty or f | top != top:
        _fail("bounds", f"∅ and ⊤ are not the bottom and top of the lattice for f={f!r}")
    for t in ts:
        if t not in top or t in empty:
            _fail("bounds", f"t={t!r}: t in ⊤ is {t in top}, t in ∅ is {t in empty}")
        for u in ts:
            if d.less_equal(u, t) and t in f and u not in f:
                _fail("downward closed", f"t={t!r} in f and u={u!r} <= t but u not in f for f={f!r}")


# -- 4. upto, below, before -------------------------------------------------------------
def _closure_laws(d: Domain, s: list[Any], t: Any, g: Frontier, us: list[Any]) -> None:
    le = d.less_equal
    up = Frontier.upto(d, s)
    for x in s:
        if x not in up:
            _fail("upto contains S", f"{x!r} in S but not in upto(S) = {up!r} for S={s!r}")
    if all(x in g for x in s) and not up <= g:
        _fail("upto is the smallest", f"g={g!r} contains S={s!r} but not upto(S) = {up!r}")
    bel = Frontier.below(d, t)
    if t in bel:
        _fail("below excludes t", f"t={t!r} is in below(t) = {bel!r}")
    if t not in g and not g <= bel:
        _fail("below is the largest", f"t={t!r} is not in g={g!r} but g is not ⊆ below(t) = {bel!r}")
    bef = Frontier.before(d, s)
    for u in us + s + [t]:
        if (u in up) != any(le(u, x) for x in s):
            _fail("upto is downward closed", f"u={u!r}: u in upto(S) is {u in up} for S={s!r}")
        if (u in bel) == le(t, u):
            _fail("below(t) is the times not >= t", f"u={u!r}: u in below(t) is {u in bel} for t={t!r}")
        if (u in bef) == any(le(x, u) for x in s):
            _fail("before(S) is the times not >= S", f"u={u!r}: u in before(S) is {u in bef} for S={s!r}")


def check_domain_laws(
    domain: Domain, *, max_examples: int = 200, times: SearchStrategy[Any] | None = None
) -> None:
    """Check that ``domain`` obeys the laws of the module docstring.

    Parameters
    ----------
    domain
        The domain instance to check.
    max_examples
        Hypothesis examples per law group (four groups).
    times
        A strategy of valid times of ``domain``; by default the registered
        strategy for ``domain.name`` (see :func:`falkirk.testing.register_time_strategy`).
        Small ranges, where times collide and compare, find more bugs.

    Raises
    ------
    DomainLawError
        Naming the violated law, e.g. ``"transitivity: a <= b and b <= c but
        not a <= c for a=0, b=1, c=2"``.
    """
    check_domain_argument(domain)
    if isinstance(max_examples, bool) or not isinstance(max_examples, int) or max_examples < 1:
        raise InvalidArgument(f"max_examples={max_examples!r} must be an integer >= 1")
    if times is None:
        times = default_times(domain)
    elif not isinstance(times, SearchStrategy):
        raise InvalidArgument(f"times={times!r} must be a hypothesis strategy of times of {domain}")
    fr = frontiers(domain, times=times)
    few = st.lists(times, min_size=1, max_size=4)
    groups: list[tuple[Callable[..., None], tuple[SearchStrategy[Any], ...]]] = [
        (_order_laws, (st.lists(times, min_size=1, max_size=6),)),
        (_antichain_laws, (st.lists(times, min_size=1, max_size=4),)),
        (_lattice_laws, (fr, fr, fr, few)),
        (_closure_laws, (few, times, fr, few)),
    ]
    run = settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
    )
    for law, strategies in groups:
        _run(run, law, domain, strategies)


def _run(
    run: settings, law: Callable[..., None], domain: Domain, strategies: Iterable[SearchStrategy[Any]]
) -> None:
    @run
    @given(st.tuples(*strategies))
    def check(args: tuple[Any, ...]) -> None:
        law(domain, *args)

    check.__name__ = check.__qualname__ = f"check_domain_laws[{domain}]{law.__name__}"
    check()
