"""The dashboard's server: `streamlit run dashboard/serve.py -- --results DIR|gs://bucket/prefix` (what `attnbench
dashboard` runs). It serves app.py as an st.App whose start-up imports what the page imports and reads the store into
the cache every session shares, before the server answers its first request: the first viewer after a start meets a
server as warm as the second one does. `streamlit run dashboard/app.py` serves the same page unprepared."""

from __future__ import annotations

import importlib
import logging
import sys
from contextlib import asynccontextmanager

import streamlit as st
from starlette.middleware import Middleware

from dashboard.preload import PreloadPlotly

APP = "app.py"  # beside this file
# st.cache_data asks for a viewer's session; at start-up there is none, by design, and Streamlit's warning of it
# ('missing ScriptRunContext! This warning can be ignored ...') stood in every server's log, the first line after
# its URL
NO_SESSION_LOGGER = "streamlit.runtime.scriptrunner_utils.script_run_context"


def prepare(argv: list[str]) -> None:
    """Import the page's modules (pandas, plotly, runner) and read the store's listing and manifests."""
    importlib.import_module("dashboard.app")
    from dashboard import data

    log = logging.getLogger(NO_SESSION_LOGGER)
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        data.load(data.results_uri(argv))
    finally:
        log.setLevel(level)


@asynccontextmanager
async def prepared(app: st.App):
    """st.App's lifespan: the server answers once `prepare` is done (a bucket that does not answer costs at most
    data.STORE_TIMEOUT_S, then the page says so)."""
    prepare(sys.argv[1:])
    yield


app = st.App(APP, lifespan=prepared, middleware=[Middleware(PreloadPlotly)])
