"""Widgets bound to the page's URL (query parameters), so that a link opens the view it was copied from.

Streamlit drops a bound value that is not among a widget's options without a word; a link to an experiment the
selected runs lack would then quietly show something else. These keep such a value chosen and say so.
"""

from __future__ import annotations

import streamlit as st


def asked(key: str) -> list[str]:
    """What the user chose for `key` so far: the widget's value after the first run, the link's before it."""
    if key in st.session_state:
        value = st.session_state[key]
        return [] if value is None else value if isinstance(value, list) else [value]
    return st.query_params.get_all(key)


def unknown(options: list, chosen: list) -> list:
    """Chosen values that are not among the options (compared as the URL writes them)."""
    known = {str(o) for o in options}
    return [c for c in chosen if str(c) not in known]


def choose(key: str, value) -> None:
    """Make `value` the widget's choice unless the link or the user already chose, and write it into the URL, so that
    a link keeps naming it when the store changes (a newer run arrives). Streamlit writes a choice made in session
    state into the URL only on a later run, and refuses st.query_params for a widget once drawn: so here, before it."""
    if key not in st.session_state and not st.query_params.get_all(key):
        st.session_state[key] = value
        st.query_params[key] = [str(v) for v in value] if isinstance(value, list) else str(value)


def renamed(key: str, names: dict[str, str]) -> None:
    """Choose by its new name a value that a link spelt before it was renamed (`names`: old -> new), and write the
    new name into the URL, so that a bookmark keeps opening what it opened rather than a warning that it is not
    found. Streamlit seeds the widget from the URL as the page was opened, and drops the old name from it: the run
    starts again once, on the new name."""
    if key not in st.session_state and (old := st.query_params.get(key)) in names:
        st.query_params[key] = names[old]
        st.rerun()


def multi(where, label: str, options: list, key: str, missing: str, **kwargs) -> list:
    """A multiselect bound to the URL; a value asked for that the options lack stays chosen, with a warning."""
    extra = unknown(options, asked(key))
    chosen = where.multiselect(label, [*options, *extra], key=key, bind="query-params", **kwargs)
    if flagged := unknown(options, chosen):
        where.warning(f"{label}: {', '.join(map(str, flagged))} {missing}")
    return chosen


def single(where, widget: str, label: str, options: list, key: str, missing: str, chosen=None, **kwargs):
    """A one-value widget (`widget`: 'radio', 'selectbox' or 'segmented_control' of `where`) bound to the URL,
    a value asked for that the options lack kept and flagged. `chosen`: a first value that depends on the
    store's contents, so it is made a choice (kept in the URL) rather than a default (left out of it)."""
    if chosen is not None:
        choose(key, chosen)
        kwargs["index"] = None
    extra = unknown(options, asked(key))[:1]
    value = getattr(where, widget)(label, [*options, *extra], key=key, bind="query-params", **kwargs)
    if value is not None and unknown(options, [value]):
        where.warning(f"{label}: {value} {missing}")
    return value
